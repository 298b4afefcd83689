"""Prompt lengths: exact token counts with a tokenizer, word counts without."""

import random

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from loadgen.prompts import PromptBuilder, builtin_corpus


@pytest.fixture(scope="module")
def tokenizer_path(tmp_path_factory):
    """A small byte-level BPE trained on the built-in corpus, saved as tokenizers JSON."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([builtin_corpus()], trainer=trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path


@pytest.mark.parametrize("n", [1, 7, 64, 500, 3000])  # 3000 wraps around the corpus
def test_word_prompts_have_n_words(n):
    builder = PromptBuilder()
    assert not builder.exact
    assert len(builder.prompt(n, random.Random(n)).split()) == n


def test_tokenizer_prompts_have_exactly_n_tokens(tokenizer_path):
    builder = PromptBuilder(tokenizer_path)
    tok = Tokenizer.from_file(str(tokenizer_path))
    rng = random.Random(0)
    for n in [1, 2, 5, 16, 100, 333, 2500]:
        for _ in range(5):
            text = builder.prompt(n, rng)
            assert len(tok.encode(text, add_special_tokens=False).ids) == n, (n, text[:80])


def test_prompts_differ_between_draws_and_repeat_with_the_seed():
    builder = PromptBuilder()
    a = [builder.prompt(20, random.Random(1)) for _ in range(2)]
    assert a[0] == a[1]
    rng = random.Random(1)
    assert builder.prompt(20, rng) != builder.prompt(20, rng)


def test_bad_lengths_and_corpus_are_rejected():
    with pytest.raises(ValueError, match="n_tokens must be >= 1"):
        PromptBuilder().prompt(0, random.Random(0))
    with pytest.raises(ValueError, match="corpus is empty"):
        PromptBuilder(corpus="   ")
