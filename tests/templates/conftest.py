"""Fixtures of the templates tests: page contexts as plain data in the shape of the typed
contexts of pages/ (`typed(kind, data)` builds the typed object a render takes), and a small
HTML element tree to query pages.

The main fixture is a one-minute gc-storm run: 60 one-second windows, ITL p99 near 45 ms that
rises to ~255 ms from 00:20 to 00:32 while GC gen-2 pauses land inside steps; the attribution
gives memory 78% with its evidence, and the injected fault was detected with the right cause.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from html.parser import HTMLParser

import pytest

from pages.evaluation import EvaluationContext
from pages.from_mapping import from_mapping
from pages.incident import IncidentContext
from pages.index import IndexContext
from pages.nightly import NightlyContext
from pages.sweep import SweepContext

XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = '"><img src=x onerror=alert(1)>'

SCENARIO_YAML = """name: gc-storm
duration_s: 60
warmup_s: 5
engine:
  model: small
  max_num_seqs: 32
workload:
  prompt_tokens: {mean: 128, std: 32, min: 16, max: 512}
  output_tokens: {mean: 64, std: 16, min: 8, max: 256}
load:
  shape: constant
  users: 16
faults:
  - kind: memory.gc_storm
    start_s: 20
    duration_s: 12
"""


def _windows(rng: random.Random) -> list[dict]:
    rows = []
    for t in range(60):
        in_spike = 20 <= t < 32
        itl50 = 21.0 + rng.uniform(-1.5, 1.5) + (9.0 if in_spike else 0.0)
        itl99 = (255.0 if in_spike else 45.0) + rng.uniform(-6, 6)
        rows.append(
            {
                "t_s": float(t),
                "itl_p50_ms": round(itl50, 2),
                "itl_p99_ms": round(itl99, 2),
                "ttft_p99_ms": round((610.0 if in_spike else 180.0) + rng.uniform(-15, 15), 2),
                "e2e_p99_ms": round((2900.0 if in_spike else 1550.0) + rng.uniform(-60, 60), 1),
                "requests": 14 + rng.randint(-2, 2),
                "tokens": 780 + rng.randint(-40, 40),
            }
        )
    rows[45]["ttft_p99_ms"] = None  # a window with no first token: the line must break, not bridge
    return rows


def _gc_pauses(rng: random.Random) -> list[dict]:
    pauses = [{"t_s": float(t) + 0.4, "duration_ms": 3.1, "generation": 0} for t in range(0, 60, 7)]
    t = 20.1
    while t < 32:
        pauses.append(
            {"t_s": round(t, 2), "duration_ms": round(rng.uniform(150, 220), 1), "generation": 2}
        )
        t += 0.9
    return sorted(pauses, key=lambda p: p["t_s"])


def make_incident_context() -> dict:
    rng = random.Random(7)
    return {
        "run": {
            "run_id": "20261130T020000Z-gc-storm-3f2a",
            "scenario_name": "gc-storm",
            "started_at": "2026-11-30T02:00:00Z",
            "duration_s": 60,
            "warmup_s": 5,
            "engine": {"model": "small", "tp": 1, "max_num_seqs": 32, "kv_blocks": 512},
            "scenario_yaml": SCENARIO_YAML,
            "command": "spikelens replay scenarios/demo-gc-storm.yaml --seed 0",
            "host": "ci-runner-2",
            "git_commit": "b6708c4",
            "status": "completed",
            "errors": [],
        },
        "headline": (
            "ITL p99 rose from 45 ms to 255 ms for 12 s from 00:20; 78% of the excess is "
            "memory: GC gen-2 pauses, 187 ms on average"
        ),
        "totals": {
            "requests": 842,
            "errors": 0,
            "output_tokens": 53_880,
            "ttft_p50_ms": 96.0,
            "ttft_p99_ms": 590.0,
            "itl_p50_ms": 22.4,
            "itl_p99_ms": 231.0,
            "e2e_p50_ms": 1420.0,
            "e2e_p99_ms": 2870.0,
        },
        "windows": _windows(rng),
        "steps": [
            {
                "t_s": i * 0.5,
                "forward_ms": 18.0,
                "penalty_ms": 0.6,
                "sample_ms": 0.9,
                "schedule_ms": 0.3,
                "comm_ms": 0.0,
                "batch_size": 16,
            }
            for i in range(120)
        ],
        "gc_pauses": _gc_pauses(rng),
        "spikes": [
            {
                "spike_id": 1,
                "metric": "itl_p99",
                "start_s": 20.0,
                "end_s": 32.0,
                "peak_ms": 261.0,
                "baseline_ms": 45.0,
                "severity": 9.4,
                "top_cause": "memory",
                "attributions": [
                    {
                        "cause": "load",
                        "share": 0.07,
                        "confidence": 0.4,
                        "evidence": [
                            {
                                "signal": "arrivals_per_s",
                                "value": 14.1,
                                "baseline": 13.9,
                                "unit": "/s",
                                "note": "arrival rate flat",
                            }
                        ],
                    },
                    {
                        "cause": "memory",
                        "share": 0.78,
                        "confidence": 0.9,
                        "evidence": [
                            {
                                "signal": "gc_pause_ms_mean",
                                "value": 187.0,
                                "baseline": 3.1,
                                "unit": "ms",
                                "note": "gen-2 pauses overlap 61% of steps",
                            },
                            {
                                "signal": "gc_pauses_per_min",
                                "value": 66.0,
                                "baseline": 8.6,
                                "unit": "/min",
                                "note": "",
                            },
                        ],
                    },
                    {"cause": "unexplained", "share": 0.15, "confidence": None, "evidence": []},
                ],
            }
        ],
        "comparison": [
            {"signal": "ITL p99", "unit": "ms", "normal": 45.0, "spike": 255.0},
            {"signal": "GC pauses per minute", "unit": "/min", "normal": 8.6, "spike": 66.0},
            {"signal": "mean GC pause", "unit": "ms", "normal": 3.1, "spike": 187.0},
            {"signal": "KV occupancy", "unit": "%", "normal": 41.0, "spike": 44.0},
        ],
        "faults": [
            {
                "kind": "memory.gc_storm",
                "cause": "memory",
                "start_s": 20.0,
                "end_s": 32.0,
                "detected": True,
                "attributed_cause": "memory",
            }
        ],
    }


def make_hostile_context() -> dict:
    """Every string a user, request or scenario controls carries markup that must not run."""
    ctx = make_incident_context()
    run = ctx["run"]
    run["scenario_name"] = f"evil {XSS_SCRIPT} {XSS_IMG}"
    run["run_id"] = f"run-{XSS_IMG}"
    run["scenario_yaml"] = f"name: '{XSS_SCRIPT}'\nprompt: '{XSS_IMG}'\n"
    run["command"] = f"spikelens replay '{XSS_IMG}'"
    run["errors"] = [f"400 prompt {XSS_SCRIPT}", f"bad field {XSS_IMG}"]
    run["engine"] = {"model": XSS_IMG}
    run["status"] = XSS_IMG
    ctx["headline"] = f"{XSS_SCRIPT} spiked"
    spike = ctx["spikes"][0]
    spike["metric"] = XSS_IMG
    spike["top_cause"] = XSS_IMG
    spike["attributions"][0]["evidence"][0]["note"] = XSS_SCRIPT
    spike["attributions"][0]["evidence"][0]["signal"] = XSS_IMG
    ctx["comparison"][0]["signal"] = XSS_SCRIPT
    ctx["faults"][0]["kind"] = XSS_SCRIPT
    return ctx


@pytest.fixture
def incident_context() -> dict:
    return make_incident_context()


@pytest.fixture
def hostile_context() -> dict:
    return make_hostile_context()


# --- a tiny element tree over html.parser, so tests ask for elements by tag, class and id ---

_VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    children: list[Element] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # text directly inside, and of all descendants

    @property
    def text(self) -> str:
        return " ".join("".join(self.texts).split())

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def iter(self):
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(
        self, tag: str | None = None, cls: str | None = None, **attrs: str
    ) -> list[Element]:
        return [
            e
            for e in self.iter()
            if (tag is None or e.tag == tag)
            and (cls is None or cls in e.classes)
            and all(e.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]

    def find(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Element:
        found = self.find_all(tag, cls, **attrs)
        assert found, f"no <{tag} class={cls} {attrs}> in the page"
        return found[0]


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        el = Element(tag, dict(attrs))
        self.stack[-1].children.append(el)
        if tag not in _VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Element(tag, dict(attrs)))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        for el in self.stack:
            el.texts.append(data)


def parse_html(html: str) -> Element:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root


@pytest.fixture
def parse():
    return parse_html


@pytest.fixture
def xss_strings() -> tuple[str, str]:
    return (XSS_SCRIPT, XSS_IMG)


def make_index_context() -> dict:
    return {
        "title": "spikelens reports",
        "generated_at": "2026-11-30T06:00:00Z",
        "runs": [
            {
                "run_id": "20261130T020000Z-gc-storm-3f2a",
                "kind": "incident",
                "started_at": "2026-11-30T02:00:00Z",
                "scenario_name": "gc-storm",
                "verdict": "matched",
                "top_cause": "memory",
                "href": "20261130T020000Z-gc-storm-3f2a/index.html",
                "headline": "ITL p99 rose from 45 ms to 255 ms for 12 s from 00:20",
            },
            {
                "run_id": "20261130T030000Z-nightly-9b1c",
                "kind": "nightly",
                "started_at": "2026-11-30T03:00:00Z",
                "scenario_name": "nightly-small",
                "verdict": "regression",
                "top_cause": None,
                "href": "20261130T030000Z-nightly-9b1c/index.html",
            },
            {
                "run_id": "20261129T030000Z-sweep-77aa",
                "kind": "sweep",
                "started_at": "2026-11-29T03:00:00Z",
                "scenario_name": "penalty sweep",
                "verdict": None,
                "top_cause": "penalty",
                "href": "20261129T030000Z-sweep-77aa/index.html",
            },
        ],
    }


def make_nightly_context() -> dict:
    """Metric rows in rca.compare.MetricVerdict.to_dict() shape, plus unit and scenario."""
    days = [
        "2026-11-24",
        "2026-11-25",
        "2026-11-26",
        "2026-11-27",
        "2026-11-28",
        "2026-11-29",
        "2026-11-30",
    ]
    itl = [44.1, 45.3, 43.8, 44.9, 45.6, 44.4, 52.7]
    tput = [1510.0, 1498.0, 1522.0, 1505.0, 1490.0, 1512.0, 1507.0]
    trend = []
    for day, a, b in zip(days, itl, tput):
        run_id = f"{day.replace('-', '')}T030000Z-nightly"
        for metric, value in (("itl_p99", a), ("output_tokens_per_s", b)):
            trend.append(
                {
                    "run_id": run_id,
                    "started_at": f"{day}T03:00:00Z",
                    "metric": metric,
                    "value": value,
                    "scenario": "nightly-small",
                }
            )
    return {
        "run": {
            "run_id": "20261130T030000Z-nightly",
            "scenario_name": "nightly-small",
            "started_at": "2026-11-30T03:00:00Z",
            "command": "spikelens nightly scenarios/nightly.yaml",
            "git_commit": "b6708c4",
        },
        "baseline_label": "median of the last 6 nightlies",
        "metrics": [
            {
                "metric": "itl_p99",
                "unit": "ms",
                "scenario": "nightly-small",
                "baseline": 44.6,
                "candidate": 52.7,
                "delta": 8.1,
                "ci_low": 4.2,
                "ci_high": 11.9,
                "rel_delta": 0.1816,
                "verdict": "regressed",
                "n_baseline": 6,
                "n_candidate": 1,
                "run_noise": 0.093,
            },
            {
                "metric": "output_tokens_per_s",
                "unit": "tok/s",
                "scenario": "nightly-small",
                "baseline": 1506.5,
                "candidate": 1507.0,
                "delta": 0.5,
                "ci_low": -14.0,
                "ci_high": 15.2,
                "verdict": "unchanged",
            },
            {
                "metric": "ttft_p99",
                "unit": "ms",
                "scenario": "nightly-small",
                "baseline": 180.0,
                "candidate": float("nan"),
                "delta": float("nan"),
                "ci_low": float("nan"),
                "ci_high": float("nan"),
                "verdict": "insufficient",
            },
        ],
        "trend": trend,
        "incident_href": "incident/index.html",
    }


def make_sweep_context() -> dict:
    temps, pens = [0.2, 0.7, 1.0, 1.3], [0.0, 0.5, 1.0]
    cells = []  # x: temperature, y: frequency_penalty
    for t in temps:
        for p in pens:
            loop = max(0.0, 0.6 - 0.5 * p - 0.3 * t)  # near-greedy, unpenalised decoding loops most
            cells.append(
                {
                    "x": t,
                    "y": p,
                    "requests": 32,
                    "values": {
                        "repeated_3gram_rate": round(loop, 3),
                        "entropy_bits": round(1.2 + 1.8 * t - 0.2 * p, 2),
                        "output_tokens": round(64 + 180 * loop, 1),
                        "itl_p99_ms": round(44 + 20 * loop + 3 * p, 1),
                    },
                }
            )
    cells[-1]["values"]["itl_p99_ms"] = float(
        "nan"
    )  # a cell whose requests produced no ITL sample (rca: NaN)
    return {
        "run": {
            "run_id": "20261129T030000Z-sweep-77aa",
            "scenario_name": "penalty sweep",
            "started_at": "2026-11-29T03:00:00Z",
            "command": "spikelens sweep scenarios/sweep.yaml",
        },
        "x": {"name": "temperature", "values": temps},
        "y": {"name": "frequency_penalty", "values": pens},
        "metrics": [
            {"key": "repeated_3gram_rate", "label": "repeated 3-gram rate", "unit": ""},
            {
                "key": "entropy_bits",
                "label": "token entropy",
                "unit": "bits",
                "higher_is_worse": False,
            },
            {"key": "output_tokens", "label": "output length", "unit": "tokens"},
            {"key": "itl_p99_ms", "label": "ITL p99", "unit": "ms"},
        ],
        "cells": cells,
    }


def make_evaluation_context() -> dict:
    labels = ["penalty", "memory", "communication", "load", "unexplained"]
    return {
        "run": {
            "run_id": "20261130T040000Z-eval",
            "scenario_name": "evaluation suite",
            "started_at": "2026-11-30T04:00:00Z",
            "command": "spikelens evaluate scenarios/eval/",
        },
        "labels": labels,
        "confusion": [
            [8, 1, 0, 1, 0],
            [0, 9, 0, 0, 1],
            [0, 0, 7, 0, 3],
            [1, 0, 0, 9, 0],
            [0, 0, 0, 1, 4],
        ],
        "per_cause": [
            {"cause": "penalty", "precision": 0.89, "recall": 0.8, "f1": 0.84, "support": 10},
            {"cause": "memory", "precision": 0.9, "recall": 0.9, "f1": 0.9, "support": 10},
        ],
        "method_columns": [
            {"key": "detection_f1", "label": "detection F1"},
            {"key": "attribution_accuracy", "label": "attribution accuracy"},
            {"key": "mean_delay_s", "label": "mean delay", "unit": "s", "better": "lower"},
        ],
        "methods": [
            {
                "method": "spikelens",
                "scores": {"detection_f1": 0.91, "attribution_accuracy": 0.82, "mean_delay_s": 1.4},
            },
            {
                "method": "ruptures PELT",
                "note": "detection only",
                "scores": {"detection_f1": 0.84, "attribution_accuracy": None, "mean_delay_s": 2.9},
            },
        ],
        "cases": [
            {
                "run_id": "r1",
                "fault_kind": "memory.gc_storm",
                "truth": "memory",
                "predicted": "memory",
                "detected": True,
                "href": "r1/index.html",
            }
        ],
    }


_TYPES = {
    "incident": IncidentContext,
    "hostile": IncidentContext,
    "index": IndexContext,
    "nightly": NightlyContext,
    "sweep": SweepContext,
    "evaluation": EvaluationContext,
}


@pytest.fixture(scope="session")
def typed():
    """typed(kind, data) → the typed context of that page kind, built from plain data."""
    return lambda kind, data: from_mapping(_TYPES[kind], data)


@pytest.fixture
def index_context() -> dict:
    return make_index_context()


@pytest.fixture
def nightly_context() -> dict:
    return make_nightly_context()


@pytest.fixture
def sweep_context() -> dict:
    return make_sweep_context()


@pytest.fixture
def evaluation_context() -> dict:
    return make_evaluation_context()


@pytest.fixture(scope="module")
def all_contexts() -> dict:
    """One of each context, for module-scoped fixtures (the browser test renders a whole folder)."""
    return {
        "incident": make_incident_context(),
        "hostile": make_hostile_context(),
        "index": make_index_context(),
        "nightly": make_nightly_context(),
        "sweep": make_sweep_context(),
        "evaluation": make_evaluation_context(),
    }


@pytest.fixture(scope="session")
def real_pages(tmp_path_factory):
    """Contexts the real builders make over a warehouse of simulated runs (one per session)."""
    from tests.support.page_contexts import RealPages

    return RealPages.build(tmp_path_factory.mktemp("real-pages"))
