"""Train the engine's byte-level BPE tokenizer (vocab 32000) into engine/assets/tokenizer.json.

Why train our own: the engine needs a real tokenizer whose ids decode to text and whose vocabulary
is as large as a production one (penalty and sampling cost scale with V), and it must be available
offline. The corpus is text that ships with CPython itself, so every machine with the same Python
has it byte for byte:

- every ``*.py`` file of the standard library (``lib/python3.X/**/*.py``: code, comments and
  docstrings in English; the language reference as text in ``pydoc_data/topics.py``), sorted by
  path, excluding ``site-packages`` (varies per machine) and the test suites (``test``, ``tests``,
  ``idle_test``, ``lib2to3``) — about 11.8 MB on CPython 3.11.7.

The file list is sorted and the trainer is single-threaded over a fixed order, so re-running it on
the same CPython version reproduces the same ``tokenizer.json``. The committed asset was trained on
CPython 3.11.7.

Run: ``python -m engine.train_tokenizer [--out PATH]``.
"""

from __future__ import annotations

import argparse
import sys
import sysconfig
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from engine.tokenizer import SPECIAL_TOKENS

VOCAB_SIZE = 32000
# site-packages differs per machine; the test suites are mostly generated/odd data.
EXCLUDED_DIRS = frozenset({"site-packages", "test", "tests", "idle_test", "lib2to3"})
DEFAULT_OUT = Path(__file__).parent / "assets" / "tokenizer.json"


def corpus_files() -> list[Path]:
    """The sorted list of stdlib text files the tokenizer is trained on."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(
        p
        for p in stdlib.rglob("*.py")
        if not EXCLUDED_DIRS.intersection(p.relative_to(stdlib).parts[:-1])
    )
    if not files:
        raise FileNotFoundError(f"no stdlib sources found under {stdlib}")
    return files


def iter_corpus(files: list[Path]):
    """Yield the corpus one file at a time (decoded as UTF-8, undecodable bytes replaced)."""
    for path in files:
        yield path.read_text(encoding="utf-8", errors="replace")


def train(out: Path = DEFAULT_OUT) -> Tokenizer:
    """Train the BPE on the stdlib corpus and save it to ``out``."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # all 256 bytes: any text encodes
        show_progress=False,
    )
    files = corpus_files()
    tok.train_from_iterator(iter_corpus(files), trainer=trainer, length=len(files))
    out.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(out))
    return tok


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    tok = train(args.out)
    print(f"wrote {args.out} (vocab {tok.get_vocab_size()}, python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
