"""Reading the TOML files of a release (config and schema) and turning validation errors into one line.

Both files are pydantic models that forbid unknown keys (:class:`StrictModel`), so a typo is an error, not a
silently ignored setting. Both are validated in pydantic's strict mode (:data:`STRICT`): a value of the wrong TOML
type is refused, never coerced (``n = "48842"``, ``rounds = 3.0`` and ``epsilon = true`` are errors; an integer
where a float is expected, ``epsilon = 1``, is a number and stays accepted). A file that is missing, not UTF-8, not
TOML, larger than :data:`MAX_TOML_BYTES` or invalid becomes one :class:`~dqrelease.errors.ConfigInvalidError` whose
single line names the file, *every* problem (by key, and by column name in a schema) and the fix. A misspelt key,
section or choice (a mechanism name, a column type, a literal value) is answered with the closest valid name
(:func:`did_you_mean`) and, when they are few, the valid names.
"""

from __future__ import annotations

import difflib
import re
import tomllib
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from dqrelease.errors import ConfigInvalidError

__all__ = [
    "MAX_TOML_BYTES",
    "STRICT",
    "StrictModel",
    "closest_name",
    "did_you_mean",
    "format_validation_error",
    "read_toml",
    "resolve_path",
]

MAX_TOML_BYTES = 8 * 1024 * 1024
"""Largest config or schema file read (a schema with 100,000 binary columns is about 4 MB; docs/config.md)."""

STRICT = True
"""Validate config and schema files in pydantic's strict mode (``model_validate(raw, strict=STRICT)``)."""

LISTED_NAMES = 12
"""A message lists the valid names of a key, section or choice when there are at most this many."""


def closest_name(word: str, names: Iterable[str]) -> str | None:
    """The name of ``names`` closest to ``word`` (difflib's similarity ratio at least 0.6), or None.

    ``word`` is a name the user typed in a config, a schema or on the command line (public text, never data).
    """
    close = difflib.get_close_matches(word, list(names), n=1)
    return close[0] if close else None


