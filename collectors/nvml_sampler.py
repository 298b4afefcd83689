"""NVML sampler: GPU utilisation, memory, clocks, power, temperature, clock-event reasons, PCIe and
XID events, every `interval_ms`, into `nvml.parquet` of a run directory.

What: `NvmlSampler(run_dir, config)` samples every visible GPU on a background thread (`start` /
`stop`, or a `with` block); `python -m collectors.nvml_sampler --run-dir DIR --interval-ms 100` does the
same in its own process until SIGTERM/SIGINT. Why its own module: the `memory` and `communication`
causes need device-side evidence (memory near capacity, clocks throttled, PCIe traffic) that only
the driver has.

Columns (docs/design.md, plus `clock_event_reasons` and `xid`): ts_ns (time.time_ns()), gpu (index),
util_gpu / util_mem (percent over the driver's last 1/6-1 s window), mem_used / mem_total (bytes),
sm_clock / mem_clock (MHz), power_w (W), temp_c (°C), pstate (0 = P0 ... 15), clock_event_reasons
(NVML's bitmask, nvmlClocksEventReason*), pcie_tx / pcie_rx (bytes/s over NVML's 20 ms window; NVML
reports KB/s), xid (the first critical XID event of the GPU in that interval). A value the device
does not report is null, never a guess.

Without a GPU (or driver), nvmlInit raises (NVMLError_LibraryNotFound on a machine with no driver):
the sampler writes `nvml_status.json` {"available": false, "reason": ...} and no rows at all (no
nvml.parquet), and the command exits 0 at once.
`nvml_status.json` is written in every case (available, devices, interval, samples, unsupported
fields).
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

NVML_FILE = "nvml.parquet"
STATUS_FILE = "nvml_status.json"

SCHEMA = pa.schema(
    [
        ("ts_ns", pa.int64()),
        ("gpu", pa.int32()),
        ("util_gpu", pa.float64()),
        ("util_mem", pa.float64()),
        ("mem_used", pa.int64()),
        ("mem_total", pa.int64()),
        ("sm_clock", pa.int32()),
        ("mem_clock", pa.int32()),
        ("power_w", pa.float64()),
        ("temp_c", pa.float64()),
        ("pstate", pa.int32()),
        ("clock_event_reasons", pa.int64()),
        ("pcie_tx", pa.int64()),
        ("pcie_rx", pa.int64()),
        ("xid", pa.int64()),
    ]
)


@dataclass
class NvmlSamplerConfig:
    """How the sampler runs. Unknown keys in `from_dict` are an error naming the key."""

    # Sampling period. 100 ms resolves a 1-s window 10 times; NVML's utilisation counters average
    # over 1/6-1 s anyway, so much faster only repeats values.
    interval_ms: int = 100
    # Rows are written as a Parquet row group this often, so a long run never holds them all in memory.
    flush_interval_s: float = 10.0
    # Register for XID critical-error events (not every device/driver supports it; then xid is null).
    xid_events: bool = True

    def __post_init__(self) -> None:
        if (
            isinstance(self.interval_ms, bool)
            or not isinstance(self.interval_ms, int)
            or not 10 <= self.interval_ms <= 60_000
        ):
            raise ValueError(f"interval_ms must be an int in [10, 60000], got {self.interval_ms!r}")
        if (
            not isinstance(self.flush_interval_s, (int, float))
            or not 0.1 <= self.flush_interval_s <= 3600
        ):
            raise ValueError(
                f"flush_interval_s must be in [0.1, 3600], got {self.flush_interval_s!r}"
            )
        if not isinstance(self.xid_events, bool):
            raise ValueError(f"xid_events must be a boolean, got {self.xid_events!r}")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> NvmlSamplerConfig:
        known = {f.name for f in fields(cls)}
        for key in values:
            if key not in known:
                raise ValueError(
                    f"unknown nvml sampler key {key!r}; known: {', '.join(sorted(known))}"
                )
        return cls(**dict(values))


def _query(nvml, name: str, call: Callable[[], Any], unsupported: dict[str, str]) -> Any:
    """Run one NVML query; None (and the reason, once per field) when the device cannot answer."""
    try:
        return call()
    except nvml.NVMLError as exc:
        unsupported.setdefault(name, f"{type(exc).__name__}: {exc}")
        return None


def sample_device(
    nvml, handle, gpu: int, ts_ns: int, unsupported: dict[str, str]
) -> dict[str, Any]:
    """One nvml.parquet row for the device `handle`. Pure apart from the NVML reads.

    `nvml` is the pynvml module (a parameter so the conversion can be unit-tested); `unsupported`
    collects the fields the device does not report (mutated).
    """
    util = _query(
        nvml, "utilization", lambda: nvml.nvmlDeviceGetUtilizationRates(handle), unsupported
    )
    memory = _query(nvml, "memory", lambda: nvml.nvmlDeviceGetMemoryInfo(handle), unsupported)
    power_mw = _query(nvml, "power", lambda: nvml.nvmlDeviceGetPowerUsage(handle), unsupported)
    reasons_call = (
        getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )  # older bindings name it "throttle"
    tx_kbps = _query(
        nvml,
        "pcie_tx",
        lambda: nvml.nvmlDeviceGetPcieThroughput(handle, nvml.NVML_PCIE_UTIL_TX_BYTES),
        unsupported,
    )
    rx_kbps = _query(
        nvml,
        "pcie_rx",
        lambda: nvml.nvmlDeviceGetPcieThroughput(handle, nvml.NVML_PCIE_UTIL_RX_BYTES),
        unsupported,
    )
    return {
        "ts_ns": ts_ns,
        "gpu": gpu,
        "util_gpu": float(util.gpu) if util is not None else None,
        "util_mem": float(util.memory) if util is not None else None,
        "mem_used": int(memory.used) if memory is not None else None,
        "mem_total": int(memory.total) if memory is not None else None,
        "sm_clock": _query(
            nvml,
            "sm_clock",
            lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            unsupported,
        ),
        "mem_clock": _query(
            nvml,
            "mem_clock",
            lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
            unsupported,
        ),
        "power_w": power_mw / 1000.0 if power_mw is not None else None,
        "temp_c": _float_or_none(
            _query(
                nvml,
                "temperature",
                lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
                unsupported,
            )
        ),
        "pstate": _query(
            nvml, "pstate", lambda: nvml.nvmlDeviceGetPerformanceState(handle), unsupported
        ),
        "clock_event_reasons": _query(
            nvml, "clock_event_reasons", lambda: reasons_call(handle), unsupported
        ),
        "pcie_tx": tx_kbps * 1024 if tx_kbps is not None else None,
        "pcie_rx": rx_kbps * 1024 if rx_kbps is not None else None,
        "xid": None,
    }


def _float_or_none(value: Any) -> float | None:
    return float(value) if value is not None else None


class NvmlSampler:
    """Samples every GPU on a background thread into `run_dir`/nvml.parquet. Use start()/stop() or `with`."""

    def __init__(self, run_dir: str | Path, config: NvmlSamplerConfig | None = None, nvml=None):
        self.run_dir = Path(run_dir)
        self.config = config or NvmlSamplerConfig()
        self._nvml = nvml  # None: import pynvml on start (a parameter only for conversion tests)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._status: dict[str, Any] = {
            "available": False,
            "reason": "not started",
            "interval_ms": self.config.interval_ms,
            "samples": 0,
        }

    @property
    def status(self) -> dict[str, Any]:
        return dict(self._status)

    @property
    def running(self) -> bool:
        """True while the sampling thread runs (False when NVML was unavailable)."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> NvmlSampler:
        """Initialise NVML and start sampling; without NVML, record why and sample nothing."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._stop.clear()
        nvml = self._nvml
        try:
            if nvml is None:
                import pynvml

                nvml = pynvml
            nvml.nvmlInit()
        except (
            Exception
        ) as exc:  # NVMLError_LibraryNotFound without a driver; ImportError without bindings
            self._status = {
                "available": False,
                "reason": f"{type(exc).__name__}: {exc}",
                "interval_ms": self.config.interval_ms,
                "samples": 0,
            }
            self._write_status()
            return self
        self._nvml = nvml
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        """Stop sampling, close nvml.parquet, write nvml_status.json; returns the status."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        return self.status

    def __enter__(self) -> NvmlSampler:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _run(self) -> None:
        nvml = self._nvml
        unsupported: dict[str, str] = {}
        writer: pq.ParquetWriter | None = None
        rows: list[dict[str, Any]] = []
        samples = 0
        event_set = None
        try:
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
            names = [
                _text(
                    _query(nvml, "name", functools.partial(nvml.nvmlDeviceGetName, h), unsupported)
                )
                for h in handles
            ]
            event_set = (
                self._register_xid(nvml, handles, unsupported) if self.config.xid_events else None
            )
            self._status = {
                "available": True,
                "reason": None,
                "devices": names,
                "interval_ms": self.config.interval_ms,
                "samples": 0,
                "started_ns": time.time_ns(),
            }
            self._write_status()
            period_ns = self.config.interval_ms * 1_000_000
            next_ns = time.monotonic_ns()
            last_flush = time.monotonic()
            while not self._stop.is_set():
                ts_ns = time.time_ns()
                xids = self._poll_xid(nvml, handles, event_set) if event_set is not None else {}
                for gpu, handle in enumerate(handles):
                    row = sample_device(nvml, handle, gpu, ts_ns, unsupported)
                    row["xid"] = xids.get(gpu)
                    rows.append(row)
                samples += 1
                if time.monotonic() - last_flush >= self.config.flush_interval_s and rows:
                    writer = self._write_rows(writer, rows)
                    rows = []
                    last_flush = time.monotonic()
                next_ns += period_ns  # a fixed grid: a slow sample does not shift later ones
                self._stop.wait(max(0, next_ns - time.monotonic_ns()) / 1e9)
        except Exception as exc:  # a GPU lost mid-run: keep what was sampled, say why it ended
            self._status["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            if rows:
                writer = self._write_rows(writer, rows)
            if writer is not None:
                writer.close()
            if event_set is not None:
                _query(nvml, "xid_free", lambda: nvml.nvmlEventSetFree(event_set), {})
            _query(nvml, "shutdown", nvml.nvmlShutdown, {})
            self._status.update(samples=samples, stopped_ns=time.time_ns(), unsupported=unsupported)
            self._write_status()

    @staticmethod
    def _register_xid(nvml, handles, unsupported: dict[str, str]):
        """An event set with XID critical errors registered on every device that supports them, or None."""
        event_set = _query(nvml, "xid", nvml.nvmlEventSetCreate, unsupported)
        if event_set is None:
            return None

        def register(h: Any) -> bool:
            nvml.nvmlDeviceRegisterEvents(h, nvml.nvmlEventTypeXidCriticalError, event_set)
            return True

        registered = [
            _query(nvml, "xid", functools.partial(register, h), unsupported) for h in handles
        ]
        if not any(registered):
            _query(nvml, "xid_free", lambda: nvml.nvmlEventSetFree(event_set), {})
            return None
        return event_set

    @staticmethod
    def _poll_xid(nvml, handles, event_set) -> dict[int, int]:
        """XID of the first critical event per GPU since the last poll (non-blocking)."""
        found: dict[int, int] = {}
        while True:
            try:
                data = nvml.nvmlEventSetWait_v2(event_set, 0)
            except nvml.NVMLError:  # NVML_ERROR_TIMEOUT: no more pending events
                return found
            for gpu, handle in enumerate(handles):
                if _same_handle(data.device, handle):
                    found.setdefault(gpu, int(data.eventData))

    def _write_rows(
        self, writer: pq.ParquetWriter | None, rows: list[dict[str, Any]]
    ) -> pq.ParquetWriter:
        if writer is None:
            writer = pq.ParquetWriter(self.run_dir / NVML_FILE, SCHEMA)
        writer.write_table(pa.Table.from_pylist(rows, schema=SCHEMA))
        return writer

    def _write_status(self) -> None:
        status = dict(self._status, config=asdict(self.config))
        tmp = self.run_dir / (STATUS_FILE + ".tmp")
        tmp.write_text(json.dumps(status, indent=1, default=str))
        tmp.replace(self.run_dir / STATUS_FILE)


def _same_handle(a, b) -> bool:
    """NVML device handles are ctypes pointers (distinct objects per call): compare their addresses."""
    if isinstance(a, ctypes._Pointer) and isinstance(b, ctypes._Pointer):
        return ctypes.cast(a, ctypes.c_void_p).value == ctypes.cast(b, ctypes.c_void_p).value
    return a == b


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.nvml_sampler", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--interval-ms", type=int, default=NvmlSamplerConfig.interval_ms)
    parser.add_argument(
        "--flush-interval-s", type=float, default=NvmlSamplerConfig.flush_interval_s
    )
    parser.add_argument("--no-xid", action="store_true", help="do not register for XID events")
    args = parser.parse_args(argv)
    config = NvmlSamplerConfig(
        interval_ms=args.interval_ms,
        flush_interval_s=args.flush_interval_s,
        xid_events=not args.no_xid,
    )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    sampler = NvmlSampler(args.run_dir, config).start()
    while sampler.running and not stop.wait(0.5):  # without NVML: nothing to wait for, exit now
        pass
    status = sampler.stop()
    print(json.dumps({k: status.get(k) for k in ("available", "reason", "samples")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
