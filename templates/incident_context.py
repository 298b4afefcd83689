"""Check and complete the incident context before it reaches the template.

The context is built by `rca.report.incident_context` (shape fixed in docs/INTERFACES.md). The
template renders with StrictUndefined, so a key that is neither given nor defaulted here fails the
render; this module turns such a gap into one clear error naming the key path (e.g.
`spikes[0].peak_ms`), and fills the keys the interface lets a producer omit with an explicit empty
value. Extra keys are kept: the interface only grows additively.

Pure: the input is never mutated; a completed copy is returned.
"""
from __future__ import annotations

import copy

from templates.context_checks import (ContextError, clean_floats, complete, need_list, need_mapping,
                                     need_number, need_share)


# Keys a producer must provide (the page has no honest fallback for them).
_REQUIRED_RUN = ("run_id", "scenario_name", "command")
_REQUIRED_SPIKE = ("spike_id", "metric", "start_s", "end_s", "peak_ms", "baseline_ms", "top_cause", "attributions")
_REQUIRED_ATTRIBUTION = ("cause", "share")
_REQUIRED_WINDOW = ("t_s",)
_REQUIRED_GC = ("t_s", "duration_ms")
_REQUIRED_FAULT = ("kind", "cause", "start_s", "end_s", "detected")
_REQUIRED_COMPARISON = ("signal", "normal", "spike")

# Keys a producer may leave out, with the value that means "not known".
_OPTIONAL_RUN = {
    "started_at": None, "duration_s": None, "warmup_s": None, "engine": {}, "scenario_yaml": "",
    "host": None, "git_commit": None, "status": None, "errors": [],
    # what the load drove: an external target's URL, the model id and endpoint of the requests
    "target": None, "model": None, "endpoint": None, "stopped_early": None,
    "server": None, "server_argv": None,   # a vLLM spikelens started: build, command line
}
_OPTIONAL_TOP = {
    "headline": "", "totals": {}, "windows": [], "steps": [], "gc_pauses": [], "spikes": [],
    "comparison": [], "faults": [],
    # Phase-2 additions (optional): NVML samples and the correlation table.
    "nvml": [], "correlations": [],
    # The load generator against the engine server's socket-side times (None: no server times,
    # e.g. an external target): {requests, ttft_diff_p50_ms, ttft_diff_p99_ms, e2e_diff_p50_ms, e2e_diff_p99_ms}
    "measurement": None,
}
# metrics: every latency series the spike covers (rca merges ITL/TTFT/E2E intervals into one
# incident); summary: one line of why, from the attribution.
_OPTIONAL_SPIKE = {"severity": None, "metrics": [], "summary": ""}
_OPTIONAL_ATTRIBUTION = {"confidence": None, "evidence": []}
_OPTIONAL_EVIDENCE = {"signal": "", "value": None, "baseline": None, "unit": "", "note": ""}
_OPTIONAL_WINDOW = {"itl_p50_ms": None, "itl_p99_ms": None, "ttft_p99_ms": None, "e2e_p99_ms": None,
                    "requests": None, "tokens": None}
_OPTIONAL_GC = {"generation": None}
_OPTIONAL_FAULT = {"attributed_cause": None}
_OPTIONAL_COMPARISON = {"unit": ""}
_REQUIRED_CORRELATION = ("signal", "metric", "r")
_OPTIONAL_CORRELATION = {"lag_s": None, "n": None, "note": ""}
_REQUIRED_NVML = ("t_s", "gpu")
_MEASUREMENT_KEYS = ("requests", "ttft_diff_p50_ms", "ttft_diff_p99_ms", "e2e_diff_p50_ms", "e2e_diff_p99_ms",
                     "kernel_stamped_share")
_TOTALS_KEYS = ("requests", "errors", "output_tokens", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms",
                "itl_p99_ms", "e2e_p50_ms", "e2e_p99_ms")


