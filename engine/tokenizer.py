"""The engine's tokenizer: a byte-level BPE (``tokenizers``) plus a chat template and special ids.

Two sources:
- the project's own BPE in ``engine/assets/tokenizer.json`` (trained by ``engine/train_tokenizer.py``,
  vocab 32000), with its own chat template written out here (the same as
  ``engine/assets/chat_template.jinja``, which checkpoints built on this tokenizer carry);
- a Hugging Face checkpoint folder (``tokenizer.json`` + ``tokenizer_config.json``), with its EOS token
  and its Jinja chat template where it has one (``engine.chat_template``: which file, in which order).
  Without one, chat answers 400 naming both ways out; the project's template never stands in.

Decoding is byte-level, so ``decode(encode(text)) == text`` for any text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as HFTokenizer

from engine import chat_template as templates
from engine.chat_template import ChatTemplate, ChatTemplateMissing

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
END_OF_TURN = "<|end|>"
ROLE_TOKENS = {"system": "<|system|>", "user": "<|user|>", "assistant": "<|assistant|>"}
# Order fixes the ids 0..6 of the project tokenizer.
SPECIAL_TOKENS: tuple[str, ...] = (BOS, EOS, PAD, *ROLE_TOKENS.values(), END_OF_TURN)
DEFAULT_TOKENIZER_PATH = Path(__file__).parent / "assets" / "tokenizer.json"


@dataclass(frozen=True)
class ChatMessage:
    """One chat turn; ``role`` is system, user or assistant."""

    role: str
    content: str


class Tokenizer:
    """Encode/decode text and render chat messages to prompt ids.

    ``eos_token_id`` is the id that ends generation; ``stop_token_ids`` are all ids that end it
    (EOS and, for the project template, the end-of-turn token).
    """

    def __init__(
        self,
        hf: HFTokenizer,
        *,
        eos_token: str,
        bos_token: str | None,
        chat_template: ChatTemplate | None = None,
        builtin_chat: bool = False,
        extra_stop_tokens: Sequence[str] = (),
        source: str = "this tokenizer",
    ):
        """``chat_template``: the Jinja template chat renders with; else ``builtin_chat`` (the
        project tokenizer's own turns), else chat is a ``ChatTemplateMissing`` naming ``source``."""
        self._hf = hf
        self.eos_token_id = self._require_id(eos_token)
        self.bos_token_id = None if bos_token is None else self._require_id(bos_token)
        self.stop_token_ids = frozenset(
            [self.eos_token_id, *(self._require_id(t) for t in extra_stop_tokens)]
        )
        self.chat_template = chat_template
        self._builtin_chat = builtin_chat
        self._source = source

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def default(cls, chat_template: str | None = None) -> Tokenizer:
        """The project's BPE (vocab 32000) with its own chat template, or the ``chat_template``
        setting's (``engine.chat_template``: a file or a template) where one is given."""
        return cls(
            HFTokenizer.from_file(str(DEFAULT_TOKENIZER_PATH)),
            eos_token=EOS,
            bos_token=BOS,
            chat_template=None if chat_template is None else templates.from_setting(chat_template),
            builtin_chat=True,
            extra_stop_tokens=(END_OF_TURN,),
            source="the project tokenizer",
        )

    @classmethod
    def from_hf_folder(cls, folder: str | Path, chat_template: str | None = None) -> Tokenizer:
        """Load ``tokenizer.json`` and, when present, ``tokenizer_config.json`` of a HF checkpoint;
        the chat template is the ``chat_template`` setting's, else the checkpoint's own
        (``engine.chat_template.resolve``), else none."""
        folder = Path(folder)
        tok_file = folder / "tokenizer.json"
        if not tok_file.exists():
            raise FileNotFoundError(f"{tok_file} not found (the checkpoint needs a tokenizer.json)")
        hf = HFTokenizer.from_file(str(tok_file))
        cfg_file = folder / "tokenizer_config.json"
        cfg = json.loads(cfg_file.read_text()) if cfg_file.exists() else {}
        eos = _token_str(cfg.get("eos_token")) or _first_present(
            hf, ["</s>", "<|end_of_text|>", "<|endoftext|>", EOS]
        )
        bos = _token_str(cfg.get("bos_token")) or _first_present(
            hf, ["<s>", "<|begin_of_text|>", BOS]
        )
        if eos is None:
            raise ValueError(
                f"{folder}: no eos_token in tokenizer_config.json and none of the usual EOS tokens in the vocabulary"
            )
        template = templates.resolve(folder, cfg, chat_template)
        return cls(hf, eos_token=eos, bos_token=bos, chat_template=template, source=str(folder))

    # ---- text ---------------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self._hf.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, add_bos: bool = False) -> list[int]:
        """Text → ids (no special tokens added unless ``add_bos``)."""
        ids = self._hf.encode(text, add_special_tokens=False).ids
        if add_bos and self.bos_token_id is not None:
            ids = [self.bos_token_id, *ids]
        return ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self._hf.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        return self._hf.token_to_id(token)

    def _require_id(self, token: str) -> int:
        tid = self._hf.token_to_id(token)
        if tid is None:
            raise ValueError(f"special token {token!r} is not in the tokenizer's vocabulary")
        return tid

    # ---- chat ---------------------------------------------------------------------------------
    @property
    def chat_template_origin(self) -> str | None:
        """Where chat's template comes from (for the start-up log); None: chat answers 400."""
        if self.chat_template is not None:
            return self.chat_template.origin
        return "the project tokenizer's own (built in)" if self._builtin_chat else None

    def apply_chat_template(self, messages: Sequence[ChatMessage | dict]) -> list[int]:
        """Render chat messages plus the assistant's opening into prompt ids.

        Messages are dicts (``{"role", "content"}``) or ``ChatMessage``; a role outside
        system/user/assistant or a non-string content is a ``ValueError`` naming the message.
        With no template at all it is a ``ChatTemplateMissing`` (a ValueError) saying so.
        """
        msgs = [_as_message(m, i) for i, m in enumerate(messages)]
        if not msgs:
            raise ValueError("messages: at least one message is required")
        if self.chat_template is not None:
            return self._apply_jinja(self.chat_template, msgs)
        if not self._builtin_chat:
            raise ChatTemplateMissing(templates.missing_template_message(self._source))
        ids: list[int] = [] if self.bos_token_id is None else [self.bos_token_id]
        end = self._require_id(END_OF_TURN)
        for m in msgs:
            # <|role|>\n{content}<|end|>\n
            ids += [
                self._require_id(ROLE_TOKENS[m.role]),
                *self.encode("\n" + m.content),
                end,
                *self.encode("\n"),
            ]
        ids += [self._require_id(ROLE_TOKENS["assistant"]), *self.encode("\n")]
        return ids

    def _apply_jinja(self, template: ChatTemplate, msgs: list[ChatMessage]) -> list[int]:
        text = template.render(
            [{"role": m.role, "content": m.content} for m in msgs],
            bos_token=""
            if self.bos_token_id is None
            else str(self._hf.id_to_token(self.bos_token_id)),
            eos_token=str(self._hf.id_to_token(self.eos_token_id)),
        )
        # The template writes special tokens as text; encode them as special tokens.
        return self._hf.encode(text, add_special_tokens=False).ids


def _as_message(m: ChatMessage | dict, index: int) -> ChatMessage:
    if isinstance(m, ChatMessage):
        msg = m
    elif isinstance(m, dict):
        role: Any = m.get("role")  # checked below, with the message's index
        content: Any = m.get("content")
        msg = ChatMessage(role=role, content=content)
    else:
        raise ValueError(f"messages[{index}]: expected an object with role and content")
    if msg.role not in ROLE_TOKENS:
        raise ValueError(
            f"messages[{index}].role: must be one of {sorted(ROLE_TOKENS)}, got {msg.role!r}"
        )
    if not isinstance(msg.content, str):
        raise ValueError(f"messages[{index}].content: must be a string")
    return msg


def _token_str(tok) -> str | None:
    """tokenizer_config.json writes special tokens as a string or as {"content": ...}."""
    if isinstance(tok, dict):
        return tok.get("content")
    return tok


def _first_present(hf: HFTokenizer, candidates: list[str]) -> str | None:
    return next((c for c in candidates if hf.token_to_id(c) is not None), None)
