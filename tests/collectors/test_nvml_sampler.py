"""NVML sampler: the real no-GPU path (or real rows where a GPU exists), and row conversion."""

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from collectors.nvml_sampler import (
    NVML_FILE,
    SCHEMA,
    STATUS_FILE,
    NvmlSampler,
    NvmlSamplerConfig,
    sample_device,
)


def _nvml_available() -> bool:
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


def test_real_nvml_records_availability_and_never_invents_rows(tmp_path):
    with NvmlSampler(tmp_path, NvmlSamplerConfig(interval_ms=50)) as sampler:
        time.sleep(0.3)
    status = json.loads((tmp_path / STATUS_FILE).read_text())
    if _nvml_available():
        assert status["available"] and status["samples"] >= 1
        table = pq.read_table(tmp_path / NVML_FILE)
        assert table.schema.equals(SCHEMA) and table.num_rows >= 1
    else:
        assert status == {**status, "available": False, "samples": 0}
        assert "NVMLError" in status["reason"]
        assert not (tmp_path / NVML_FILE).exists()
        assert not sampler.running


def test_cli_without_gpu_exits_zero_with_status(tmp_path):
    if _nvml_available():
        pytest.skip("a GPU is present: the CLI samples until SIGTERM (covered by the GPU script)")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "collectors.nvml_sampler",
            "--run-dir",
            str(tmp_path),
            "--interval-ms",
            "100",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["available"] is False
    assert json.loads((tmp_path / STATUS_FILE).read_text())["available"] is False


def test_config_rejects_bad_values_and_unknown_keys():
    with pytest.raises(ValueError, match="interval_ms must be"):
        NvmlSamplerConfig(interval_ms=0)
    with pytest.raises(ValueError, match="unknown nvml sampler key 'interval'"):
        NvmlSamplerConfig.from_dict({"interval": 100})


class FakeNvml:
    """A stand-in pynvml for conversion tests only: the values are test inputs, not measurements."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1
    nvmlEventTypeXidCriticalError = 8

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):
        pass

    def __init__(self):
        self.events = [SimpleNamespace(device="h1", eventData=79)]

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"h{i}"

    def nvmlDeviceGetName(self, h):
        return b"Test GPU"

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=87, memory=40)

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=3 << 30, total=80 << 30, free=77 << 30)

    def nvmlDeviceGetClockInfo(self, h, kind):
        return 1980 if kind == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetPowerUsage(self, h):
        return 412_500

    def nvmlDeviceGetTemperature(self, h, kind):
        return 61

    def nvmlDeviceGetPerformanceState(self, h):
        return 0

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0x4

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        raise self.NVMLError_NotSupported("Not Supported")

    def nvmlEventSetCreate(self):
        return "set"

    def nvmlDeviceRegisterEvents(self, h, kinds, event_set):
        return None

    def nvmlEventSetFree(self, event_set):
        pass

    def nvmlEventSetWait_v2(self, event_set, timeout_ms):
        if self.events:
            return self.events.pop()
        raise self.NVMLError("Timeout")


def test_row_conversion_units_and_unsupported_fields():
    unsupported = {}
    row = sample_device(FakeNvml(), "h0", 0, 123, unsupported)
    assert row == {
        "ts_ns": 123,
        "gpu": 0,
        "util_gpu": 87.0,
        "util_mem": 40.0,
        "mem_used": 3 << 30,
        "mem_total": 80 << 30,
        "sm_clock": 1980,
        "mem_clock": 2619,
        "power_w": 412.5,
        "temp_c": 61.0,
        "pstate": 0,
        "clock_event_reasons": 4,
        "pcie_tx": None,
        "pcie_rx": None,
        "xid": None,
    }
    assert set(unsupported) == {"pcie_tx", "pcie_rx"}


def test_sampling_loop_writes_schema_rows_and_xid(tmp_path):
    sampler = NvmlSampler(
        tmp_path, NvmlSamplerConfig(interval_ms=10, flush_interval_s=0.1), nvml=FakeNvml()
    )
    sampler.start()
    time.sleep(0.3)
    status = sampler.stop()
    table = pq.read_table(tmp_path / NVML_FILE)
    assert table.schema.equals(SCHEMA)
    assert table.num_rows == 2 * status["samples"] and status["samples"] >= 2
    rows = table.to_pylist()
    assert [r["xid"] for r in rows if r["xid"] is not None] == [79]
    assert next(r for r in rows if r["xid"] is not None)["gpu"] == 1
    assert status["devices"] == ["Test GPU", "Test GPU"] and "pcie_tx" in status["unsupported"]