def check_incident_context(context: dict) -> dict:
    """Return a completed deep copy of `context`; raise ContextError naming the first bad key.

    NaN and ±inf become None (shown as "—").
    """
    ctx = clean_floats(need_mapping(context, "context"))
    if "run" not in ctx:
        raise ContextError("context: missing key 'run'")
    for key, default in _OPTIONAL_TOP.items():
        ctx.setdefault(key, copy.copy(default))
    complete(ctx["run"], "run", _REQUIRED_RUN, _OPTIONAL_RUN)
    ctx["run"]["errors"] = [str(e) for e in need_list(ctx["run"]["errors"], "run.errors")]
    totals = need_mapping(ctx["totals"], "totals")
    for key in _TOTALS_KEYS:
        totals.setdefault(key, None)
        need_number(totals[key], f"totals.{key}")
    if ctx["measurement"] is not None:
        m = need_mapping(ctx["measurement"], "measurement")
        for key in _MEASUREMENT_KEYS:
            m.setdefault(key, None)
            need_number(m[key], f"measurement.{key}")
    if not isinstance(ctx["headline"], str):
        raise ContextError(f"headline: expected a str, got {type(ctx['headline']).__name__}")

    ctx["windows"] = need_list(ctx["windows"], "windows")
    for i, w in enumerate(ctx["windows"]):
        complete(w, f"windows[{i}]", _REQUIRED_WINDOW, _OPTIONAL_WINDOW)
        for key in ("t_s", *_OPTIONAL_WINDOW):
            need_number(w[key], f"windows[{i}].{key}", allow_none=key != "t_s")
    ctx["gc_pauses"] = need_list(ctx["gc_pauses"], "gc_pauses")
    for i, g in enumerate(ctx["gc_pauses"]):
        complete(g, f"gc_pauses[{i}]", _REQUIRED_GC, _OPTIONAL_GC)
        need_number(g["t_s"], f"gc_pauses[{i}].t_s", allow_none=False)
        need_number(g["duration_ms"], f"gc_pauses[{i}].duration_ms", allow_none=False)
    ctx["steps"] = need_list(ctx["steps"], "steps")

    ctx["spikes"] = need_list(ctx["spikes"], "spikes")
    for i, s in enumerate(ctx["spikes"]):
        where = f"spikes[{i}]"
        complete(s, where, _REQUIRED_SPIKE, _OPTIONAL_SPIKE)
        for key in ("start_s", "end_s"):
            need_number(s[key], f"{where}.{key}", allow_none=False)
        if s["end_s"] < s["start_s"]:
            raise ContextError(f"{where}.end_s: {s['end_s']!r} is before start_s {s['start_s']!r}")
        s["attributions"] = need_list(s["attributions"], f"{where}.attributions")
        for j, a in enumerate(s["attributions"]):
            a_where = f"{where}.attributions[{j}]"
            complete(a, a_where, _REQUIRED_ATTRIBUTION, _OPTIONAL_ATTRIBUTION)
            need_share(a["share"], f"{a_where}.share")
            a["evidence"] = [
                complete(e, f"{a_where}.evidence[{k}]", (), _OPTIONAL_EVIDENCE)
                for k, e in enumerate(need_list(a["evidence"], f"{a_where}.evidence"))
            ]
        # Largest share first: the bars and the evidence read top-down by importance.
        s["attributions"].sort(key=lambda a: -float(a["share"]))

    ctx["comparison"] = [
        complete(c, f"comparison[{i}]", _REQUIRED_COMPARISON, _OPTIONAL_COMPARISON)
        for i, c in enumerate(need_list(ctx["comparison"], "comparison"))
    ]
    ctx["correlations"] = [
        complete(c, f"correlations[{i}]", _REQUIRED_CORRELATION, _OPTIONAL_CORRELATION)
        for i, c in enumerate(need_list(ctx["correlations"], "correlations"))
    ]
    for i, c in enumerate(ctx["correlations"]):
        need_number(c["r"], f"correlations[{i}].r")
    ctx["nvml"] = [complete(r, f"nvml[{i}]", _REQUIRED_NVML, {})
                   for i, r in enumerate(need_list(ctx["nvml"], "nvml"))]
    ctx["faults"] = [
        complete(f, f"faults[{i}]", _REQUIRED_FAULT, _OPTIONAL_FAULT)
        for i, f in enumerate(need_list(ctx["faults"], "faults"))
    ]
    for f in ctx["faults"]:
        # A fault "matched" when the analysis found a spike over it and blamed the right cause.
        f["matched"] = bool(f["detected"]) and f["attributed_cause"] == f["cause"]
    return ctx
