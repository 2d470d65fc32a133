"""The release config (one TOML file) and the public schema file, validated with pydantic.

Every model forbids unknown keys (``extra="forbid"``) so a typo is an error, not a silently ignored
setting. Relative paths are resolved against the directory of the file that contains them. Loading a
config never reads the private data: :func:`load_config` only parses TOML files.

See ``docs/config.md`` for the reference of every key and ``examples/`` for complete configs.
"""

from __future__ import annotations

import hashlib
import math
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dq_engine.dualquery import check_free_settings
from dq_engine.errors import ConfigError as EngineConfigError
from dqrelease.errors import ConfigInvalidError

__all__ = [
    "CategoricalColumn",
    "ColumnSchema",
    "NumericColumn",
    "ReleaseConfig",
    "Schema",
    "load_config",
    "load_schema",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------------- schema
class CategoricalColumn(_Model):
    """A categorical column: a public, finite value set (one-hot block after discretization)."""

    name: str = Field(min_length=1, description="Column name in the source table.")
    type: Literal["categorical"] = "categorical"
    values: list[str] = Field(min_length=1, description="Declared values, including the missing-value code.")
    aliases: dict[str, str] = Field(
        default_factory=dict, description="Raw spellings mapped to a declared value (e.g. '>50K.' -> '>50K')."
    )
    missing: str | None = Field(
        default=None, description="Declared value that a NULL / empty cell becomes (must be in values)."
    )
    nullable: bool = Field(default=False, description="Whether NULL is allowed in the raw table.")

    @model_validator(mode="after")
    def _check(self) -> CategoricalColumn:
        if len(set(self.values)) != len(self.values):
            raise ValueError(f"column {self.name!r}: values must be distinct")
        unknown = sorted(set(self.aliases.values()) - set(self.values))
        if unknown:
            raise ValueError(f"column {self.name!r}: aliases map to undeclared values {unknown}; add them to values")
        shadowing = sorted(set(self.aliases) & set(self.values))
        if shadowing:
            raise ValueError(
                f"column {self.name!r}: alias spellings {shadowing} are also declared values; remove them from aliases"
            )
        if self.missing is not None and self.missing not in self.values:
            raise ValueError(f"column {self.name!r}: missing code {self.missing!r} must be one of values")
        if self.nullable and self.missing is None:
            raise ValueError(f"column {self.name!r}: nullable needs a 'missing' value that NULL becomes")
        return self

    @property
    def size(self) -> int:
        """Number of values (width of the one-hot block)."""
        return len(self.values)

    @property
    def labels(self) -> list[str]:
        """Public labels of the codes."""
        return list(self.values)


class NumericColumn(_Model):
    """A numeric column bucketed with public edges: bucket ``i`` is ``[edges[i], edges[i+1])``."""

    name: str = Field(min_length=1)
    type: Literal["integer", "float"]
    edges: list[float] = Field(min_length=2, description="Strictly increasing public bucket edges.")
    out_of_range: Literal["error", "clip"] = Field(
        default="error", description="'error': values outside [first, last edge) fail validation; 'clip': clamp."
    )
    nullable: bool = False
    missing_bucket: bool = Field(
        default=False, description="Add a bucket for NULL (requires nullable = true)."
    )

    @model_validator(mode="after")
    def _check(self) -> NumericColumn:
        if any(not math.isfinite(e) for e in self.edges):
            raise ValueError(f"column {self.name!r}: edges must be finite numbers")
        if any(b <= a for a, b in zip(self.edges, self.edges[1:], strict=False)):
            raise ValueError(f"column {self.name!r}: edges must be strictly increasing")
        if self.type == "integer" and not all(float(e).is_integer() for e in self.edges):
            raise ValueError(f"column {self.name!r}: an integer column needs whole-number edges (e.g. 17, not 17.5)")
        if self.missing_bucket and not self.nullable:
            raise ValueError(f"column {self.name!r}: missing_bucket needs nullable = true")
        if self.nullable and not self.missing_bucket:
            raise ValueError(f"column {self.name!r}: a nullable numeric column needs missing_bucket = true")
        return self

    @property
    def size(self) -> int:
        """Number of buckets (plus the missing bucket)."""
        return len(self.edges) - 1 + int(self.missing_bucket)

    @property
    def labels(self) -> list[str]:
        """Bucket labels ``[lo, hi)``."""
        def fmt(v: float) -> str:
            return str(int(v)) if float(v).is_integer() else repr(v)

        labels = [f"[{fmt(a)}, {fmt(b)})" for a, b in zip(self.edges, self.edges[1:], strict=False)]
        return [*labels, "missing"] if self.missing_bucket else labels


class BinaryColumn(_Model):
    """A natively binary 0/1 column (a single bit)."""

    name: str = Field(min_length=1)
    type: Literal["binary"]
    nullable: bool = False

    @property
    def size(self) -> int:
        """Always 2."""
        return 2

    @property
    def labels(self) -> list[str]:
        """'0', '1'."""
        return ["0", "1"]


ColumnSchema = Annotated[CategoricalColumn | NumericColumn | BinaryColumn, Field(discriminator="type")]


class Schema(_Model):
    """The public schema of the raw table. Bins and value sets come from here, never from the data."""

    columns: list[ColumnSchema] = Field(min_length=1)

    @field_validator("columns")
    @classmethod
    def _unique(cls, columns: list[ColumnSchema]) -> list[ColumnSchema]:
        names = [c.name for c in columns]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"column names must be unique; repeated: {duplicates}")
        return columns

    @property
    def names(self) -> list[str]:
        """Column names in order."""
        return [c.name for c in self.columns]


