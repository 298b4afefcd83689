"""The fault clock: opens and closes each engine fault's window from the step loop and records
the window actually applied (``faults.parquet``: kind, cause, start_ns, end_ns, params JSON).

Consulted once per step via ``begin_step``/``end_step``; when no fault is active and none is due,
``begin_step`` is one integer comparison. Faults run only once ``arm(t0_ns)`` has been called; a
fault spans ``[t0 + start_s, t0 + start_s + duration_s)``. The recorded window is from the start of
the first step it was applied in to the end of the last one (a window in which no step ran is not
recorded: nothing was injected).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from engine.faults.registry import ENGINE_KINDS
from engine.faults.spec import FaultSpec
from engine.telemetry.table_buffer import TableBuffer

FAULT_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("cause", pa.string()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("params", pa.string()),
    ]
)
_NEVER = 2**63 - 1
_CLEANUP_GRACE_NS = 1_000_000_000


@dataclass
class _Scheduled:
    spec: FaultSpec
    params: Any  # the kind's params dataclass
    injector: Any
    start_ns: int = _NEVER
    end_ns: int = _NEVER
    active: bool = False
    done: bool = False
    applied_start_ns: int | None = None
    applied_end_ns: int | None = None


class FaultClock:
    def __init__(self, specs: list[FaultSpec]):
        """Keep the engine-applied faults of ``specs`` (others belong to loadgen) and build their
        injectors now, so bad params fail at startup rather than mid-run."""
        self._faults: list[_Scheduled] = []
        for spec in specs:
            kind = ENGINE_KINDS.get(spec.kind)
            if kind is None:
                continue  # a workload/traffic kind: applied by loadgen
            params = kind.make_params(spec.params)
            self._faults.append(_Scheduled(spec, params, kind.injector_cls(params)))
        self._next_change_ns = _NEVER
        self._active: list[_Scheduled] = []
        self.buffer = TableBuffer(FAULT_SCHEMA)

    def arm(self, t0_ns: int) -> None:
        """Start the fault clock at ``t0_ns`` (wall clock ns). Re-arming restarts faults not yet run."""
        for f in self._faults:
            if not f.done and not f.active:
                f.start_ns = t0_ns + int(f.spec.start_s * 1e9)
                f.end_ns = f.start_ns + int(f.spec.duration_s * 1e9)
        self._refresh_next()

    def _refresh_next(self) -> None:
        pending = [f.start_ns for f in self._faults if not f.done and not f.active]
        ending = [f.end_ns for f in self._active]
        self._next_change_ns = min(pending + ending, default=_NEVER)

    def begin_step(self, engine, now_ns: int) -> None:
        """Open/close windows due at ``now_ns`` and apply the active faults (engine hooks)."""
        if now_ns >= self._next_change_ns:
            self._transition(engine, now_ns)
        for f in self._active:
            if f.applied_start_ns is None:
                f.applied_start_ns = now_ns
            f.injector.apply(engine)

    def in_forward(self, engine) -> None:
        """Run the ``forward(engine)`` hook of each active fault that has one (called by the engine
        inside its forward timer, for costs that belong to the forward pass)."""
        for f in self._active:
            hook = getattr(f.injector, "forward", None)
            if hook is not None:
                hook(engine)

    def end_step(self, now_ns: int) -> None:
        for f in self._active:
            f.applied_end_ns = now_ns

    def _transition(self, engine, now_ns: int) -> None:
        for f in list(self._active):
            if now_ns >= f.end_ns:
                f.injector.stop(engine)
                # The window includes the injector's cleanup when it ran at the scheduled end (the
                # engine was busy); after an idle gap it ends with the last step the fault touched.
                if f.applied_start_ns is not None and now_ns - f.end_ns < _CLEANUP_GRACE_NS:
                    f.applied_end_ns = time.time_ns()
                self._close(f)
        for f in self._faults:
            if not f.done and not f.active and f.start_ns <= now_ns:
                if now_ns >= f.end_ns:  # the whole window passed without a step: nothing injected
                    f.done = True
                    continue
                f.active = True
                self._active.append(f)
                f.injector.start(engine)
        self._refresh_next()

    def _close(self, f: _Scheduled) -> None:
        f.active, f.done = False, True
        self._active.remove(f)
        if f.applied_start_ns is not None:
            self.buffer.append(
                f.spec.kind,
                f.spec.cause,
                f.applied_start_ns,
                f.applied_end_ns,
                json.dumps(asdict(f.params), sort_keys=True),
            )

    def shutdown(self, engine) -> None:
        """Close every active fault now (engine stopping): its window ends at the last applied step."""
        for f in list(self._active):
            f.injector.stop(engine)
            self._close(f)
        self._refresh_next()

    def records(self) -> list[dict]:
        return self.buffer.to_table().to_pylist()

    def write(self, path: str | Path, include_active: bool = True) -> Path:
        """Write faults.parquet; faults still active are included with their window so far."""
        buf = self.buffer
        if include_active and self._active:
            buf = TableBuffer(FAULT_SCHEMA)
            for name in FAULT_SCHEMA.names:
                buf.columns[name] = list(self.buffer.columns[name])
            for f in self._active:
                if f.applied_start_ns is not None:
                    buf.append(
                        f.spec.kind,
                        f.spec.cause,
                        f.applied_start_ns,
                        f.applied_end_ns or f.applied_start_ns,
                        json.dumps(asdict(f.params), sort_keys=True),
                    )
        return buf.write(path)
