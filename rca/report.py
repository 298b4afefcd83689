"""Build the incident context (docs/INTERFACES.md) of an analysed run for the HTML report.

Everything comes from the warehouse: the run, its latency windows, steps, GC pauses, the stored
analysis (spikes, attributions, evidence) and the ground-truth faults. Times are seconds from
load_started_ns. The step series is downsampled to at most MAX_STEPS points, keeping the slowest
step of each chunk so stalls stay visible; GC pauses to the MAX_GC_PAUSES longest.
"""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import yaml

from rca.evaluate import match_events
from warehouse.db import connect
from warehouse.queries import query

MAX_STEPS = 2000
MAX_GC_PAUSES = 2000
_METRIC_LABEL = {"itl_p99": "ITL p99", "ttft_p99": "TTFT p99", "e2e_p99": "E2E p99"}
_STEP_KEYS = ("t_s", "forward_ms", "penalty_ms", "sample_ms", "schedule_ms", "comm_ms", "batch_size")


def _mmss(t_s: float) -> str:
    t = max(0, int(round(t_s)))
    return f"{t // 60:02d}:{t % 60:02d}"


def _num(v):
    """JSON-safe number: NaN/inf → None."""
    if v is None:
        return None
    f = float(v)
    return None if math.isnan(f) or math.isinf(f) else f


