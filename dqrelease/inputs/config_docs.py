"""The release-config reference (``docs/config.md``), generated from the pydantic models and the registry.

Every key's type, default and description come from the models themselves (:mod:`dqrelease.inputs.config` and each
mechanism's keys model in :mod:`dqrelease.mechanisms`), so the reference cannot drift from the code; a test
compares the file with :func:`config_reference_markdown`.
"""

from __future__ import annotations

import types
import typing

from pydantic import BaseModel

from dqrelease.inputs.config import (
    DaskTlsConfig,
    LedgerConfig,
    OutputConfig,
    PrivacyConfig,
    ReleaseConfig,
    RunConfig,
    SourceConfig,
    WorkloadConfig,
    WorkloadPartConfig,
)
from dqrelease.inputs.toml_input import MAX_TOML_BYTES
from dqrelease.mechanisms import MECHANISMS
from dqrelease.mechanisms.base import OracleKeys

__all__ = ["config_reference_markdown"]


def _type_name(annotation: object) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        arguments = typing.get_args(annotation)
        if all(isinstance(a, type) and issubclass(a, BaseModel) for a in arguments):
            return "section"
        return " or ".join(_type_name(a) for a in arguments)
    if origin is list:
        return f"list of {_type_name(typing.get_args(annotation)[0])}"
    if origin is dict:
        return "table"
    if annotation is type(None):
        return "none"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return getattr(annotation, "__name__", str(annotation))


def _default(field: typing.Any) -> str:
    if field.is_required():
        return "required"
    factory = field.default_factory
    if factory is not None:
        value = factory()
        return "(section defaults)" if isinstance(value, BaseModel) else f"`{value!r}`"
    return f"`{field.default!r}`"


def _table(model: type[BaseModel], prefix: str, *, skip: tuple[str, ...] = ()) -> list[str]:
    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        annotation = _type_name(field.annotation).replace("|", "\\|")
        description = (field.description or (model.__doc__ or "").split("\n")[0]).replace("|", "\\|")
        lines.append(f"| `{prefix}{name}` | {annotation} | {_default(field)} | {description} |")
    return lines


def config_reference_markdown() -> str:
    """Markdown reference of every release-config key (``docs/config.md``)."""
    lines = [
        "# Release config reference",
        "",
        "Generated from `dqrelease/inputs/config.py` and the mechanism registry (`dqrelease/mechanisms/`) by",
        "`dqrelease.inputs.config_docs.config_reference_markdown()`; a test keeps it in sync.",
        "Unknown keys are errors (the refusal suggests the closest valid name, for sections and mechanism names too).",
        "Values are checked in strict mode: a value of the wrong TOML type is an error, never",
        "converted (`n = \"48842\"`, `rounds = 3.0`, `epsilon = true`); an integer for a number key (`epsilon = 1`) is",
        f"fine. Config and schema files are at most {MAX_TOML_BYTES // 2**20} MB. Relative paths are resolved against",
        "the config file's directory.",
        "See `examples/adult/release.toml` for a complete example and `docs/schema.md` for the schema file.",
    ]
    for title, model, prefix in (
        ("top level", ReleaseConfig, ""),
        ("[source]", SourceConfig, "source."),
        ("[privacy]", PrivacyConfig, "privacy."),
        ("[workload]", WorkloadConfig, "workload."),
        ("[[workload.parts]]", WorkloadPartConfig, "workload.parts[]."),
    ):
        lines += ["", f"## {title}", "", *_table(model, prefix)]
    names = ", ".join(f"`{name}`" for name in MECHANISMS)
    lines += [
        "", "## [mechanism]", "",
        f"`mechanism.name` selects the synthesizer: one of {names} (default `{next(iter(MECHANISMS))}`). "
        "Each mechanism reads only its own keys; a key it does not use is an error.",
    ]
    for name, entry in MECHANISMS.items():
        lines += ["", f"### `name = \"{name}\"`", "", f"{entry.summary} ({entry.reference}).", ""]
        if len(entry.keys.model_fields) > 1:
            lines += _table(entry.keys, "mechanism.", skip=("name",))
        else:
            lines.append("No other key.")
    lines += ["", "## [mechanism.oracle]", "", *_table(OracleKeys, "mechanism.oracle.")]
    for title, model, prefix in (
        ("[ledger]", LedgerConfig, "ledger."),
        ("[output]", OutputConfig, "output."),
        ("[run]", RunConfig, "run."),
        ("[run.dask_tls]", DaskTlsConfig, "run.dask_tls."),
    ):
        lines += ["", f"## {title}", "", *_table(model, prefix)]
    return "\n".join(lines) + "\n"
