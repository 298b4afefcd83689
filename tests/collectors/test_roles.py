"""Process roles from argv/titles (vLLM's setproctitle names, the engine, spawn children)."""

import os

from collectors.roles import read_cmdline, role_from_cmdline, role_of


def test_vllm_titles_and_engine_argv_name_roles():
    assert role_from_cmdline(["VLLM::EngineCore"]) == "EngineCore"
    assert role_from_cmdline("VLLM::Worker_TP1") == "Worker"
    assert (
        role_from_cmdline(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"])
        == "api_server"
    )
    assert role_from_cmdline(["python", "-m", "engine", "serve", "--config", "c"]) == "engine"
    assert (
        role_from_cmdline(["python", "-c", "from multiprocessing.resource_tracker import main"])
        == "resource_tracker"
    )
    assert role_from_cmdline(["python", "x.py"]) is None


def test_role_of_prefers_titles_then_the_launchers_root_word():
    spawn = ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()"]
    assert role_of(["VLLM::EngineCore"], is_root=False, root_role="vllm") == "EngineCore"
    assert role_of(["python", "app.py"], is_root=True, root_role="engine") == "engine"
    assert role_of(spawn, is_root=False, root_role="engine") == "engine:spawn_child"
    assert role_of(["python", "other.py"], is_root=False, root_role="engine") == "engine:child"
    assert role_of(["python", "other.py"], is_root=False, root_role=None) == "child"


def test_read_cmdline_of_this_process_and_of_a_gone_one():
    assert read_cmdline(os.getpid()) and read_cmdline("self")
    assert read_cmdline(2**22 + 12345) == []
