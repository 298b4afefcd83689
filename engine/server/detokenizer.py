"""Incremental detokenization and stop strings: token ids of one step → the text delta to stream.

Why offsets instead of decoding token by token: a byte-level BPE token can end inside a UTF-8
character, and SentencePiece-style decoders change a token's text depending on its left context.
Decoding a short window ``ids[prefix_offset:]`` and subtracting the text of ``ids[prefix_offset:read_offset]``
gives the exact new text (the technique vLLM and TGI use), and a trailing U+FFFD means "wait for the
next token". Cost per step is O(window), not O(output).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

_INCOMPLETE = "\ufffd"  # what decode() yields for a partial UTF-8 sequence


class _Decoder(Protocol):
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str: ...


class IncrementalDetokenizer:
    """Feed output token ids with ``push``; get the newly completed text. ``finish`` drains the rest.

    Special tokens (EOS, end-of-turn) decode to nothing, as in vLLM's default
    ``skip_special_tokens=True``.
    """

    def __init__(self, tokenizer: _Decoder):
        self._tok = tokenizer
        self._ids: list[int] = []
        self._prefix_offset = 0  # start of the decode window (left context for the decoder)
        self._read_offset = 0  # ids before this are already returned as text

    def push(self, new_ids: Sequence[int]) -> str:
        self._ids.extend(new_ids)
        prefix_text = self._tok.decode(self._ids[self._prefix_offset : self._read_offset])
        full_text = self._tok.decode(self._ids[self._prefix_offset :])
        if len(full_text) > len(prefix_text) and not full_text.endswith(_INCOMPLETE):
            self._prefix_offset, self._read_offset = self._read_offset, len(self._ids)
            return full_text[len(prefix_text) :]
        return ""

    def finish(self) -> str:
        """Text of ids still held back (an incomplete character at the very end is emitted as-is)."""
        prefix_text = self._tok.decode(self._ids[self._prefix_offset : self._read_offset])
        full_text = self._tok.decode(self._ids[self._prefix_offset :])
        self._prefix_offset = self._read_offset = len(self._ids)
        return full_text[len(prefix_text) :]


class StopStrings:
    """Cuts the output at the first stop string (the stop string itself is not returned, as in OpenAI).

    To never stream part of a stop string that later completes, a tail of the text that is a prefix
    of some stop string is held back until more text proves it is not one, or the request ends.
    """

    def __init__(self, stops: Sequence[str]):
        self._stops = [s for s in stops if s]
        self._pending = ""  # text received but not yet released
        self.stopped = False

    def feed(self, text: str) -> str:
        """Add decoded text; return what can be released now. Sets ``stopped`` on a match."""
        if self.stopped:
            return ""
        if not self._stops:
            return text
        self._pending += text
        cut = min((i for i in (self._pending.find(s) for s in self._stops) if i >= 0), default=-1)
        if cut >= 0:
            out, self._pending, self.stopped = self._pending[:cut], "", True
            return out
        keep = self._partial_match_len()
        out = self._pending[: len(self._pending) - keep]
        self._pending = self._pending[len(self._pending) - keep :]
        return out

    def _partial_match_len(self) -> int:
        """Length of the longest tail of the pending text that starts some stop string."""
        text = self._pending
        for n in range(min(len(text), max(len(s) for s in self._stops) - 1), 0, -1):
            tail = text[-n:]
            if any(s.startswith(tail) for s in self._stops):
                return n
        return 0

    def finish(self) -> str:
        """At the end of generation, release what was held back."""
        out, self._pending = ("" if self.stopped else self._pending), ""
        return out
