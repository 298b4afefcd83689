"""The fault clock: opens and closes each engine fault's window from the step loop and records
the window actually applied (``faults.parquet``: kind, cause, start_ns, end_ns, params JSON).

Consulted once per step via ``begin_step``/``end_step``; when no fault is active and none is due,
``begin_step`` is one integer comparison. Faults run only once ``arm(t0_ns)`` has been called; a
fault spans ``[t0 + start_s, t0 + start_s + duration_s)``. The recorded window is from the start of
the first step it was applied in to the end of the last one (a window in which no step ran is not
recorded: nothing was injected).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.faults.registry import ENGINE_KINDS
from spikelens_common.fault_spec import FaultSpec
from spikelens_common.ground_truth import Window, params_json, write_windows

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
        """Build the injectors of ``specs`` now, so bad params fail at startup rather than
        mid-run. Every spec must be an engine-applied kind: the flows route the others to their
        own appliers (flows/fault_routing.py), and a kind the engine cannot apply is an error."""
        self._faults: list[_Scheduled] = []
        for i, spec in enumerate(specs):
            kind = ENGINE_KINDS.get(spec.kind)
            if kind is None:
                raise ValueError(
                    f"faults[{i}].kind: {spec.kind} is not applied by spikelens' engine; "
                    f"it applies: {', '.join(sorted(ENGINE_KINDS))}"
                )
            params = kind.make_params(spec.params)
            self._faults.append(_Scheduled(spec, params, kind.injector_cls(params)))
        self._next_change_ns = _NEVER
        self._active: list[_Scheduled] = []
        self._applied: list[Window] = []  # closed windows, in closing order

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
            self._applied.append(_window(f, f.applied_end_ns))

    def shutdown(self, engine) -> None:
        """Close every active fault now (engine stopping): its window ends at the last applied step."""
        for f in list(self._active):
            f.injector.stop(engine)
            self._close(f)
        self._refresh_next()

    def records(self) -> list[dict]:
        """The closed windows as ground-truth rows (params as JSON)."""
        return [{**dataclasses.asdict(w), "params": params_json(w.params)} for w in self._applied]

    def write(self, path: str | Path, include_active: bool = True) -> Path:
        """Write faults.parquet; faults still active are included with their window so far."""
        windows = list(self._applied)
        if include_active:
            windows += [
                _window(f, f.applied_end_ns or f.applied_start_ns)
                for f in self._active
                if f.applied_start_ns is not None
            ]
        write_windows(windows, path)
        return Path(path)


def _window(f: _Scheduled, end_ns: int | None) -> Window:
    assert f.applied_start_ns is not None
    return Window(f.spec.kind, f.spec.cause, f.applied_start_ns, end_ns, f.params)
