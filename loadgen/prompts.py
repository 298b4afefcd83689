"""Prompt text of a requested token length, cut from a corpus.

What: `PromptBuilder.prompt(n_tokens, rng)` returns text that is `n_tokens` long. With a
`tokenizers` JSON file (the target's own tokenizer) the count is exact: the text is cut on token
boundaries and re-checked by encoding it again. Without one, one word stands in for one token
(approximate; the server's `usage.prompt_tokens` in requests.parquet is the true count).
Why a corpus and not random ids: real text gives the tokenizer and the model realistic input, and
a random start offset per request keeps prompts different from each other.
The chat template the server wraps around the message adds a few tokens on top of `n_tokens`.
"""

from __future__ import annotations

import random
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer

# Re-encoding a cut can shift the count by a token or two at the edges (a word split across the
# cut); this many corrections of the cut length, then this many other start offsets, are tried.
_MAX_LENGTH_FIXES = 6
_MAX_START_TRIES = 16


@lru_cache(maxsize=1)
def builtin_corpus() -> str:
    """The built-in corpus (public-domain openings plus project text), read once per process."""
    return resources.files("loadgen").joinpath("corpus.txt").read_text(encoding="utf-8")


class PromptBuilder:
    """Cuts prompts of a given token length from a corpus; `tokenizer_path` makes them exact."""

    def __init__(self, tokenizer_path: str | Path | None = None, corpus: str | None = None):
        self.corpus = corpus if corpus is not None else builtin_corpus()
        self.words = self.corpus.split()
        if not self.words:
            raise ValueError("the prompt corpus is empty")
        self.tokenizer = None
        if tokenizer_path is not None:
            from tokenizers import (
                Tokenizer,
            )  # only when asked for: keeps the import cheap otherwise

            self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
            self.ids = self.count_ids(self.corpus)
            if not self.ids:
                raise ValueError(f"{tokenizer_path}: the tokenizer encodes the corpus to no tokens")

    @property
    def exact(self) -> bool:
        """True when prompt lengths are exact token counts (a tokenizer was given)."""
        return self.tokenizer is not None

    def _require_tokenizer(self) -> Tokenizer:
        if self.tokenizer is None:
            raise ValueError("tokenizer_path: exact token counts need a tokenizer")
        return self.tokenizer

    def count_ids(self, text: str) -> list[int]:
        return self._require_tokenizer().encode(text, add_special_tokens=False).ids

    def count_tokens(self, text: str) -> int:
        """Tokens in `text` under the tokenizer, or words when there is none."""
        return len(self.count_ids(text)) if self.tokenizer is not None else len(text.split())

    def prompt(self, n_tokens: int, rng: random.Random) -> str:
        """Text of `n_tokens` tokens (exact with a tokenizer, else words) starting at a random
        place in the corpus, wrapping around. Advances `rng`; no other side effect."""
        if n_tokens < 1:
            raise ValueError(f"n_tokens must be >= 1, got {n_tokens}")
        if self.tokenizer is None:
            start = rng.randrange(len(self.words))
            return " ".join(self._cycle(self.words, start, n_tokens))
        best_text, best_err = "", None
        for _ in range(_MAX_START_TRIES):
            start = rng.randrange(len(self.ids))
            text, err = self._exact_from(start, n_tokens)
            if err == 0:
                return text
            if best_err is None or abs(err) < abs(best_err):
                best_text, best_err = text, err
        return best_text

    def _exact_from(self, start: int, n_tokens: int) -> tuple[str, int]:
        """Cut starting at token `start`, correcting the cut length until re-encoding gives
        `n_tokens`; returns (text, actual - wanted)."""
        take = n_tokens
        text, err = "", n_tokens
        for _ in range(_MAX_LENGTH_FIXES):
            text = self._require_tokenizer().decode(self._cycle(self.ids, start, take)).strip()
            err = self.count_tokens(text) - n_tokens
            if err == 0 or take - err < 1:
                break
            take -= err
        return text, err

    @staticmethod
    def _cycle(items: list, start: int, n: int) -> list:
        """n items from `start`, wrapping around the end of `items`."""
        reps = (start + n) // len(items) + 1
        return (items * reps)[start : start + n] if reps > 1 else items[start : start + n]
