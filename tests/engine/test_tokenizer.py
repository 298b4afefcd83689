import pytest

from engine.tokenizer import EOS, SPECIAL_TOKENS, Tokenizer


@pytest.fixture(scope="module")
def tok():
    return Tokenizer.default()


@pytest.mark.parametrize(
    "text", ["Hello, world!", "def f(x):\n    return x ** 2\n", "ünïcödé 😀 — 漢字", "  spaces  "]
)
def test_round_trip(tok, text):
    ids = tok.encode(text)
    assert ids and all(0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == text


def test_vocab_and_specials(tok):
    assert tok.vocab_size == 32000
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == list(range(len(SPECIAL_TOKENS)))
    assert tok.eos_token_id == tok.token_to_id(EOS)
    assert tok.eos_token_id in tok.stop_token_ids


def test_chat_template(tok):
    ids = tok.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    )
    text = tok.decode(ids, skip_special_tokens=False)
    assert text == "<|bos|><|system|>\nBe brief.<|end|>\n<|user|>\nHi there<|end|>\n<|assistant|>\n"
    assert tok.decode(ids) == "\nBe brief.\n\nHi there\n\n"


@pytest.mark.parametrize(
    "messages,field",
    [
        ([], "messages"),
        ([{"role": "robot", "content": "x"}], r"messages\[0\].role"),
        ([{"role": "user", "content": 3}], r"messages\[0\].content"),
    ],
)
def test_chat_template_rejects_bad_messages(tok, messages, field):
    with pytest.raises(ValueError, match=field):
        tok.apply_chat_template(messages)