# ---------------------------------------------------------------------- release config
class SourceConfig(_Model):
    """Where the raw table comes from."""

    format: Literal["csv", "parquet", "duckdb", "transactions"] = Field(
        description="'transactions': one basket per line, space-separated item ids (binary schemas)."
    )
    paths: list[Path] = Field(default_factory=list, description="CSV / Parquet / transaction files.")
    header: bool = Field(default=True, description="CSV files start with a header line.")
    delimiter: str = Field(default=",", description="CSV field delimiter (one character).")
    comment: str | None = Field(default=None, description="Lines starting with this character are skipped.")
    column_names: list[str] | None = Field(default=None, description="Names when the files have no header.")
    null_strings: list[str] = Field(default_factory=list, description="Raw strings read as NULL.")
    database: Path | None = Field(default=None, description="Existing DuckDB file (format = 'duckdb').")
    table: str | None = Field(default=None, description="Table in that DuckDB file (format = 'duckdb').")
    gzip: bool = Field(default=False, description="Files are gzip-compressed (also detected from '.gz').")

    @model_validator(mode="after")
    def _check(self) -> SourceConfig:
        if self.format == "duckdb":
            if self.database is None or not self.table:
                raise ValueError("source format 'duckdb' needs 'database' and 'table'")
            if not self.table.replace("_", "").isalnum():
                raise ValueError("source table must be a plain identifier (letters, digits, underscore)")
        elif not self.paths:
            raise ValueError(f"source format {self.format!r} needs at least one path in 'paths'")
        if len(self.delimiter) != 1:
            raise ValueError("delimiter must be a single character")
        return self


class PrivacyConfig(_Model):
    """Neighbouring relation, dataset size, target budget and accounting mode."""

    neighbouring: Literal["replace-one", "add-remove"] = Field(
        default="replace-one",
        description=(
            "'replace-one': neighbours differ in one record's values, n is public (declare it in n); "
            "'add-remove': neighbours differ by one record, n is private (use n = 'noisy')."
        ),
    )
    n: int | Literal["noisy"] = Field(
        description=(
            "Declared public number of records (checked against the source), or 'noisy' to estimate it "
            "with a charged Laplace count."
        ),
    )
    n_epsilon: float = Field(default=0.0, ge=0, description="epsilon of the noisy count (n = 'noisy' only).")
    epsilon: float | None = Field(
        default=None, gt=0, description="Target epsilon (T is derived when rounds is omitted)."
    )
    delta: float = Field(gt=0, lt=1, description="Target delta.")
    accounting: Literal["tight", "paper"] = Field(
        default="tight", description="Which accounting is charged to the ledger (both are reported)."
    )

    @model_validator(mode="after")
    def _check(self) -> PrivacyConfig:
        if self.n == "noisy" and not self.n_epsilon > 0:
            raise ValueError("privacy.n = 'noisy' needs n_epsilon > 0")
        if self.n != "noisy" and self.n < 1:
            raise ValueError("privacy.n must be a positive number of records or 'noisy'")
        if self.n != "noisy" and self.n_epsilon:
            raise ValueError("privacy.n_epsilon is only used with n = 'noisy'; remove it")
        if self.n == "noisy" and self.neighbouring != "add-remove":
            raise ValueError("n = 'noisy' means n is private: set neighbouring = 'add-remove'")
        if self.n != "noisy" and self.neighbouring != "replace-one":
            raise ValueError("neighbouring = 'add-remove' keeps n private: set n = 'noisy' with n_epsilon")
        if self.n == "noisy" and self.epsilon is not None and self.n_epsilon >= self.epsilon:
            raise ValueError("n_epsilon must be smaller than epsilon (it is part of the same budget)")
        return self


