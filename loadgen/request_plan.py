"""The next request to send: id, body and the drawn lengths and sampling parameters.

What: `RequestFactory.plan(rng, user, seq)` draws one request of the workload; each simulated
user owns a `random.Random` seeded from (run seed, worker, user), so a seed reproduces every
user's sequence of requests whatever the timing.
Why separate from the Locust user: the same plans feed the Locust user, the open-loop scheduler,
the benchmark's asyncio client and the tests, and none of them needs Locust to build a body.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from loadgen.prompts import PromptBuilder
from loadgen.spec import SAMPLING_RANGES, WorkloadSpec

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"


@dataclass(frozen=True)
class RequestPlan:
    """One request as it will be sent, plus what was drawn for it (for the recorder)."""

    request_id: str
    path: str  # URL path, chat or completions endpoint
    body: dict  # the JSON body
    prompt_tokens_target: int
    max_tokens: int
    sampling: dict  # the sampling parameters put in the body

    def body_bytes(self) -> bytes:
        return json.dumps(self.body, separators=(",", ":")).encode()

    def headers(self, api_key: str | None = None) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            # a compressed SSE stream is buffered by the compressor: chunk times would be wrong
            "Accept-Encoding": "identity",
            "X-Request-Id": self.request_id,
        }
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        return headers


class RequestFactory:
    """Builds RequestPlans for one workload (pure apart from the rng passed in)."""

    def __init__(
        self,
        workload: WorkloadSpec,
        prompts: PromptBuilder,
        *,
        model_name: str,
        seed: int,
        id_prefix: str,
        endpoint: str = "chat",
        pool=None,
        ignore_eos: bool = True,
    ):
        if endpoint not in ("chat", "completions"):
            raise ValueError(f"endpoint must be 'chat' or 'completions', got {endpoint!r}")
        self.workload = workload
        self.prompts = prompts
        self.model_name = model_name
        self.seed = workload.seed if workload.seed is not None else seed
        self.id_prefix = id_prefix
        self.endpoint = endpoint
        # vLLM's ignore_eos (also SGLang, our engine); off for targets that reject unknown fields
        self.ignore_eos = ignore_eos
        # prompts from a JSONL/ShareGPT file (sources.PromptEntry list); None: the corpus
        self.pool = pool
        if workload.source != "builtin" and pool is None:
            from loadgen.sources import load_prompt_file

            if workload.path is None:
                raise ValueError(f"workload.path: required for workload.source {workload.source!r}")
            self.pool = load_prompt_file(workload.path, workload.source)

    def user_rng(self, worker: int, user: int) -> random.Random:
        """The rng of one simulated user; string seeds hash deterministically across processes."""
        return random.Random(f"{self.seed}/{worker}/{user}")

    def plan(self, rng: random.Random, request_id: str, repetition=None) -> RequestPlan:
        """Draw one request: prompt length, output length, sampling parameters, prompt text.
        `repetition` (traffic_faults.RepetitionParams, HeavyTrafficParams or LongPromptParams,
        inside a penalty.repetition / penalty.heavy_traffic / memory.kv_pressure window) replaces
        the drawn sampling (and, for repetition, the output length; for kv_pressure, the prompt:
        a corpus prompt of its length even with a prompt file) after the draws, so the length
        and sampling draws advance the rng the same way with or without the fault."""
        prompt_len = self.workload.prompt_tokens.draw(rng)
        max_tokens = self.workload.output_tokens.draw(rng)
        sampling = self.workload.draw_sampling(rng)
        prompt_length = getattr(repetition, "prompt_length", None)  # memory.kv_pressure's
        if prompt_length is not None:
            prompt_len = prompt_length(prompt_len)
        if self.pool is None or prompt_length is not None:
            text = self.prompts.prompt(prompt_len, rng)
        else:  # a file's prompt: its own length; its output length when the file gives one
            entry = rng.choice(self.pool)
            text = entry.text
            prompt_len = self.prompts.count_tokens(text)
            if entry.output_tokens is not None:
                max_tokens = entry.output_tokens
            elif entry.reply is not None:
                max_tokens = max(self.prompts.count_tokens(entry.reply), 1)
        if repetition is not None:
            sampling = {**sampling, **repetition.sampling_overrides()}
            max_tokens = repetition.output_tokens(max_tokens, self.workload.output_tokens.max)
        plan = self.build(request_id, text, prompt_len, max_tokens, sampling)
        if repetition is not None and repetition.honours_eos:
            plan.body.pop("ignore_eos", None)  # penalty.repetition: the output may end on EOS
        return plan

    def from_replay(self, entry, rng: random.Random, request_id: str) -> RequestPlan:
        """A plan for a replay.ReplayEntry: its body as given (always streamed with usage), its
        text, or a corpus prompt of its recorded length; max_tokens drawn when it has none."""
        max_tokens = entry.max_tokens or self.workload.output_tokens.draw(rng)
        if entry.body is None:
            text = (
                entry.prompt
                if entry.prompt is not None
                else self.prompts.prompt(entry.prompt_tokens, rng)
            )
            prompt_len = entry.prompt_tokens or self.prompts.count_tokens(text)
            return self.build(request_id, text, prompt_len, max_tokens, dict(entry.sampling))
        body = {
            "model": self.model_name,
            **entry.body,
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            **entry.sampling,
        }
        body.pop("max_completion_tokens", None)  # max_tokens above carries the length
        if "messages" in body:
            text = " ".join(
                str(m.get("content", "")) for m in body["messages"] if isinstance(m, dict)
            )
            path = CHAT_PATH
        else:
            text, path = str(body["prompt"]), COMPLETIONS_PATH
        sampling = {k: body[k] for k in SAMPLING_RANGES if k in body}
        return RequestPlan(
            request_id=request_id,
            path=path,
            body=body,
            prompt_tokens_target=self.prompts.count_tokens(text),
            max_tokens=max_tokens,
            sampling=sampling,
        )

    def build(
        self, request_id: str, text: str, prompt_len: int, max_tokens: int, sampling: dict
    ) -> RequestPlan:
        """A plan from already chosen parts (also used by replay)."""
        body: dict = {"model": self.model_name}
        if self.endpoint == "chat":
            body["messages"] = [{"role": "user", "content": text}]
            path = CHAT_PATH
        else:
            body["prompt"] = text
            path = COMPLETIONS_PATH
        body["max_tokens"] = max_tokens
        if self.ignore_eos:
            # exactly max_tokens tokens come back, so output length is the workload's, not the model's
            body["ignore_eos"] = True
        body.update({"stream": True, "stream_options": {"include_usage": True}, **sampling})
        return RequestPlan(
            request_id=request_id,
            path=path,
            body=body,
            prompt_tokens_target=prompt_len,
            max_tokens=max_tokens,
            sampling=sampling,
        )
