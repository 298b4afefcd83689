"""Turn py-spy's `--format chrometrace` output into stack segments classified by code region.

What: py-spy writes one Begin/End event pair per frame and thread, merging consecutive samples
whose frame is the same; `ts` is microseconds since py-spy started. Replaying the events of each
(pid, tid) in order gives the stack that thread was sampled in over each interval between two
event times: a *segment* [start_ns, end_ns) with its region (collectors/regions.py), the frame
that decided it and the innermost frame. A segment of d seconds stands for d × rate samples, so
per-window shares of segment time are shares of samples.
Why segments and not samples: it is what chrometrace keeps (py-spy 0.4.3 offers per-sample
timestamps in no format); the `raw` format has counts without times.
Clock: py-spy's `ts` is microseconds since it entered `record` (before attaching), stamped when
a sample is handed to the writer; `origin_ns` is the wall time just after its exec returned.
A region change in a test child landed 1-10 ms from the child's own wall-clock stamp.
Fault injectors: a stack with a frame of an injector's thread (collectors/regions.py
INJECTOR_THREADS) gives no segment, so no injector shows in the stacks the analysis reads.
Limit: py-spy closes a thread's last stack only when the thread is sampled again or at the end,
so a thread or process that exits keeps its last region until the recording ends.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pyarrow as pa

from collectors.regions import REGION_RULES, classify, is_injector_thread

STACKS_SCHEMA = pa.schema(
    [
        ("pid", pa.int64()),
        ("role", pa.string()),  # filled by the recorder from the process tree (None here)
        ("tid", pa.int64()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("region", pa.string()),
        ("rule", pa.int32()),  # index in REGION_RULES, -1 for `other`
        ("frame", pa.string()),  # the frame that decided the region: "function (file:line)"
        ("leaf", pa.string()),  # the innermost frame, same format
        ("depth", pa.int32()),
    ]
)


def _frame_text(event: dict) -> str:
    args = event.get("args") or {}
    return f"{event.get('name', '?')} ({args.get('filename', '')}:{args.get('line', 0)})"


def _is_process_root(event: dict) -> bool:
    """py-spy opens every stack with a pseudo-frame naming the process (no filename)."""
    return not (event.get("args") or {}).get("filename") and str(event.get("name", "")).startswith(
        "process "
    )


def _decide(stack: list[dict]) -> tuple[str, int, int]:
    """(region, rule, index in `stack` of the frame that decided it); stack is root first."""
    frames = [
        (e.get("name", ""), (e.get("args") or {}).get("filename", "")) for e in reversed(stack)
    ]
    region, rule = classify(frames)
    if rule < 0:
        return region, rule, len(stack) - 1
    spec = REGION_RULES[rule]
    for i in range(len(stack) - 1, -1, -1):  # innermost first, as classify looks
        if (not spec.leaf_only or i == len(stack) - 1) and spec.matches(
            *frames[len(stack) - 1 - i]
        ):
            return region, rule, i
    return region, rule, len(stack) - 1


def _classified(stack: list[dict]) -> tuple[str, int, str, str] | None:
    """(region, rule, deciding frame, leaf) of a stack (root first); None in an injector's thread."""
    frames = [(e.get("name", ""), (e.get("args") or {}).get("filename", "")) for e in stack]
    if is_injector_thread(frames):
        return None
    region, rule, at = _decide(stack)
    return region, rule, _frame_text(stack[at]), _frame_text(stack[-1])


def _segment(
    cols: dict,
    pid: int,
    tid: int,
    start_us: float,
    end_us: float,
    stack: list[dict],
    origin_ns: int,
    cache: dict,
) -> None:
    key = tuple(
        (e.get("name"), (e.get("args") or {}).get("filename"), (e.get("args") or {}).get("line"))
        for e in stack
    )
    if key not in cache:  # a busy thread repeats a handful of stacks thousands of times
        cache[key] = _classified(stack)
    if cache[key] is None:  # a fault injector's thread: not the engine's work
        return
    region, rule, frame, leaf = cache[key]
    for name, value in (
        ("pid", pid),
        ("role", None),
        ("tid", tid),
        ("start_ns", origin_ns + int(start_us * 1000)),
        ("end_ns", origin_ns + int(end_us * 1000)),
        ("region", region),
        ("rule", rule),
        ("frame", frame),
        ("leaf", leaf),
        ("depth", len(stack)),
    ):
        cols[name].append(value)


def segments_from_events(events: list[dict], origin_ns: int) -> pa.Table:
    """STACKS_SCHEMA rows from a chrometrace event list (see the module docstring)."""
    by_thread: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for event in events:
        if event.get("ph") in ("B", "E") and not _is_process_root(event):
            by_thread[(int(event["pid"]), int(event["tid"]))].append(event)
    cols: dict[str, list] = {name: [] for name in STACKS_SCHEMA.names}
    cache: dict = {}
    for (pid, tid), thread_events in sorted(by_thread.items()):
        stack: list[dict] = []
        last_ts = None
        # stable sort: py-spy writes the End events of a sample before the Begin events of the next
        for event in sorted(thread_events, key=lambda e: e["ts"]):
            ts = float(event["ts"])
            if stack and last_ts is not None and ts > last_ts:
                _segment(cols, pid, tid, last_ts, ts, stack, origin_ns, cache)
            last_ts = ts
            if event["ph"] == "B":
                stack.append(event)
            elif stack:
                stack.pop()
    return pa.Table.from_pydict(cols, schema=STACKS_SCHEMA)


def read_chrometrace(path: str | Path, origin_ns: int) -> pa.Table:
    """Segments of a py-spy chrometrace file; ValueError naming the file when it is not one."""
    path = Path(path)
    try:
        events = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(
            f"{path}: not a py-spy chrometrace JSON file ({type(exc).__name__}: {exc})"
        ) from exc
    if not isinstance(events, list):
        raise ValueError(
            f"{path}: expected a JSON list of trace events, got {type(events).__name__}"
        )
    try:
        return segments_from_events(events, origin_ns)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: malformed trace event ({type(exc).__name__}: {exc})") from exc
