"""loadgen.client_stall: the schedule of stalls, their params, and a real stall of a gevent process."""

import subprocess
import sys
import textwrap

import pytest

from loadgen.client_stall import StallParams, pause_starts, run_stalls
from loadgen.errors import SpecError
from loadgen.traffic_faults import traffic_faults


def test_pauses_fill_the_window_without_running_past_it():
    starts = list(pause_starts(10.0, 2.0, StallParams(pause_ms=200, every_ms=500)))
    assert starts == pytest.approx([10.0, 10.5, 11.0, 11.5])


def test_run_stalls_waits_cooperatively_and_blocks_on_time():
    clock = {"t": 0.0}
    waits, blocks = [], []

    def wait(s):
        waits.append(s)
        clock["t"] += s

    def block(s):
        blocks.append((clock["t"], s))
        clock["t"] += s

    done = run_stalls([(1.0, 1.0, StallParams(100, 400))], lambda: clock["t"], wait, block)
    assert done == 3 and [round(t, 6) for t, _ in blocks] == [1.0, 1.4, 1.8]
    assert all(s == pytest.approx(0.1) for _, s in blocks)


def test_a_late_start_skips_pauses_already_past():
    blocks = []
    done = run_stalls(
        [(0.0, 2.0, StallParams(100, 500))], lambda: 1.2, lambda s: None, blocks.append
    )
    # the pauses at 0, 0.5 and 1.0 are over by 1.2 s: skipped; the one at 1.5 runs
    assert done == 1 and blocks == [pytest.approx(0.1)]


@pytest.mark.parametrize(
    "params, field",
    [({"pause_ms": 0}, "pause_ms"), ({"every_ms": 100, "pause_ms": 200}, "every_ms")],
)
def test_bad_params_name_the_field(params, field):
    with pytest.raises(SpecError, match=rf"faults\[0\]\.params\.{field}: must be"):
        traffic_faults([{"kind": "client.stall", "start_s": 1, "duration_s": 2, "params": params}])
    with pytest.raises(SpecError, match=r"unknown key 'pause'"):
        traffic_faults(
            [{"kind": "client.stall", "start_s": 1, "duration_s": 2, "params": {"pause": 1}}]
        )


def test_a_stall_blocks_every_greenlet_of_the_process():
    """In a monkey-patched gevent process (as Locust runs), a 10-ms timer greenlet fires ~150 ms
    late during a 150-ms stall: the blocking sleep holds the whole interpreter."""
    code = textwrap.dedent(
        """
        from gevent import monkey; monkey.patch_all()
        import time, gevent
        from loadgen.client_stall import StallParams, blocking_sleep, run_stalls
        lags = []
        def probe():
            while True:
                t = time.perf_counter(); gevent.sleep(0.01)
                lags.append(time.perf_counter() - t - 0.01)
        gevent.spawn(probe)
        t0 = time.perf_counter()
        stalls = gevent.spawn(run_stalls, [(0.1, 0.3, StallParams(150, 200))],
                              lambda: time.perf_counter() - t0, gevent.sleep, blocking_sleep())
        stalls.join(); gevent.sleep(0.05)
        print(stalls.value, max(lags))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    done, worst_lag = out.stdout.split()
    assert int(done) == 1 and float(worst_lag) >= 0.13
