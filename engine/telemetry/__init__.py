"""Engine telemetry: per-step trace, GC pause probe and request log, written as Parquet on flush."""

from engine.telemetry.gc_probe import GcProbe
from engine.telemetry.recorder import Telemetry
from engine.telemetry.request_log import RequestLog
from engine.telemetry.step_trace import StepRecord, StepTrace

__all__ = ["GcProbe", "RequestLog", "StepRecord", "StepTrace", "Telemetry"]
