"""Where the engine's chat template comes from, and how it renders: as vLLM and transformers do it.

The template of a run, first found wins:

1. the engine's ``chat_template`` setting (``spikelens engine --chat-template FILE|TEMPLATE``, a
   scenario's ``engine.chat_template``), read as vLLM reads ``--chat-template``: a path that opens
   is a file; a string that does not open and holds none of ``{``, ``}`` or a newline looks like a
   mistyped path and is an error; any other string is the template itself;
2. the checkpoint's ``chat_template.jinja``: what transformers' ``save_pretrained`` writes
   (since 4.47), and what its tokenizer prefers over ``tokenizer_config.json``;
3. the checkpoint's ``chat_template.json``, ``{"chat_template": "..."}``: the processors' older file;
4. ``chat_template`` in ``tokenizer_config.json``: a string, or a list of ``{"name", "template"}``
   of which transformers uses the one named ``default``.

None of them: the checkpoint has no template and chat requests answer 400 with
``missing_template_message`` (both ways out). No built-in template stands in: its special tokens
need not be in the checkpoint's vocabulary, and a prompt the model was never trained on is a
silent wrong answer. The presets are the exception: they use the project tokenizer, whose own
template (``engine/assets/chat_template.jinja``, written out in ``engine.tokenizer``) is theirs.

Rendering follows transformers' ``apply_chat_template``: a sandboxed Jinja environment with
``trim_blocks``/``lstrip_blocks``, the ``loopcontrols`` extension, ``raise_exception``,
``strftime_now`` and its ``tojson``; ``messages``, ``add_generation_prompt``, ``bos_token`` and
``eos_token`` in scope. A template's own error (``raise_exception``, an undefined name) is a
``ValueError``: the server answers it 400, as vLLM does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

JINJA_FILE = "chat_template.jinja"  # transformers' CHAT_TEMPLATE_FILE
JSON_FILE = "chat_template.json"  # transformers' LEGACY_PROCESSOR_CHAT_TEMPLATE_FILE
TOKENIZER_CONFIG = "tokenizer_config.json"
# A --chat-template value with none of these characters is a path, never a template (vLLM's rule).
JINJA_CHARS = "{}\n"
# The project tokenizer's template (its special tokens), for checkpoints built on that tokenizer.
PROJECT_TEMPLATE_PATH = Path(__file__).parent / "assets" / JINJA_FILE


class ChatTemplateMissing(ValueError):
    """A chat request to an engine whose checkpoint has no template and none was given."""


@dataclass
class ChatTemplate:
    """A Jinja chat template and where it came from (``origin``: for logs and error messages)."""

    text: str
    origin: str
    # the file it was read from (a --chat-template FILE or the checkpoint's); None: given inline
    path: Path | None = None
    _compiled: jinja2.Template | None = field(default=None, repr=False, compare=False)

    def compile(self) -> jinja2.Template:
        """The compiled template (once); a syntax error is a ValueError naming the origin."""
        if self._compiled is None:
            import jinja2

            try:
                self._compiled = _environment().from_string(self.text)
            except jinja2.TemplateSyntaxError as e:
                raise ValueError(
                    f"chat template ({self.origin}): not a valid Jinja template: line {e.lineno}: {e.message}"
                ) from None
        return self._compiled

    def render(self, messages: Sequence[Mapping[str, str]], bos_token: str, eos_token: str) -> str:
        """The prompt text of ``messages`` with the assistant's opening (add_generation_prompt)."""
        import jinja2

        template = self.compile()
        try:
            return template.render(
                messages=[dict(m) for m in messages],
                add_generation_prompt=True,
                bos_token=bos_token,
                eos_token=eos_token,
            )
        except jinja2.TemplateError as e:
            raise ValueError(f"chat template ({self.origin}): {e}") from None


