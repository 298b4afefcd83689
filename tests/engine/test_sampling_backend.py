"""Backend choice: torch on the CPU (even with the interpreter variable set), Triton only when asked."""

import pytest
import torch

from engine.sampling.backend import select_backend


def test_auto_on_cpu_is_torch_even_with_interpreter_env(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert select_backend(torch.device("cpu"), "auto") == "torch"


def test_triton_on_cpu_without_interpreter_is_an_error(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="needs a CUDA device"):
        select_backend(torch.device("cpu"), "triton")


def test_unknown_backend_names_the_choices():
    with pytest.raises(ValueError, match="backend must be one of"):
        select_backend(torch.device("cpu"), "cuda")
    assert select_backend(torch.device("cpu"), "torch") == "torch"