def _downsample_rows(rows: list[dict], max_points: int) -> list[dict]:
    """Every k-th row so that at most max_points remain (for per-sample series)."""
    step = max(1, -(-len(rows) // max_points))
    return rows[::step]


def _steps_with_ranks(steps: list[dict], rank_steps: list[dict]) -> list[dict]:
    """Rank-0 steps with their stage times and KV/queue series, plus the other ranks' comm wait
    (one row per rank and step), each rank downsampled to at most MAX_STEPS points."""
    by_step = {(r["step"], r["rank"]): r for r in rank_steps}
    out = []
    for s in downsample_steps(steps):
        extra = by_step.get((s["step"], 0), {})
        out.append({**{k: _num(s[k]) for k in _STEP_KEYS}, "rank": 0,
                    **{k: _num(extra.get(k)) for k in ("kv_blocks_used", "kv_blocks_total",
                                                       "preempted", "waiting")}})
    others = [r for r in rank_steps if r["rank"] != 0]
    for rank in sorted({r["rank"] for r in others}):
        rows = [r for r in others if r["rank"] == rank]
        out += [{"t_s": _num(r["t_s"]), "rank": rank, "comm_ms": _num(r["comm_ms"])}
                for r in _downsample_rows(rows, MAX_STEPS)]
    return out


def downsample_steps(steps: list[dict], max_points: int = MAX_STEPS) -> list[dict]:
    """At most max_points steps: the slowest (dur_ms) of each of max_points equal-count chunks."""
    if len(steps) <= max_points:
        return steps
    chunks = np.array_split(np.arange(len(steps)), max_points)
    return [steps[int(max(c, key=lambda i: steps[i]["dur_ms"] or 0.0))] for c in chunks]


def _run_section(row: dict) -> dict:
    scenario = json.loads(row["scenario"]) if row.get("scenario") else None
    errors = json.loads(row["errors"]) if row.get("errors") else []
    started = (datetime.fromtimestamp(row["started_ns"] / 1e9, tz=timezone.utc).isoformat(timespec="seconds")
               if row.get("started_ns") else None)
    return {
        "run_id": row["run_id"],
        "scenario_name": row.get("scenario_name") or (scenario or {}).get("name") or row["run_id"],
        "started_at": started,
        "duration_s": row.get("duration_s"),
        "warmup_s": row.get("warmup_s"),
        # a target run stores engine null: JSON 'null' loads as None, the template wants a mapping
        "engine": (json.loads(row["engine"]) if row.get("engine") else None) or {},
        **_driven_section(row),
        "scenario_yaml": yaml.safe_dump(scenario, sort_keys=False) if isinstance(scenario, dict) else "",
        "command": row.get("command") or "",
        "host": row.get("host"),
        "git_commit": row.get("git_commit"),
        "status": row.get("status"),
        "errors": [str(e) for e in (errors if isinstance(errors, list) else [errors])],
    }


def _driven_section(row: dict) -> dict:
    """What the load drove (run.json): the target URL of an engine spikelens did not start, the
    model id and endpoint the requests named, and why the load stopped early, if it did."""
    run_json = json.loads(row["run_json"]) if row.get("run_json") else {}
    extra = (run_json or {}).get("extra") or {}
    vllm = extra.get("vllm") or {}
    return {"target": (run_json or {}).get("target"), "model": extra.get("model"),
            "endpoint": extra.get("endpoint"), "stopped_early": extra.get("stopped_early"),
            # a vLLM spikelens started: its build and the exact command line it ran
            "server": (f"{vllm.get('distribution')} {vllm.get('version')}" if vllm else None),
            "server_argv": " ".join(vllm.get("argv") or []) or None}


def _headline(spikes: list[dict], totals: dict, duration_s: float | None) -> str:
    if not spikes and not totals.get("requests"):
        return "No measured requests in this run: nothing to analyse (see the run's status and errors)."
    if not spikes:
        span = f"{duration_s:.0f} s of measured load" if duration_s else "the measured load"
        itl = totals.get("itl_p99_ms")
        ttft = totals.get("ttft_p99_ms")
        figures = ", ".join(f"{name} {v:.0f} ms" for name, v in (("ITL p99", itl), ("TTFT p99", ttft))
                            if v is not None)
        return f"No latency spike in {span}" + (f": {figures}." if figures else ".")
    worst = max(spikes, key=lambda s: (s["peak_ms"] or 0) / max(s["baseline_ms"] or 1e-9, 1e-9))
    top = next((a for a in worst["attributions"] if a["cause"] == worst["top_cause"]), None)
    text = (f"{_METRIC_LABEL.get(worst['metric'], worst['metric'])} rose from {worst['baseline_ms']:.0f} ms "
            f"to {worst['peak_ms']:.0f} ms for {worst['end_s'] - worst['start_s']:.0f} s "
            f"from {_mmss(worst['start_s'])}")
    if top is not None:
        text += f"; {top['share'] * 100:.0f}% of the excess is {top['cause']}"
        if worst.get("summary"):
            text += f": {worst['summary']}"
    if len(spikes) > 1:
        text += f" ({len(spikes)} spikes in all)"
    return text


def _with_suppressed(headline: str, n: int) -> str:
    """Say how many minor unexplained slowdowns were left out (AttributeConfig.report_unexplained_minor)."""
    if not n:
        return headline
    return (headline.rstrip(".") + f" ({n} slowdown{'s' if n > 1 else ''} that no engine signal "
            "explains not reported: likely host noise).")


def _masks(n: int, spikes: list[dict], window_s: float, guard: int = 2) -> tuple[np.ndarray, np.ndarray]:
    idx = np.arange(n) * window_s
    in_spike = np.zeros(n, dtype=bool)
    normal = np.ones(n, dtype=bool)
    for s in spikes:
        in_spike |= (idx >= s["start_s"]) & (idx < s["end_s"])
        normal &= ~((idx >= s["start_s"] - guard * window_s) & (idx < s["end_s"] + guard * window_s))
    return in_spike, normal


def _col(rows: list[dict], key: str) -> np.ndarray:
    return np.array([np.nan if r.get(key) is None else float(r[key]) for r in rows], dtype=np.float64)


def _nanmean(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(x.mean()) if len(x) else None


def _comparison(windows: list[dict], step_windows: list[dict], pauses: list[dict], spikes: list[dict],
                window_s: float) -> list[dict]:
    """Normal (outside every spike, 2-window guard) vs spike (inside any spike), per signal."""
    if not spikes or not windows:
        return []
    n = len(windows)
    in_spike, normal = _masks(n, spikes, window_s)
    rows = []

    def add(signal: str, unit: str, series: np.ndarray, scale: float = 1.0):
        a, b = _nanmean(series[normal]), _nanmean(series[in_spike])
        rows.append({"signal": signal, "unit": unit, "normal": None if a is None else a * scale,
                     "spike": None if b is None else b * scale})

    for key, label in (("itl_p99_ms", "ITL p99"), ("ttft_p99_ms", "TTFT p99"), ("e2e_p99_ms", "E2E p99")):
        add(label, "ms", _col(windows, key))
    # GC pauses per minute and mean pause, from the pause list itself.
    t = np.array([p["t_s"] for p in pauses], dtype=np.float64)
    d = np.array([p["duration_ms"] for p in pauses], dtype=np.float64)
    w_idx = np.floor(t / window_s).astype(int) if len(t) else np.array([], dtype=int)
    ok = (w_idx >= 0) & (w_idx < n)
    p_spike, p_norm = ok.copy(), ok.copy()
    p_spike[ok] = in_spike[w_idx[ok]]
    p_norm[ok] = normal[w_idx[ok]]
    minutes_norm, minutes_spike = normal.sum() * window_s / 60, in_spike.sum() * window_s / 60
    rows.append({"signal": "GC pauses per minute", "unit": "1/min",
                 "normal": p_norm.sum() / minutes_norm if minutes_norm else None,
                 "spike": p_spike.sum() / minutes_spike if minutes_spike else None})
    rows.append({"signal": "mean GC pause", "unit": "ms",
                 "normal": float(d[p_norm].mean()) if p_norm.any() else None,
                 "spike": float(d[p_spike].mean()) if p_spike.any() else None})
    if step_windows:
        add("GC time inside steps", "ms/step", _col(step_windows, "gc_ms"))
        add("step duration (mean)", "ms", _col(step_windows, "step_mean_ms"))
        add("forward", "ms/step", _col(step_windows, "forward_ms"))
        add("penalty + sampling", "ms/step", _col(step_windows, "penalty_ms") + _col(step_windows, "sample_ms"))
        add("collective wait (longest rank)", "ms/step", _col(step_windows, "comm_max_ms"))
        add("KV occupancy", "%", _col(step_windows, "kv_usage"), 100.0)
        add("preemptions", "1/s", _col(step_windows, "preemptions"), 1.0 / window_s)
        add("batch size", "seqs", _col(step_windows, "batch_size"))
        add("waiting", "seqs", _col(step_windows, "waiting"))
    add("arrivals", "1/s", _col(windows, "arrivals"), 1.0 / window_s)
    add("output tokens per request", "tokens", _col(windows, "output_tokens_mean"))
    return [{k: (_num(v) if k in ("normal", "spike") else v) for k, v in r.items()} for r in rows]


def _faults(faults: list[dict], spikes: list[dict], window_s: float, tolerance_windows: int = 2) -> list[dict]:
    """Ground truth with verdicts, matched exactly as rca.evaluate matches them (one-to-one, the
    fault widened by `tolerance_windows`): detected = matched; the cause = that spike's top cause."""
    rows = [{**f, "end_s": f["end_s"] if f["end_s"] is not None else f["start_s"]} for f in faults]
    matched = dict(match_events(rows, spikes, window_s, tolerance_windows))
    return [{"kind": f["kind"], "cause": f["cause"], "start_s": _num(f["start_s"]), "end_s": _num(f["end_s"]),
             "params": f.get("params"), "detected": i in matched,
             "attributed_cause": spikes[matched[i]]["top_cause"] if i in matched else None}
            for i, f in enumerate(rows)]


def incident_context(db_path: str | Path, run_id: str) -> dict:
    """The incident context of an analysed run (shape: docs/INTERFACES.md)."""
    conn = connect(db_path, read_only=True)
    try:
        runs = conn.execute("SELECT * FROM runs WHERE run_id = ?", [run_id])
        cols = [d[0] for d in runs.description]
        found = runs.fetchone()
        if found is None:
            raise KeyError(f"run {run_id!r} is not in the warehouse (ingest it first)")
        run_row = dict(zip(cols, found))
        analysis = conn.execute("SELECT window_s FROM analyses WHERE run_id = ?", [run_id]).fetchone()
        if analysis is None:
            raise KeyError(f"run {run_id!r} has not been analysed (run rca.analyze.analyze_run first)")
        window_s = float(analysis[0])
        windows = query(conn, "windows", run_id=run_id, window_s=window_s)
        step_windows = query(conn, "step_stages", run_id=run_id, window_s=window_s)
        steps = query(conn, "step_timeline", run_id=run_id)
        rank_steps = query(conn, "step_rank_series", run_id=run_id)
        nvml = query(conn, "nvml_samples", run_id=run_id)
        pauses = query(conn, "gc_pauses", run_id=run_id)
        totals = query(conn, "totals", run_id=run_id)[0]
        measurement = query(conn, "measurement_check", run_id=run_id)[0]
        faults = query(conn, "faults", run_id=run_id)
        # (conn.execute returns the connection: fetch each result before the next query)
        spike_rows = conn.execute("SELECT * FROM spikes WHERE run_id = ? AND NOT coalesce(suppressed, false) "
                                  "ORDER BY spike_id", [run_id])
        spike_cols = [d[0] for d in spike_rows.description]
        spikes = [dict(zip(spike_cols, r)) for r in spike_rows.fetchall()]
        n_suppressed = conn.execute("SELECT count(*) FROM spikes WHERE run_id = ? AND suppressed",
                                    [run_id]).fetchone()[0]
        attr_rows = conn.execute("SELECT spike_id, cause, share, confidence FROM attributions "
                                 "WHERE run_id = ? ORDER BY spike_id, share DESC", [run_id]).fetchall()
        ev_rows = conn.execute("SELECT spike_id, cause, signal, value, baseline, unit, note, pearson_r "
                               "FROM evidence WHERE run_id = ? ORDER BY spike_id, cause", [run_id]).fetchall()
    finally:
        conn.close()

    evidence: dict = {}
    for sid, cause, signal, value, base, unit, note, r in ev_rows:
        evidence.setdefault((sid, cause), []).append(
            {"signal": signal, "value": _num(value), "baseline": _num(base), "unit": unit or "",
             "note": note or "", "pearson_r": _num(r)})
    spike_list = []
    for s in spikes:
        attributions = [{"cause": c, "share": float(sh), "confidence": _num(conf),
                         "evidence": evidence.get((s["spike_id"], c), [])}
                        for sid, c, sh, conf in attr_rows if sid == s["spike_id"]]
        spike_list.append({"spike_id": int(s["spike_id"]), "metric": s["metric"], "metrics": list(s["metrics"] or []),
                           "detector": s["detector"], "start_s": float(s["start_s"]), "end_s": float(s["end_s"]),
                           "peak_ms": _num(s["peak_ms"]), "baseline_ms": _num(s["baseline_ms"]),
                           "severity": s["severity"], "severity_score": _num(s["severity_score"]),
                           "top_cause": s["top_cause"], "summary": s["summary"], "coverage": _num(s["coverage"]),
                           "attributions": attributions})
    run = _run_section(run_row)
    step_by_window = {sw["window"]: sw for sw in step_windows}
    return {
        "run": run,
        "headline": _with_suppressed(_headline(spike_list, totals, run["duration_s"]), n_suppressed),
        "suppressed_spikes": n_suppressed,
        "totals": {k: (int(v) if k in ("requests", "errors", "output_tokens") and v is not None else _num(v))
                   for k, v in totals.items()},
        "window_s": window_s,
        "windows": [{"t_s": float(w["t_s"]), "itl_p50_ms": _num(w["itl_p50_ms"]), "itl_p99_ms": _num(w["itl_p99_ms"]),
                     "ttft_p99_ms": _num(w["ttft_p99_ms"]), "e2e_p99_ms": _num(w["e2e_p99_ms"]),
                     "requests": int(w["requests"]), "tokens": int(w["tokens"]),
                     # concurrency: mean running (batch) and waiting sequences of the window's steps
                     "running": _num(step_by_window.get(w["window"], {}).get("batch_size")),
                     "waiting": _num(step_by_window.get(w["window"], {}).get("waiting"))}
                    for w in windows],
        "steps": _steps_with_ranks(steps, rank_steps),
        "nvml": [{k: (_num(v) if k != "gpu" else v) for k, v in r.items()}
                 for r in _downsample_rows(nvml, MAX_STEPS)],
        "gc_pauses": [{"t_s": float(p["t_s"]), "duration_ms": float(p["duration_ms"]), "generation": p["generation"]}
                      for p in sorted(sorted(pauses, key=lambda p: -p["duration_ms"])[:MAX_GC_PAUSES],
                                      key=lambda p: p["t_s"])],
        "spikes": spike_list,
        "comparison": _comparison(windows, step_windows, pauses, spike_list, window_s),
        "faults": _faults(faults, spike_list, window_s),
        "measurement": ({k: (int(v) if k == "requests" else _num(v)) for k, v in measurement.items()}
                        if measurement["requests"] else None),
    }
