"""Reading the TOML files of a release (config and schema) and turning validation errors into one line.

Both files are pydantic models that forbid unknown keys (:class:`StrictModel`), so a typo is an error, not a
silently ignored setting. A file that is missing, not UTF-8, not TOML or invalid becomes one
:class:`~dqrelease.errors.ConfigInvalidError` whose single line names the file, *every* problem (by key, and by
column name in a schema) and the fix.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from dqrelease.errors import ConfigInvalidError

__all__ = ["StrictModel", "format_validation_error", "read_toml", "resolve_path"]

MAX_TOML_BYTES = 8 * 1024 * 1024
"""Largest config or schema file read (a schema with 100,000 binary columns is about 4 MB)."""


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
            f"{path}: {what} file is larger than {MAX_TOML_BYTES // 2**20} MB; is it the right file?"
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
        parts.append(str(step))
        node = node.get(step) if isinstance(node, dict) else None
    parts = [p for p in parts if p]
    if len(parts) > 1 and parts[0].startswith("column "):
        return f"{parts[0]}: {'.'.join(parts[1:])}"
    return ".".join(parts) or "(top level)"


def _message(error: dict[str, Any], raw: Any, where: str) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        mechanism = raw.get("mechanism") if isinstance(raw, dict) else None
        if where.startswith("mechanism.") and isinstance(mechanism, dict) and where.count(".") == 1:
            return f"{where} is not used by {mechanism.get('name', 'dualquery')!r}; remove it"
        return f"{where} is not a known key; remove it or check its spelling (docs/config.md, docs/schema.md)"
    if kind == "missing":
        return f"{where} is required"
    if kind == "union_tag_invalid" or kind == "union_tag_not_found":
        return f"{where}: {error['msg']}"
    message = error["msg"].removeprefix("Value error, ")
    if where.startswith("column ") and message.startswith(where.split(":")[0] + ": "):
        message = message[len(where.split(":")[0]) + 2:]  # the model's own "column 'x': " prefix, said once
    value = error.get("input")
    shown = f" (got {value!r})" if isinstance(value, int | float | str | bool) and len(repr(value)) <= 40 else ""
    return f"{where}: {message}{shown}"


def format_validation_error(error: ValidationError, path: Path, raw: Any, model: type[BaseModel]) -> str:
    """One line naming the file and every problem, each by its key path (see :func:`_where`)."""
    messages = []
    for item in error.errors():
        text = _message(item, raw, _where(tuple(item["loc"]), raw, model))
        if text not in messages:
            messages.append(text)
    if len(messages) == 1:
        return f"{path}: {messages[0]}"
    return f"{path}: {len(messages)} problems: " + "; ".join(f"({i}) {m}" for i, m in enumerate(messages, 1))


def resolve_path(base: Path, value: object) -> object:
    """Resolve a path value against ``base``; a leading ``${DQRELEASE_DATA}`` is the shared data directory."""
    if value is None:
        return None
    text = str(value)
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
    return str((base / Path(text)).resolve())
