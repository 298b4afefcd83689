"""Request bodies: the fields every request carries, and reproducibility from the seed."""

import json

from loadgen.prompts import PromptBuilder
from loadgen.request_plan import CHAT_PATH, COMPLETIONS_PATH, RequestFactory
from loadgen.spec import WorkloadSpec


def factory(endpoint="chat", seed=0, workload=None):
    workload = workload or WorkloadSpec.from_dict(
        {
            "prompt_tokens": {"mean": 12, "std": 4, "min": 4, "max": 20},
            "output_tokens": {"mean": 6, "std": 2, "min": 2, "max": 9},
            "sampling": {"temperature": [0.5, 1.0], "frequency_penalty": 0.3},
        }
    )
    return RequestFactory(
        workload, PromptBuilder(), model_name="m", seed=seed, id_prefix="run", endpoint=endpoint
    )


def test_chat_body_streams_with_usage_and_exact_output_length():
    f = factory()
    plan = f.plan(f.user_rng(0, 0), "run-1")
    body = json.loads(plan.body_bytes())
    assert plan.path == CHAT_PATH
    assert body["model"] == "m"
    assert body["stream"] is True and body["ignore_eos"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == plan.max_tokens and 2 <= plan.max_tokens <= 9
    assert len(body["messages"][0]["content"].split()) == plan.prompt_tokens_target
    assert body["temperature"] in (0.5, 1.0) and body["frequency_penalty"] == 0.3
    headers = plan.headers("sk-1")
    assert headers["X-Request-Id"] == "run-1"
    assert headers["Authorization"] == "Bearer sk-1"
    assert headers["Accept-Encoding"] == "identity"
    assert "Authorization" not in plan.headers(None)


def test_completions_body_has_a_prompt():
    f = factory("completions")
    plan = f.plan(f.user_rng(0, 0), "x")
    assert plan.path == COMPLETIONS_PATH and "prompt" in plan.body and "messages" not in plan.body


def test_same_seed_same_requests_other_seed_or_user_others():
    def sequence(seed, user):
        f = factory(seed=seed)
        rng = f.user_rng(0, user)
        return [f.plan(rng, str(i)).body for i in range(5)]

    assert sequence(1, 0) == sequence(1, 0)
    assert sequence(1, 0) != sequence(2, 0)
    assert sequence(1, 0) != sequence(1, 1)


def test_workload_seed_overrides_the_run_seed():
    w = WorkloadSpec.from_dict({"seed": 5})
    assert factory(seed=1, workload=w).seed == 5


def test_ignore_eos_can_be_left_out_for_strict_targets():
    f = RequestFactory(
        WorkloadSpec(), PromptBuilder(), model_name="m", seed=0, id_prefix="r", ignore_eos=False
    )
    body = f.plan(f.user_rng(0, 0), "x").body
    assert "ignore_eos" not in body and body["stream"] is True and "max_tokens" in body
