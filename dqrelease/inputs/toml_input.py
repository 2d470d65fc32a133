"""Reading the TOML files of a release (config and schema) and turning validation errors into one line.

Both files are pydantic models that forbid unknown keys (:class:`StrictModel`), so a typo is an error, not a
silently ignored setting. Both are validated in pydantic's strict mode (:data:`STRICT`): a value of the wrong TOML
type is refused, never coerced (``n = "48842"``, ``rounds = 3.0`` and ``epsilon = true`` are errors; an integer
where a float is expected, ``epsilon = 1``, is a number and stays accepted). A file that is missing, not UTF-8, not
TOML, larger than :data:`MAX_TOML_BYTES` or invalid becomes one :class:`~dqrelease.errors.ConfigInvalidError` whose
single line names the file, *every* problem (by key, and by column name in a schema) and the fix.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from dqrelease.errors import ConfigInvalidError

__all__ = ["MAX_TOML_BYTES", "STRICT", "StrictModel", "format_validation_error", "read_toml", "resolve_path"]

MAX_TOML_BYTES = 8 * 1024 * 1024
"""Largest config or schema file read (a schema with 100,000 binary columns is about 4 MB; docs/config.md)."""

STRICT = True
"""Validate config and schema files in pydantic's strict mode (``model_validate(raw, strict=STRICT)``)."""



class StrictModel(BaseModel):
    """Base of every config and schema model: frozen, unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def read_toml(path: Path, *, what: str) -> dict[str, Any]:
    """Read a TOML file.

    Args:
        path: The file.
        what: What the file is, for messages (``"config"``, ``"schema"``).

    Raises:
        ConfigInvalidError: If the file is missing, unreadable, too large, not UTF-8 or not TOML.
    """
    try:
        if path.is_dir():
            raise ConfigInvalidError(f"{path}: is a directory, not a {what} file; give the TOML file's path")
        with open(path, "rb") as handle:
            data = handle.read(MAX_TOML_BYTES + 1)
    except FileNotFoundError:
        raise ConfigInvalidError(f"{path}: {what} file not found; check the path") from None
    except PermissionError:
        raise ConfigInvalidError(f"{path}: {what} file is not readable; check its permissions") from None
    except OSError as error:
        raise ConfigInvalidError(f"{path}: cannot read the {what} file ({error.strerror}); check the path") from None
    if len(data) > MAX_TOML_BYTES:
        raise ConfigInvalidError(
            f"{path}: {what} file is larger than the {MAX_TOML_BYTES // 2**20} MB limit of config and schema files; "
            f"give the release's {what} TOML file (a schema of 100,000 columns takes about 4 MB)"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigInvalidError(f"{path}: {what} file is not UTF-8 text; save it as a UTF-8 TOML file") from None
    try:
        return tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as error:
        raise ConfigInvalidError(f"{path}: {what} file is not valid TOML ({error}); fix the syntax there") from None


def _where(location: tuple[Any, ...], raw: Any, model: type[BaseModel]) -> str:
    """A readable key path: discriminator tags dropped, list items named (``column 'age'``) or 1-based."""
    parts: list[str] = []
    node: Any = raw
    for step in location:
        if isinstance(step, int):
            item = node[step] if isinstance(node, list) and 0 <= step < len(node) else None
            name = item.get("name") if isinstance(item, dict) else None
            if parts and parts[-1] == "columns" and isinstance(name, str):
                parts[-1] = f"column {name!r}"
            else:
                parts[-1] = f"{parts[-1] if parts else ''}[{step + 1}]"
            node = item
            continue
        if isinstance(node, dict) and step not in node and step in (node.get("type"), node.get("name")):
            continue  # a discriminated union's tag (column type, mechanism name): not a key of the file
        if node is not None and not isinstance(node, dict):
            continue  # a union's branch (``int``, ``literal['noisy']``) under a value: not a key of the file
        parts.append(str(step))
        node = node.get(step) if isinstance(node, dict) else None
    parts = [p for p in parts if p]
    if len(parts) > 1 and parts[0].startswith("column "):
        return f"{parts[0]}: {'.'.join(parts[1:])}"
    return ".".join(parts) or "(top level)"


_SECTIONS = ("source", "privacy", "workload", "mechanism", "ledger", "output", "run")
"""The config's sections: a missing one is named as ``[section]``."""

_EXPECTED = {
    "int_type": ("an integer", "write a whole number without quotes or decimal point"),
    "float_type": ("a number", "write a number without quotes"),
    "bool_type": ("true or false", "write true or false without quotes"),
    "string_type": ("a quoted string", "put the value in quotes"),
    "is_instance_of": ("a quoted path", "put the path in quotes"),
    "list_type": ("a list", 'write a list in brackets, e.g. ["a", "b"]'),
    "dict_type": ("a table", "write it as a [section] or an inline table { key = value }"),
    "model_type": ("a table", "write it as a [section] or an inline table { key = value }"),
}
"""Strict-mode type errors: what the key must be (in TOML terms) and how to write it."""