class WorkloadConfig(_Model):
    """Which queries the release should answer well (and the error report measures)."""

    kind: Literal["random_marginals", "random_queries", "all_kway", "explicit"] = Field(
        description="random_marginals: attribute sets with all cells; random_queries: single conjunctions."
    )
    k: int = Field(default=3, ge=1, le=5, description="Attributes per marginal (1..5).")
    count: int | None = Field(default=None, ge=1, description="Number of marginals / queries for random kinds.")
    seed: int = Field(default=0, ge=0, description="Public seed of the workload generator (not the release seed).")
    marginals: list[list[str]] | None = Field(default=None, description="Attribute sets for kind = 'explicit'.")

    @model_validator(mode="after")
    def _check(self) -> WorkloadConfig:
        if self.kind in ("random_marginals", "random_queries") and self.count is None:
            raise ValueError(f"workload kind {self.kind!r} needs 'count'")
        if self.kind == "explicit" and not self.marginals:
            raise ValueError("workload kind 'explicit' needs 'marginals' (a list of column-name lists)")
        return self


class OracleSettings(_Model):
    """Best-response oracle settings (see dq_engine.oracle.OracleConfig)."""

    kind: Literal["portfolio", "cpsat", "local"] = Field(
        default="portfolio", description="Local search, then CP-SAT with its record as a hint (portfolio)."
    )
    time_limit: float = Field(default=2.0, gt=0, description="CP-SAT seconds per round (secure runs).")
    num_workers: int = Field(default=8, ge=1, le=64, description="CP-SAT workers.")
    deterministic_time_limit: float = Field(
        default=1.0, gt=0, description="CP-SAT deterministic-time limit per round (seeded runs)."
    )
    max_presolve_iterations: int | None = Field(default=1, ge=0, description="CP-SAT presolve iterations.")
    local_time_limit: float = Field(default=0.5, gt=0, description="Local-search seconds per round.")
    local_restarts: int = Field(default=20, ge=0, description="Local-search perturbation restarts per round.")
    fallback: Literal["previous", "random"] = Field(
        default="previous", description="Record used when no solver returns one."
    )