def from_setting(value: str) -> ChatTemplate:
    """The template a ``--chat-template`` / ``engine.chat_template`` value names (see the module
    docstring); a ValueError where it looks like a path that cannot be opened."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a template file or a Jinja template, got {value!r}")
    path = Path(value)
    try:
        return ChatTemplate(path.read_text(encoding="utf-8"), f"--chat-template {value}", path)
    except (OSError, UnicodeDecodeError, ValueError) as e:  # ValueError: a NUL in the string
        if not any(c in value for c in JINJA_CHARS):
            raise ValueError(
                f"{value!r} looks like a file path, but it cannot be opened ({_reason(e)}); "
                "give a template file or the Jinja template itself"
            ) from None
    return ChatTemplate(value, "--chat-template (given inline)")


def check_setting(value: Any) -> str:
    """An ``engine.chat_template`` value, checked: the template must load and compile. A file is
    returned as its absolute path (the engine process may run elsewhere), a template unchanged."""
    template = from_setting(value)
    template.compile()
    return value if template.path is None else str(template.path.resolve())


def from_checkpoint(folder: Path, tokenizer_config: Mapping[str, Any]) -> ChatTemplate | None:
    """The checkpoint's own template (chat_template.jinja, .json, tokenizer_config.json), or None."""
    jinja_file = folder / JINJA_FILE
    if jinja_file.is_file():
        return ChatTemplate(jinja_file.read_text(encoding="utf-8"), str(jinja_file), jinja_file)
    json_file = folder / JSON_FILE
    if json_file.is_file():
        return ChatTemplate(_json_template(json_file), str(json_file), json_file)
    text = _config_template(tokenizer_config.get("chat_template"), folder / TOKENIZER_CONFIG)
    return None if text is None else ChatTemplate(text, str(folder / TOKENIZER_CONFIG))


def resolve(
    folder: Path, tokenizer_config: Mapping[str, Any], setting: str | None
) -> ChatTemplate | None:
    """The template a run uses: the setting when given, else the checkpoint's own (or None)."""
    if setting is not None:
        return from_setting(setting)
    return from_checkpoint(folder, tokenizer_config)


def missing_template_message(folder: Path | str) -> str:
    """The 400 a chat request gets when there is no template: what is wrong and both ways out."""
    return (
        f"this model has no chat template: the checkpoint {str(folder)!r} has no {JINJA_FILE}, "
        f"no {JSON_FILE} and no chat_template in {TOKENIZER_CONFIG}, and the engine was started "
        f"without one. Add {JINJA_FILE} to the checkpoint, or start the engine with "
        "--chat-template FILE|TEMPLATE (a scenario: engine.chat_template); "
        "/v1/completions needs no template"
    )


def _json_template(path: Path) -> str:
    """``chat_template.json``: a JSON object whose ``chat_template`` is the template string."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not readable JSON ({_reason(e)})") from None
    text = data.get("chat_template") if isinstance(data, dict) else None
    if not isinstance(text, str):
        raise ValueError(f'{path}: must hold {{"chat_template": "<a Jinja template>"}}')
    return text


def _config_template(value: Any, where: Path) -> str | None:
    """``tokenizer_config.json``'s ``chat_template``: a string, or named templates (the default)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        if "default" in named and isinstance(named["default"], str):
            return named["default"]
        if named:  # transformers refuses this too: it cannot pick one
            raise ValueError(
                f"{where}: chat_template lists templates {sorted(map(str, named))} but none named "
                "'default'; give one with --chat-template"
            )
        return None
    raise ValueError(f"{where}: chat_template must be a string or a list of {{name, template}}")


def _environment() -> jinja2.Environment:
    """transformers' rendering environment (utils/chat_template_utils.py), sandboxed: a
    checkpoint's template is data, not code."""
    import jinja2.ext
    import jinja2.sandbox

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def _tojson(x: Any, ensure_ascii=False, indent=None, separators=None, sort_keys=False) -> str:
    """transformers' ``tojson``: plain json.dumps (Jinja's own escapes HTML characters)."""
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _raise_exception(message: str):
    raise ValueError(f"chat template: {message}")


def _reason(e: Exception) -> str:
    return getattr(e, "strerror", None) or str(e)
