"""Incremental detokenization and stop strings, on the project's real BPE tokenizer."""

from engine.server.detokenizer import IncrementalDetokenizer, StopStrings
from engine.tokenizer import Tokenizer


def _stream(tok, ids):
    detok = IncrementalDetokenizer(tok)
    deltas = [detok.push([i]) for i in ids]
    return deltas, detok.finish()


def test_deltas_concatenate_to_the_full_decode_including_multibyte_characters():
    tok = Tokenizer.default()
    text = "Hello wörld — ünïcode 你好 🙂 end"
    ids = tok.encode(text)
    deltas, rest = _stream(tok, ids)
    assert "".join(deltas) + rest == text
    assert not any("\ufffd" in d for d in deltas)


def test_special_tokens_add_no_text():
    tok = Tokenizer.default()
    ids = tok.encode("ok") + [tok.eos_token_id]
    deltas, rest = _stream(tok, ids)
    assert "".join(deltas) + rest == "ok" and deltas[-1] == ""


def test_stop_string_cuts_text_and_never_leaks_a_partial_match():
    stops = StopStrings(["STOP"])
    out = [stops.feed(t) for t in ["ab", "cS", "T", "OPxyz"]]
    assert "".join(out) == "abc" and stops.stopped
    assert not any("S" in o for o in out)
    assert stops.feed("more") == "" and stops.finish() == ""


def test_held_back_text_is_released_when_it_cannot_be_a_stop_or_at_the_end():
    stops = StopStrings(["\n\n"])
    assert stops.feed("a\n") == "a"
    assert stops.feed("b") == "\nb"
    assert stops.feed("\n") == ""
    assert stops.finish() == "\n" and not stops.stopped


def test_no_stop_strings_passes_text_through():
    stops = StopStrings([])
    assert stops.feed("abc") == "abc" and stops.finish() == ""