class MechanismConfig(_Model):
    """The synthesizer and its parameters (keys a mechanism does not use are errors)."""

    name: Literal["dualquery", "dqrs", "fem", "sepfem", "mwem", "mwem-particles", "randomized_response"] = Field(
        default="dualquery", description="The synthesizer (README, section Mechanisms)."
    )
    eta: float | None = Field(
        default=None, gt=0,
        description="DualQuery/DQRS: learning rate (required). FEM/sepFEM: perturbation scale (default 1.0 / 0.5).",
    )
    samples: int | None = Field(
        default=None, ge=1,
        description=(
            "DualQuery/DQRS: queries sampled per round s (required). FEM/sepFEM: oracle calls per round "
            "(default clamp(1500 // (T + 1), 4, 50))."
        ),
    )
    rounds: int | None = Field(
        default=None, ge=1,
        description=(
            "Rounds T. DualQuery/DQRS: the largest that fits privacy.epsilon if omitted; FEM/sepFEM: "
            "n sqrt(8 rho) / (2 ln 2N) in [10, 120 / 100]; MWEM: 15; MWEM on particles: "
            "floor(0.63 rho (0.01 n)^2) in [8, min(M, 40)]."
        ),
    )
    epsilon_0: float | None = Field(
        default=None, gt=0,
        description="FEM/sepFEM: epsilon of each query selection; calibrated to privacy.epsilon if omitted.",
    )
    workers: int = Field(
        default=1, ge=1, le=64,
        description="FEM/sepFEM: processes for a round's oracle calls (on Dask the cluster runs them instead).",
    )
    topup_fraction: float = Field(default=0.25, ge=0, le=1, description="DQRS top-up reserve fraction.")
    free_policy: Literal["zero", "random", "dp-marginal"] = Field(
        default="random", description="DualQuery/DQRS: how attributes no sampled query touches are set."
    )
    free_epsilon: float = Field(
        default=0.0, ge=0, description="DualQuery/DQRS: epsilon of the Laplace noisy marginals (dp-marginal)."
    )
    free_noise: Literal["laplace", "gaussian"] = Field(
        default="laplace",
        description=(
            "DualQuery/DQRS dp-marginal: Laplace marginals (pure epsilon, free_epsilon) or Gaussian ones (zCDP, "
            "free_rho; the useful choice with thousands of attributes)."
        ),
    )
    free_rho: float = Field(
        default=0.0, ge=0, description="DualQuery/DQRS: zCDP rho of the Gaussian noisy marginals (dp-marginal)."
    )
    rows_per_round: int = Field(
        default=1, ge=1, le=1024,
        description=(
            "DualQuery/DQRS: rows per round, free attributes redrawn in each (1 = the paper; post-processing, "
            "no extra cost)."
        ),
    )
    free_scope: Literal["untouched", "slack"] = Field(
        default="untouched",
        description="DualQuery/DQRS: attributes the free policy fills (docs/decisions.md, 'Slack free scope').",
    )
    oracle: OracleSettings = Field(
        default_factory=OracleSettings,
        description=(
            "Section [mechanism.oracle] (DualQuery/DQRS/FEM/sepFEM). FEM/sepFEM without it: CP-SAT alone, "
            "1 worker, deterministic limit 0.2 per call."
        ),
    )


_FREE_KEYS = ("free_policy", "free_epsilon", "free_noise", "free_rho", "rows_per_round", "free_scope")
MECHANISM_KEYS = {
    "dualquery": {"eta", "samples", "rounds", *_FREE_KEYS, "oracle"},
    "dqrs": {"eta", "samples", "rounds", "topup_fraction", *_FREE_KEYS, "oracle"},
    "fem": {"eta", "samples", "rounds", "epsilon_0", "workers", "oracle"},
    "sepfem": {"eta", "samples", "rounds", "epsilon_0", "workers", "oracle"},
    "mwem": {"rounds"},
    "mwem-particles": {"rounds"},
    "randomized_response": set(),
}
"""The [mechanism] keys each mechanism reads (besides ``name``)."""


class OutputConfig(_Model):
    """Where and how the synthetic table is published."""

    directory: Path = Field(description="Parent directory of the published releases.")
    formats: list[Literal["parquet", "csv", "duckdb"]] = Field(default_factory=lambda: ["parquet", "csv", "duckdb"])
    rows: int | None = Field(default=None, ge=1, description="Rows to publish (default: the public n).")
    numeric_values: Literal["bucket_label", "uniform"] = Field(
        default="bucket_label", description="Numbers as their bucket label, or drawn uniformly inside the bucket."
    )

    @field_validator("formats")
    @classmethod
    def _formats(cls, formats: list[str]) -> list[str]:
        if not formats:
            raise ValueError("give at least one output format")
        if len(set(formats)) != len(formats):
            raise ValueError("output formats must not repeat")
        return formats


class LedgerConfig(_Model):
    """The persistent budget ledger."""

    path: Path = Field(description="DuckDB file of the ledger (shared by every release of the dataset).")
    dataset_id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    initial_cap_epsilon: float | None = Field(
        default=None, gt=0, description="Cap created if the dataset has none yet (never changes an existing cap)."
    )
    initial_cap_delta: float | None = Field(default=None, gt=0, lt=1, description="delta of that initial cap.")

    @model_validator(mode="after")
    def _check(self) -> LedgerConfig:
        if (self.initial_cap_epsilon is None) != (self.initial_cap_delta is None):
            raise ValueError("give both initial_cap_epsilon and initial_cap_delta, or neither")
        return self


