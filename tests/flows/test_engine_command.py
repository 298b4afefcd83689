"""`spikelens engine` (flows/engine_command.py) started the way people start `vllm serve`: the real
console script in a subprocess, the context length taken from the checkpoint, the official
`openai` client streaming; contradicting flags refused before anything starts."""

import json
import signal
import subprocess

import httpx
import pytest

from engine.server.launch import free_port
from tests.support.engine_cli import SPIKELENS, engine_env, run_engine, wait_healthy
from tests.support.terminal import terminal_like


def test_engine_serves_a_256_position_checkpoint_with_no_engine_flag(hf_llama_256, tmp_path):
    """Only --model (and --port, so parallel CI jobs do not collide on 8000): max_model_len comes
    from max_position_embeddings=256, and the openai client streams a chat completion."""
    openai = pytest.importorskip("openai")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [SPIKELENS, "engine", "--model", str(hf_llama_256), "--port", str(port)],
        env=engine_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=terminal_like,  # Ctrl-C must reach it even from a background CI job
    )
    try:
        wait_healthy(proc, url)
        models = httpx.get(url + "/v1/models").json()
        assert models["data"][0]["max_model_len"] == 256
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused")
        stream = client.chat.completions.create(
            model="spikelens",
            messages=[{"role": "user", "content": "Hello there"}],
            max_tokens=8,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
        chunks = list(stream)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text and chunks[-1].usage.completion_tokens == 8
        with pytest.raises(openai.BadRequestError, match="max_model_len=256"):
            client.completions.create(model="spikelens", prompt=[5] * 300, max_tokens=4)
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C of the CLI: forwarded once, the server flushes
        assert proc.wait(timeout=60) == 0
    assert "max_model_len=256" in proc.stderr.read()  # the server says what it derived
    run_dir = tmp_path / "home" / "runs" / "adhoc-engine"
    assert (run_dir / "steps.parquet").exists()
    assert json.loads((run_dir / "engine-config.json").read_text())["engine"] == {
        "model": str(hf_llama_256)
    }


def test_explicit_max_model_len_above_the_checkpoint_is_refused(hf_llama_256, tmp_path):
    proc = run_engine(
        [str(hf_llama_256), "--max-model-len", "512", "--port", str(free_port())], tmp_path
    )
    assert proc.returncode == 2
    assert "engine.max_model_len: must be in [2, 256]" in proc.stderr and "got 512" in proc.stderr


def test_flags_override_the_config_file(tmp_path):
    """The file's max_num_seqs (2) is valid; the flag's (0) wins, so the server refuses to start."""
    config = tmp_path / "engine.json"
    config.write_text(json.dumps({"engine": {"model": "tiny", "max_num_seqs": 2}, "faults": []}))
    proc = run_engine(
        [
            "--config",
            str(config),
            "--max-num-seqs",
            "0",
            "--tp",
            "1",
            "--dtype",
            "half",
            "--port",
            str(free_port()),
        ],
        tmp_path,
    )
    assert proc.returncode == 2 and "engine.max_num_seqs" in proc.stderr
    merged = json.loads(
        (tmp_path / "home" / "runs" / "adhoc-engine" / "engine-config.json").read_text()
    )
    assert merged["engine"] == {"model": "tiny", "max_num_seqs": 0, "tp": 1, "dtype": "half"}


def test_help_lists_the_vllm_style_flags(tmp_path):
    proc = run_engine(["--help"], tmp_path, COLUMNS="200")
    assert proc.returncode == 0
    for flag in (
        "--model",
        "--max-model-len",
        "--max-num-seqs",
        "--kv-blocks",
        "--kv-cache-memory-bytes",
        "--dtype",
        "--tensor-parallel-size",
        "--tp",
        "--seed",
        "--host",
        "--port",
        "--config",
        "--chat-template",
    ):
        assert flag in proc.stdout
    assert "override the file" in " ".join(proc.stdout.split())


def test_chat_template_flag_serves_chat_on_a_checkpoint_without_one(hf_llama_256, tmp_path):
    """--chat-template FILE, as `vllm serve --chat-template`: the merged config records it and
    chat renders with it; a value that looks like a path but does not open exits 2 at start."""
    from engine.tokenizer import Tokenizer
    from tests.support.hf_llama import CHAT_TEMPLATE, with_template_in

    folder = with_template_in(hf_llama_256, tmp_path / "no-template", None)
    bad = run_engine([str(folder), "--chat-template", "missing.jinja"], tmp_path / "bad")
    assert bad.returncode == 2
    assert "engine.chat_template: 'missing.jinja' looks like a file path" in bad.stderr
    template = tmp_path / "chat.jinja"
    template.write_text(CHAT_TEMPLATE)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [SPIKELENS, "engine", str(folder), "--chat-template", str(template), "--port", str(port)]
    proc = subprocess.Popen(
        cmd, env=engine_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_healthy(proc, url)
        chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}
        r = httpx.post(url + "/v1/chat/completions", json=chat, timeout=60)
        assert r.status_code == 200, r.text
        built_in = Tokenizer.default().apply_chat_template(chat["messages"])
        assert r.json()["usage"]["prompt_tokens"] == len(built_in)  # the file's = the project's
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0
    assert f"chat template: --chat-template {template}" in proc.stderr.read()
    merged = json.loads(
        (tmp_path / "home" / "runs" / "adhoc-engine" / "engine-config.json").read_text()
    )
    assert merged["engine"]["chat_template"] == str(template)


def test_sigterm_of_the_cli_stops_the_server_gracefully(tmp_path):
    """SIGTERM reaches only the CLI (the server has its own session); it is forwarded once, the
    server flushes its telemetry and exits 0, and no process is left behind."""
    psutil = pytest.importorskip("psutil")
    port = free_port()
    proc = subprocess.Popen(
        [
            SPIKELENS,
            "engine",
            "tiny",
            "--max-model-len",
            "64",
            "--kv-blocks",
            "8",
            "--port",
            str(port),
        ],
        env=engine_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_healthy(proc, f"http://127.0.0.1:{port}")
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert (tmp_path / "home" / "runs" / "adhoc-engine" / "steps.parquet").exists()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--kv-blocks", "8", "--kv-cache-memory-bytes", "1GiB"], "give the KV cache size once"),
        (["tiny", "--model", "small"], "give the model once: MODEL 'tiny' and --model 'small'"),
    ],
)
def test_contradicting_flags_exit_2_before_any_server_starts(tmp_path, monkeypatch, args, message):
    from typer.testing import CliRunner

    from flows.cli import app

    monkeypatch.setenv("SPIKELENS_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(app, ["engine", *args])
    assert result.exit_code == 2 and message in result.output
    assert not (tmp_path / "home").exists()  # nothing written, nothing started


def test_the_config_file_and_the_flags_merge_block_by_block(tmp_path):
    from flows.engine_command import _engine_run_config

    config = tmp_path / "engine.json"
    config.write_text(
        json.dumps({"engine": {"model": "tiny", "dtype": "half"}, "server": {"max_waiting": 4}})
    )
    merged = _engine_run_config(
        config, {"model": None, "max_num_seqs": 2}, {"model_name": "served"}
    )
    assert merged == {
        "engine": {"model": "tiny", "dtype": "half", "max_num_seqs": 2},
        "server": {"max_waiting": 4, "model_name": "served"},
    }
    assert _engine_run_config(None, {"model": "small"}, {"model_name": None}) == {
        "run_id": "adhoc",
        "faults": [],
        "engine": {"model": "small"},
    }