def _docs(model: type[BaseModel]) -> str:
    """The page that documents ``model``'s keys."""
    return "docs/schema.md" if model.__name__ == "Schema" else "docs/config.md"


def _toml_type(value: Any) -> str:
    """The TOML type of a value, in words (never the value itself)."""
    for kind, word in ((bool, "true/false"), (int, "an integer"), (float, "a decimal number"), (str, "a string"),
                       (list, "a list"), (dict, "a table")):
        if isinstance(value, kind):
            return word
    return type(value).__name__


def _shown(value: Any) -> str:
    """`` (got VALUE)`` for a short scalar config value (never long text, which could be anything)."""
    return f" (got {value!r})" if isinstance(value, int | float | str | bool) and len(repr(value)) <= 40 else ""


def _type_message(items: list[dict[str, Any]], where: str, docs: str) -> str | None:
    """One message for the type errors of one key (a union's branches merged), or None if any is another error."""
    expected, fixes = [], []
    for item in items:
        if item["type"] == "literal_error":
            expected.append(item.get("ctx", {}).get("expected", item["msg"]))
        elif item["type"] in _EXPECTED:
            expected.append(_EXPECTED[item["type"]][0])
            fixes.append(_EXPECTED[item["type"]][1])
        else:
            return None
    if not fixes:  # a plain choice (accounting = 1): pydantic's message lists the choices
        return None
    value = items[0].get("input")
    return f"{where} must be {' or '.join(expected)}, not {_toml_type(value)}{_shown(value)}; {fixes[0]} ({docs})"


def _message(error: dict[str, Any], raw: Any, where: str, docs: str) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        mechanism = raw.get("mechanism") if isinstance(raw, dict) else None
        if where.startswith("mechanism.") and isinstance(mechanism, dict) and where.count(".") == 1:
            return f"{where} is not used by {mechanism.get('name', 'dualquery')!r}; remove it"
        return f"{where} is not a known key; remove it or check its spelling ({docs})"
    if kind == "union_tag_invalid" or kind == "union_tag_not_found":
        return f"{where}: {error['msg']}"
    message = error["msg"].removeprefix("Value error, ")
    if where.startswith("column ") and message.startswith(where.split(":")[0] + ": "):
        message = message[len(where.split(":")[0]) + 2:]  # the model's own "column 'x': " prefix, said once
    return f"{where}: {message}{_shown(error.get('input'))}"


def format_validation_error(error: ValidationError, path: Path, raw: Any, model: type[BaseModel]) -> str:
    """One line naming the file and every problem, each by its key path (see :func:`_where`), and the fix.

    The errors of one key are said once (a union's branches merged: ``privacy.n must be an integer or 'noisy'``);
    missing keys are listed together.
    """
    docs = _docs(model)
    by_key: dict[str, list[dict[str, Any]]] = {}
    for item in error.errors():
        by_key.setdefault(_where(tuple(item["loc"]), raw, model), []).append(item)
    missing = [f"[{where}]" if where in _SECTIONS else where for where, items in by_key.items()
               if all(item["type"] == "missing" for item in items)]
    messages = []
    if missing:
        one = len(missing) == 1
        verb, pronoun = ("is", "it") if one else ("are", "them")
        messages.append(f"{', '.join(missing)} {verb} required; add {pronoun} ({docs})")
    for where, items in by_key.items():
        if all(item["type"] == "missing" for item in items):
            continue
        merged = _type_message(items, where, docs)
        for text in [merged] if merged else [_message(item, raw, where, docs) for item in items]:
            if text not in messages:
                messages.append(text)
    if len(messages) == 1:
        return f"{path}: {messages[0]}"
    return f"{path}: {len(messages)} problems: " + "; ".join(f"({i}) {m}" for i, m in enumerate(messages, 1))


def resolve_path(base: Path, value: object) -> object:
    """Resolve a path string against ``base``; a leading ``${DQRELEASE_DATA}`` is the shared data directory.

    Anything but a string is returned unchanged, for the model to refuse (a number is not a path).
    """
    if not isinstance(value, str):
        return value
    text = value
    # a leading ${DQRELEASE_DATA} names the shared data directory (dqrelease/inputs/data_home.py) without a machine path
    from dqrelease.inputs.data_home import DATA_FIX, DATA_VARIABLE, shared_data_dir

    placeholder = "${" + DATA_VARIABLE + "}"
    if text.startswith(placeholder):
        root = shared_data_dir()
        if root is None:
            raise ConfigInvalidError(
                f"path {text!r} cannot be resolved: {DATA_VARIABLE} is not set and there is no ../shared/data "
                f"beside the repo; {DATA_FIX}"
            )
        text = str(root / text[len(placeholder):].lstrip("/\\"))
    return (base / Path(text)).resolve()