def did_you_mean(word: str, names: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the name of ``names`` closest to ``word`` (:func:`closest_name`), else ``""``."""
    close = closest_name(word, names)
    return "" if close is None else f"; did you mean {close!r}?"


class StrictModel(BaseModel):
    """Base of every config and schema model: frozen, unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _see(names: list[str], what: str, docs: str) -> str:
    """`` (WHAT: a, b, c; DOCS)`` when ``names`` are few enough to list, else `` (DOCS)``."""
    listed = f"{what}: {', '.join(names)}; " if 0 < len(names) <= LISTED_NAMES else ""
    return f" ({listed}{docs})"


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


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _branches(annotation: Any) -> list[Any]:
    """The alternatives of a union (``X | None`` and ``Annotated`` unwrapped), or ``[annotation]``."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _branches(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [branch for arg in typing.get_args(annotation) for branch in _branches(arg) if branch is not type(None)]
    return [annotation]


def _tag_field(model: type[BaseModel], tag: str) -> str | None:
    """The field of ``model`` whose literal type holds ``tag`` (a discriminated union's ``name`` or ``type``)."""
    for name, field in model.model_fields.items():
        if typing.get_origin(field.annotation) is typing.Literal and tag in map(str, typing.get_args(field.annotation)):
            return name
    return None


def _key_names(model: type[BaseModel]) -> list[str]:
    """The keys a file may give for ``model``: each field's alias (``from``, ``if``) or name."""
    return [field.alias or name for name, field in model.model_fields.items()]


class _Place(typing.NamedTuple):
    """Where an error is: its readable key path, the raw value there, and the model whose key it is."""

    where: str
    value: Any
    owner: type[BaseModel] | None
    """The model whose keys hold the last step (None when the path leaves the models)."""
    branch_tag: tuple[str, str] | None
    """``(field, tag)`` when the owner is a branch of a discriminated union, e.g. ``("name", "dualquery")``."""
    other_branches: tuple[type[BaseModel], ...]
    """The union's other branches (the keys of other mechanisms), when the owner is a branch."""
    annotation: Any
    """The type expected at the location (a discriminated union for a missing or unknown tag), or None."""


def _place(location: tuple[Any, ...], raw: Any, model: type[BaseModel]) -> _Place:
    """Follow pydantic's error ``location`` through the file (``raw``) and the models at once.

    The key path drops a union's branch (a mechanism name, a column type: not a key of the file) and names list
    items: a ``columns`` item by its column (``column 'age'``), others by their 1-based position.
    """
    parts: list[str] = []
    node: Any = raw
    annotation: Any = model
    owner: type[BaseModel] | None = None
    branch_tag: tuple[str, str] | None = None
    others: tuple[type[BaseModel], ...] = ()
    owner_tag, owner_others = branch_tag, others
    for step in location:
        branches = _branches(annotation) if annotation is not None else []
        models = [b for b in branches if _is_model(b)]
        if isinstance(step, int):
            item = node[step] if isinstance(node, list) and 0 <= step < len(node) else None
            name = item.get("name") if isinstance(item, dict) else None
            if parts and parts[-1] == "columns" and isinstance(name, str):
                parts[-1] = f"column {name!r}"
            else:
                parts[-1] = f"{parts[-1] if parts else ''}[{step + 1}]"
            node = item
            lists = [b for b in branches if typing.get_origin(b) is list]
            annotation = typing.get_args(lists[0])[0] if lists else None
            continue
        if len(models) > 1 or (annotation is None and isinstance(node, dict) and step not in node
                               and step in (node.get("type"), node.get("name"))):
            # a discriminated union's branch (mechanism name, column type): not a key of the file
            chosen = [b for b in models if b.__name__ == step or _tag_field(b, str(step))]
            annotation = chosen[0] if chosen else None
            field = _tag_field(chosen[0], str(step)) if chosen else None
            branch_tag = (field, str(step)) if field else None
            others = tuple(b for b in models if chosen and b is not chosen[0])
            continue
        if node is not None and not isinstance(node, dict):
            annotation = None
            continue  # a union's branch (``int``, ``literal['noisy']``) under a value: not a key of the file
        parts.append(str(step))
        node = node.get(step) if isinstance(node, dict) else None
        owner = models[0] if len(models) == 1 else None
        owner_tag, owner_others = branch_tag, others  # set when the owner is the union's branch just chosen
        branch_tag, others = None, ()
        fields = {f.alias or n: f for n, f in owner.model_fields.items()} if owner else {}
        annotation = fields[step].annotation if step in fields else None
    parts = [p for p in parts if p]
    if len(parts) > 1 and parts[0].startswith("column "):
        where = f"{parts[0]}: {'.'.join(parts[1:])}"
    else:
        where = ".".join(parts) or "(top level)"
    return _Place(where, node, owner, owner_tag, owner_others, annotation)


def _where(location: tuple[Any, ...], raw: Any, model: type[BaseModel]) -> str:
    """The readable key path of ``location`` (see :func:`_place`)."""
    return _place(location, raw, model).where


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


def _choices(text: str) -> list[str]:
    """The quoted names in pydantic's list of choices (``"'csv', 'parquet' or 'duckdb'"``)."""
    return re.findall(r"'([^']*)'", text)


def _choice_message(key: str, given: Any, choices: list[str], docs: str) -> str:
    """``KEY = 'x' is not one of the choices; did you mean 'y'? (choices: ...)``: a misspelt name or tag."""
    hint = did_you_mean(given, choices) if isinstance(given, str) else ""
    return f"{key} = {given!r} is not one of the choices{hint}{_see([repr(c) for c in choices], 'choices', docs)}"


def _key_of(where: str, key: str) -> str:
    """The path of ``key`` inside the table at ``where`` (``mechanism.name``, ``column 'age': type``)."""
    if where == "(top level)":
        return key
    return f"{where}: {key}" if where.startswith("column ") and ":" not in where else f"{where}.{key}"


def _unknown_key(location: tuple[Any, ...], raw: Any, model: type[BaseModel], docs: str) -> tuple[str, str | None]:
    """The message for a key or section the model does not have, and the key it suggests instead (or None).

    A key of another branch of the union (a key of ``'dqrs'`` given to ``'dualquery'``) is named as such;
    otherwise the closest valid name is suggested and, when few, the valid names are listed.
    """
    place = _place(location, raw, model)
    key = str(location[-1])
    section = isinstance(place.value, dict)
    what = "section" if section else "key"
    shown = f"[{place.where}]" if section and not place.where.startswith("column ") else place.where
    if place.owner is None:
        return f"{shown} is not a known {what}; remove it or check its spelling ({docs})", None
    names = _key_names(place.owner)
    of = ""
    if place.branch_tag is not None:
        field, tag = place.branch_tag
        parent = _where(location[:-1], raw, model)
        of = f" for {field if parent.startswith('column ') else _key_of(parent, field)} = {tag!r}"
        users = [str(typing.get_args(other.model_fields[field].annotation)[0]) for other in place.other_branches
                 if key in _key_names(other) and field in other.model_fields]
        if users:
            return (f"{shown} is not used by {tag!r}; remove it (it is a key of {', '.join(map(repr, users))}; "
                    f"{docs})"), None
    close = closest_name(key, names)
    see = _see(names, "valid keys", docs)
    if close is None:
        return f"{shown} is not a known {what}{of}; remove it or check its spelling{see}", None
    sibling = _where((*location[:-1], close), raw, model)
    suggested = f"[{sibling}]" if section and not sibling.startswith("column ") else repr(close)
    return f"{shown} is not a known {what}{of}; did you mean {suggested}? Fix the spelling or remove it{see}", sibling


def _message(error: dict[str, Any], raw: Any, where: str, model: type[BaseModel], docs: str) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return _unknown_key(tuple(error["loc"]), raw, model, docs)[0]
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        context = error.get("ctx", {})
        field = context.get("discriminator", "").strip("'")
        key = _key_of(where, field)
        choices = _choices(context.get("expected_tags", ""))
        if not choices:  # a missing tag: pydantic names no choices, the union's branches do
            union = _place(tuple(error["loc"]), raw, model).annotation
            choices = [tag for branch in _branches(union) if _is_model(branch) and field in branch.model_fields
                       for tag in map(str, typing.get_args(branch.model_fields[field].annotation))]
        if kind == "union_tag_not_found":
            given = _place(tuple(error["loc"]), raw, model).value
            close = closest_name(field, given) if isinstance(given, dict) else None
            typo = f" ({close!r} is given: did you mean {field!r}?)" if close else ""
            return f"{key} is required{typo}; give one of {', '.join(map(repr, choices))} ({docs})"
        return _choice_message(key, context.get("tag"), choices, docs)
    if kind == "literal_error":
        return _choice_message(where, error.get("input"), _choices(error.get("ctx", {}).get("expected", "")), docs)
    message = error["msg"].removeprefix("Value error, ")
    if where.startswith("column ") and message.startswith(where.split(":")[0] + ": "):
        message = message[len(where.split(":")[0]) + 2:]  # the model's own "column 'x': " prefix, said once
    return f"{where}: {message}{_shown(error.get('input'))}"


def format_validation_error(error: ValidationError, path: Path, raw: Any, model: type[BaseModel]) -> str:
    """One line naming the file and every problem, each by its key path (see :func:`_place`), and the fix.

    The errors of one key are said once (a union's branches merged: ``privacy.n must be an integer or 'noisy'``);
    missing keys are listed together, except a required key that an unknown key's suggestion names (``[privacyy]``
    for ``[privacy]``, ``source.fromat`` for ``source.format``): that is one problem, said once.
    """
    docs = _docs(model)
    by_key: dict[str, list[dict[str, Any]]] = {}
    for item in error.errors():
        by_key.setdefault(_where(tuple(item["loc"]), raw, model), []).append(item)
    suggested = {_unknown_key(tuple(item["loc"]), raw, model, docs)[1] for item in error.errors()
                 if item["type"] == "extra_forbidden"}
    missing = [f"[{where}]" if where in _SECTIONS else where for where, items in by_key.items()
               if all(item["type"] == "missing" for item in items) and where not in suggested]
    messages = []
    if missing:
        one = len(missing) == 1
        verb, pronoun = ("is", "it") if one else ("are", "them")
        messages.append(f"{', '.join(missing)} {verb} required; add {pronoun} ({docs})")
    for where, items in by_key.items():
        if all(item["type"] == "missing" for item in items):
            continue
        merged = _type_message(items, where, docs)
        for text in [merged] if merged else [_message(item, raw, where, model, docs) for item in items]:
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
