"""`python -m loadgen summarize RUN_DIR [--phase measure] [--duration-s S] [--slo ttft_ms=500,tpot_ms=50]`

Prints the run's summary (loadgen.metrics.summarize: vLLM definitions, intended-time latency,
GuideLLM and genai-perf views, goodput) as JSON, from requests.parquet and tokens.parquet,
plus the client-health verdict when the run has one. No Locust, no server: files only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

from loadgen.errors import SpecError
from loadgen.metrics import SLO, summarize


def parse_slo(text: str) -> SLO:
    """'ttft_ms=500,tpot_ms=50' → SLO; errors name the key."""
    values = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SpecError(f"--slo: expected key=value, got {item!r}")
        try:
            values[key.strip()] = float(value)
        except ValueError:
            raise SpecError(f"--slo.{key.strip()} must be a number, got {value!r}") from None
    return SLO.from_dict(values, "--slo")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadgen", description=__doc__.split("\n\n")[1])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("summarize", help="metrics of a run directory as JSON")
    s.add_argument("run_dir", type=Path)
    s.add_argument("--phase", default="measure", choices=["measure", "warmup", "all"])
    s.add_argument(
        "--duration-s",
        type=float,
        default=None,
        help="measured duration for throughput (default: first send to last end)",
    )
    s.add_argument(
        "--slo", default=None, help="goodput objectives, e.g. ttft_ms=500,tpot_ms=50,e2e_ms=2000"
    )
    args = parser.parse_args(argv)
    for name in ("requests.parquet", "tokens.parquet"):
        if not (args.run_dir / name).is_file():
            print(f"{args.run_dir / name}: no such file", file=sys.stderr)
            return 2
    try:
        slo = parse_slo(args.slo) if args.slo else None
    except SpecError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    summary = summarize(
        pq.read_table(args.run_dir / "requests.parquet"),
        pq.read_table(args.run_dir / "tokens.parquet"),
        phase=None if args.phase == "all" else args.phase,
        duration_s=args.duration_s,
        slo=slo,
    )
    health = args.run_dir / "loadgen" / "client_health.json"
    if health.is_file():
        summary["client_health"] = json.loads(health.read_text())
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