class RunConfig(_Model):
    """Randomness, working database and execution."""

    seed_mode: Literal["secure", "seeded"] = Field(
        default="secure", description="'secure': OS entropy (real releases); 'seeded': tests and audits only."
    )
    seed: int | None = Field(default=None, ge=0, description="Seed for seed_mode = 'seeded'; never published.")
    database: Path | None = Field(default=None, description="Working DuckDB file (default: <output>/work.duckdb).")
    dask_address: str | None = Field(default=None, description="Run parallel tasks on this Dask scheduler.")

    @model_validator(mode="after")
    def _check(self) -> RunConfig:
        if self.seed_mode == "seeded" and self.seed is None:
            raise ValueError("seed_mode 'seeded' needs a seed")
        if self.seed_mode == "secure" and self.seed is not None:
            raise ValueError("a seed is only allowed with seed_mode = 'seeded' (tests and audits)")
        return self


class ReleaseConfig(_Model):
    """One release: source, schema, privacy, workload, mechanism, ledger, output, run settings."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$", description="Release name (letters, digits, _ . -).")
    description: str = Field(default="", description="Free text, copied into the manifest.")
    schema_file: Path = Field(description="The public schema file (see docs/schema.md).")
    source: SourceConfig = Field(description="Where the raw table comes from: section [source].")
    privacy: PrivacyConfig = Field(description="Neighbouring relation, n, target budget: section [privacy].")
    workload: WorkloadConfig = Field(description="Queries to answer well: section [workload].")
    mechanism: MechanismConfig = Field(
        default_factory=MechanismConfig, description="Synthesizer and parameters: section [mechanism]."
    )
    ledger: LedgerConfig = Field(description="Budget ledger: section [ledger].")
    output: OutputConfig = Field(description="Published outputs: section [output].")
    run: RunConfig = Field(default_factory=RunConfig, description="Randomness and execution: section [run].")

    @model_validator(mode="after")
    def _check(self) -> ReleaseConfig:
        m = self.mechanism
        unused = sorted(m.model_fields_set - MECHANISM_KEYS[m.name] - {"name"})
        if unused:
            raise ValueError(f"mechanism.{unused[0]} is not used by {m.name!r}; remove it")
        if m.name in ("dualquery", "dqrs"):
            if m.eta is None or m.samples is None:
                raise ValueError(f"mechanism {m.name!r} needs eta and samples")
            if m.rounds is None and self.privacy.epsilon is None:
                raise ValueError("give mechanism.rounds or privacy.epsilon (T is then the largest that fits)")
        elif self.privacy.n == "noisy":
            reason = (
                "it publishes one randomized row per record" if m.name == "randomized_response"
                else "its engine scales its selection scores and noise by the true number of records"
            )
            raise ValueError(
                f"mechanism {m.name!r} needs a public n ({reason}): set privacy.n to the number of records and "
                "neighbouring = 'replace-one'"
            )
        if m.name in ("fem", "sepfem") and self.privacy.epsilon is None and (m.rounds is None or m.epsilon_0 is None):
            raise ValueError(f"mechanism {m.name!r} needs privacy.epsilon, or both mechanism.rounds and epsilon_0")
        if m.name in ("mwem", "mwem-particles", "randomized_response") and self.privacy.epsilon is None:
            raise ValueError(f"mechanism {m.name!r} needs privacy.epsilon (its budgets are calibrated to it)")
        if m.name == "randomized_response" and self.output.rows is not None:
            raise ValueError(
                "randomized_response publishes exactly one randomized row per record; remove output.rows"
            )
        if m.name in ("dualquery", "dqrs"):
            try:
                check_free_settings(
                    policy=m.free_policy, noise=m.free_noise, epsilon=m.free_epsilon, rho=m.free_rho,
                    rows_per_round=m.rows_per_round, scope=m.free_scope,
                )
            except EngineConfigError as error:
                raise ValueError(f"mechanism: {error}") from None
        return self

    @property
    def source_dir(self) -> Path:
        """Directory relative paths were resolved against."""
        return self.schema_file.parent


def _format_error(error: ValidationError, path: Path) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    message = first["msg"].removeprefix("Value error, ")
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"{path}: {where}: {message}{more}"


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigInvalidError(f"{path}: file not found; check the path") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigInvalidError(f"{path}: not valid TOML ({error})") from None


def _resolve(base: Path, value: object) -> object:
    return str((base / Path(str(value))).resolve()) if value is not None else None


def load_schema(path: Path) -> Schema:
    """Parse and validate a schema file.

    Raises:
        ConfigInvalidError: On a missing file, invalid TOML or an invalid schema (one line, with the key).
    """
    path = Path(path)
    raw = _read_toml(path)
    try:
        return Schema.model_validate(raw)
    except ValidationError as error:
        raise ConfigInvalidError(_format_error(error, path)) from None


def load_config(path: Path) -> ReleaseConfig:
    """Parse and validate a release config; relative paths are resolved against its directory.

    Raises:
        ConfigInvalidError: On a missing file, invalid TOML or an invalid config (one line, with the key).
    """
    path = Path(path).resolve()
    raw = _read_toml(path)
    base = path.parent
    if "schema_file" in raw:
        raw["schema_file"] = _resolve(base, raw["schema_file"])
    source = raw.get("source", {})
    if isinstance(source, dict):
        if "paths" in source and isinstance(source["paths"], list):
            source["paths"] = [_resolve(base, p) for p in source["paths"]]
        if "database" in source:
            source["database"] = _resolve(base, source["database"])
    for section, key in (("output", "directory"), ("ledger", "path"), ("run", "database")):
        block = raw.get(section)
        if isinstance(block, dict) and key in block:
            block[key] = _resolve(base, block[key])
    try:
        return ReleaseConfig.model_validate(raw)
    except ValidationError as error:
        raise ConfigInvalidError(_format_error(error, path)) from None


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def config_hash(config: ReleaseConfig) -> str:
    """SHA-256 of the canonical JSON of the config, excluding the seed (never published)."""
    canonical = config.model_dump_json(exclude={"run": {"seed"}})
    return hashlib.sha256(canonical.encode()).hexdigest()


def _type_name(annotation: object) -> str:
    import types
    import typing

    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is list:
        return f"list of {_type_name(typing.get_args(annotation)[0])}"
    if origin is dict:
        return "table"
    if annotation is type(None):
        return "none"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return getattr(annotation, "__name__", str(annotation))


def config_reference_markdown() -> str:
    """Markdown reference of every release-config key, generated from the models (docs/config.md)."""
    sections = [
        ("top level", ReleaseConfig, ""),
        ("[source]", SourceConfig, "source."),
        ("[privacy]", PrivacyConfig, "privacy."),
        ("[workload]", WorkloadConfig, "workload."),
        ("[mechanism]", MechanismConfig, "mechanism."),
        ("[mechanism.oracle]", OracleSettings, "mechanism.oracle."),
        ("[ledger]", LedgerConfig, "ledger."),
        ("[output]", OutputConfig, "output."),
        ("[run]", RunConfig, "run."),
    ]
    lines = [
        "# Release config reference",
        "",
        "Generated from `dqrelease/config.py` by `config_reference_markdown()` (a test keeps it in sync).",
        "Unknown keys are errors. Relative paths are resolved against the config file's directory.",
        "See `examples/adult/release.toml` for a complete example and `docs/schema.md` for the schema file.",
    ]
    for title, model, prefix in sections:
        lines += ["", f"## {title}", "", "| key | type | default | description |", "|---|---|---|---|"]
        for name, field in model.model_fields.items():
            annotation = _type_name(field.annotation).replace("|", "\\|")
            if field.is_required():
                default = "required"
            elif isinstance(field.default_factory, type) and issubclass(field.default_factory, BaseModel):
                default = "(section defaults)"
            elif field.default_factory is not None:
                default = f"`{field.default_factory()!r}`"
            else:
                default = f"`{field.default!r}`"
            description = (field.description or (model.__doc__ or "").split("\n")[0]).replace("|", "\\|")
            lines.append(f"| `{prefix}{name}` | {annotation} | {default} | {description} |")
    return "\n".join(lines) + "\n"
