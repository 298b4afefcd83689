"""One request's generation as text: engine step outputs → ``TextStep``s (text delta, finish reason).

Shared by both endpoints and both response modes, so streaming and non-streaming answers are built
from the same deltas (their concatenation is the non-streaming text).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from engine.server.async_engine import AsyncEngine, RequestStream
from engine.server.detokenizer import IncrementalDetokenizer, StopStrings


@dataclass
class TextStep:
    """The text one engine step added to one request."""

    text: str
    n_tokens: int  # tokens this step produced for the request (1 in decode)
    finish_reason: str | None  # "stop" / "length" on the last step, else None
    step_end_ns: int


class TextGeneration:
    """Iterate ``steps()`` for the deltas; ``close()`` (idempotent) aborts the request if unfinished.

    ``completion_tokens`` counts every generated token, including one cut off by a stop string
    (what vLLM reports as usage).
    """

    def __init__(
        self,
        engine: AsyncEngine,
        stream: RequestStream,
        tokenizer,
        stop: Sequence[str],
        prompt_tokens: int,
    ):
        self._engine = engine
        self.prompt_tokens = prompt_tokens
        self._stream = stream
        self._detok = IncrementalDetokenizer(tokenizer)
        self._stops = StopStrings(stop)
        self.completion_tokens = 0
        self.finish_reason: str | None = None

    @property
    def request_id(self) -> str:
        return self._stream.request_id

    async def steps(self) -> AsyncIterator[TextStep]:
        async for out in self._stream:
            self.completion_tokens += len(out.new_token_ids)
            text = self._stops.feed(self._detok.push(out.new_token_ids))
            if self._stops.stopped:
                # The engine would keep decoding past the stop string.
                self._engine.finish_early(self.request_id, self.prompt_tokens)
                self.finish_reason = "stop"
            elif out.finished:
                text += self._stops.feed(self._detok.finish())
                text += self._stops.finish()
                self.finish_reason = (
                    "stop" if self._stops.stopped else (out.finish_reason or "stop")
                )
            yield TextStep(text, len(out.new_token_ids), self.finish_reason, out.step_end_ns)
            if self.finish_reason is not None:
                return

    def close(self) -> None:
        self._engine.abort(self.request_id)
