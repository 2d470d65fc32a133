"""The release config (one TOML file), validated with pydantic (see ``docs/config.md``).

Every model forbids unknown keys, so a typo is an error, and a file is validated in strict mode, so a value of the
wrong TOML type is an error too (``n = "48842"``; an integer for a float key, ``epsilon = 1``, is fine). Relative
paths are resolved against the directory of the config file. Loading a config never reads the private data:
:func:`load_config` only parses TOML. The ``[mechanism]`` section is the keys model of the chosen mechanism
(:mod:`dqrelease.mechanisms`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from dqrelease.errors import ConfigInvalidError
from dqrelease.inputs.toml_input import STRICT, StrictModel, format_validation_error, read_toml, resolve_path
from dqrelease.mechanisms import DEFAULT_MECHANISM, MECHANISMS, MechanismSettings
from dqrelease.runtime.cluster import DaskAccess

__all__ = [
    "AccuracyConfig",
    "DaskTlsConfig",
    "LedgerConfig",
    "OutputConfig",
    "PrivacyConfig",
    "ReleaseConfig",
    "RunConfig",
    "SourceConfig",
    "SourceSection",
    "WorkloadConfig",
    "WorkloadPartConfig",
    "config_hash",
    "default_workload",
    "file_sha256",
    "load_config",
    "load_source_section",
]


class SourceConfig(StrictModel):
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


MAX_EPSILON = 100.0
"""Largest epsilon a config accepts: beyond it a release protects nothing and the calibrations overflow."""

MAX_OUTPUT_ROWS = 100_000_000
"""Most rows a release may publish (written in chunks; the row index takes 4 bytes a row in memory)."""


class PrivacyConfig(StrictModel):
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
    n_epsilon: float = Field(
        default=0.0, ge=0, le=MAX_EPSILON, allow_inf_nan=False,
        description="epsilon of the noisy count (n = 'noisy' only).",
    )
    epsilon: float | None = Field(
        default=None, gt=0, le=MAX_EPSILON, allow_inf_nan=False,
        description="Target epsilon (T is derived when rounds is omitted); at most 100.",
    )
    delta: float = Field(gt=0, lt=1, allow_inf_nan=False, description="Target delta.")
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


WorkloadKind = Literal["random_marginals", "random_queries", "all_kway", "explicit"]

class WorkloadPartConfig(StrictModel):
    """One part of the workload: a ``[[workload.parts]]`` entry, or the whole ``[workload]`` in its one-part form."""

    kind: WorkloadKind = Field(
        description=(
            "all_kway: every k-way marginal (a public sample of max_marginals of them on wide schemas); "
            "random_marginals: count random attribute sets with all their cells (all of them if the schema has "
            "fewer); random_queries: count single random conjunctions; explicit: the attribute sets in marginals."
        )
    )
    k: int = Field(default=3, ge=1, le=5, description="Attributes per marginal (1..5).")
    count: int | None = Field(default=None, ge=1, description="Number of marginals / queries for random kinds.")
    marginals: list[list[str]] | None = Field(default=None, description="Attribute sets for kind = 'explicit'.")
    max_marginals: int | None = Field(
        default=None,
        ge=1,
        description=(
            "all_kway with k >= 2: when the schema has more k-way attribute sets than this (default 2,000, "
            "dq_engine.data.workload.MAX_KWAY_MARGINALS), a public sample of this many, drawn with the workload seed "
            "(never from the data); k = 1 is never sampled."
        ),
    )

    @model_validator(mode="after")
    def _check(self) -> WorkloadPartConfig:
        if self.kind in ("random_marginals", "random_queries") and self.count is None:
            raise ValueError(f"workload kind {self.kind!r} needs 'count'")
        if self.kind == "explicit" and not self.marginals:
            raise ValueError("workload kind 'explicit' needs 'marginals' (a list of column-name lists)")
        if self.max_marginals is not None and self.kind != "all_kway":
            raise ValueError("max_marginals applies to 'all_kway' parts only; remove it")
        return self


_PART_KEYS = ("kind", "k", "count", "marginals", "max_marginals")
"""The keys of one part (the one-part form has them directly in ``[workload]``)."""


class WorkloadConfig(WorkloadPartConfig):
    """Which queries the release should answer well (and the error report measures).

    Either one part (``kind`` and its keys directly in ``[workload]``) or several ``[[workload.parts]]``,
    whose queries are merged (each query once). Sizes depend on the schema and the public seed only.
    """

    kind: WorkloadKind | None = Field(
        default=None,
        description="One-part form: the part's kind (see [[workload.parts]]); omit it when giving parts.",
    )
    seed: int = Field(
        default=0,
        ge=0,
        description=(
            "Public seed of the workload generator (not the release seed); with parts, part i draws from the i-th "
            "child generator spawned from it."
        ),
    )
    parts: list[WorkloadPartConfig] | None = Field(
        default=None,
        description="Several parts, e.g. all 1-way, all 2-way and 64 random 3-way marginals: [[workload.parts]].",
    )

    @model_validator(mode="after")
    def _check_form(self) -> WorkloadConfig:
        defaults = {key: type(self).model_fields[key].get_default() for key in _PART_KEYS}
        part_keys = {key for key in _PART_KEYS if getattr(self, key) != defaults[key]}
        if self.parts is None and self.kind is None:
            raise ValueError("give workload.kind (one part) or a list of [[workload.parts]]")
        if self.parts is not None:
            if not self.parts:
                raise ValueError("workload.parts is empty; give at least one [[workload.parts]] entry")
            if part_keys:
                raise ValueError(
                    f"workload has both [[workload.parts]] and {', '.join(sorted(part_keys))}: move those keys into "
                    "the parts (or drop parts for the one-part form)"
                )
        return self

    def part_list(self) -> list[WorkloadPartConfig]:
        """The parts: ``parts``, or the one part the one-part form describes."""
        if self.parts is not None:
            return list(self.parts)
        return [WorkloadPartConfig.model_validate(self.model_dump(include=set(_PART_KEYS)))]


def default_workload() -> WorkloadConfig:
    """The workload of a config without ``[workload]``: all 1-way, all 2-way and 64 random 3-way marginals."""
    return WorkloadConfig(
        parts=[
            WorkloadPartConfig(kind="all_kway", k=1),
            WorkloadPartConfig(kind="all_kway", k=2),
            WorkloadPartConfig(kind="random_marginals", k=3, count=64),
        ]
    )


class OutputConfig(StrictModel):
    """Where and how the synthetic table is published."""

    directory: Path = Field(description="Parent directory of the published releases.")
    formats: list[Literal["parquet", "csv", "duckdb"]] = Field(default_factory=lambda: ["parquet", "csv", "duckdb"])
    rows: int | None = Field(
        default=None, ge=1, le=MAX_OUTPUT_ROWS, description="Rows to publish (default: the public n); at most 10^8."
    )
    numeric_values: Literal["bucket_label", "uniform"] = Field(
        default="bucket_label", description="Numbers as their bucket label, or drawn uniformly inside the bucket."
    )
    single_value_numbers: bool = Field(
        default=True,
        description=(
            "With bucket labels: an integer bucket that holds one value ([16, 17)) is published as that number "
            "(16); a column of such buckets only is an integer column. false: every bucket as its label. The internal "
            "error report labels values the same way."
        ),
    )

    @field_validator("formats")
    @classmethod
    def _formats(cls, formats: list[str]) -> list[str]:
        if not formats:
            raise ValueError("give at least one output format")
        if len(set(formats)) != len(formats):
            raise ValueError("output formats must not repeat")
        return formats


class LedgerConfig(StrictModel):
    """The persistent budget ledger."""

    path: Path = Field(description="DuckDB file of the ledger (shared by every release of the dataset).")
    dataset_id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    initial_cap_epsilon: float | None = Field(
        default=None, gt=0, allow_inf_nan=False,
        description="Cap created if the dataset has none yet (never changes an existing cap).",
    )
    initial_cap_delta: float | None = Field(
        default=None, gt=0, lt=1, allow_inf_nan=False, description="delta of that initial cap."
    )
    lock_timeout: float | None = Field(
        default=None, gt=0, le=3600, allow_inf_nan=False,
        description="Seconds a ledger operation waits for its turn while other releases use the ledger file, then "
        "stops the run with exit 1 (default: dqrelease.ledger.DEFAULT_LOCK_TIMEOUT, 120 s).",
    )

    @model_validator(mode="after")
    def _check(self) -> LedgerConfig:
        if (self.initial_cap_epsilon is None) != (self.initial_cap_delta is None):
            raise ValueError("give both initial_cap_epsilon and initial_cap_delta, or neither")
        return self


class DaskTlsConfig(StrictModel):
    """Certificate files of a ``tls://`` Dask scheduler (Dask's ``Security``): section ``[run.dask_tls]``."""

    ca_file: Path = Field(description="PEM certificate of the authority that signed the cluster's certificates.")
    cert_file: Path = Field(description="PEM certificate of this client, signed by that authority.")
    key_file: Path | None = Field(default=None, description="PEM private key of cert_file (default: in cert_file).")


class RunConfig(StrictModel):
    """Randomness, working database and execution."""

    seed_mode: Literal["secure", "seeded"] = Field(
        default="secure", description="'secure': OS entropy (real releases); 'seeded': tests and audits only."
    )
    seed: int | None = Field(default=None, ge=0, description="Seed for seed_mode = 'seeded'; never published.")
    database: Path | None = Field(
        default=None, description="Working DuckDB file (default: one per run in its staging folder, removed with it)."
    )
    dask_address: str | None = Field(
        default=None,
        description=(
            "Run parallel tasks on this Dask scheduler: 'local' / 'local:N' (N worker processes here), tls://HOST:PORT "
            "(with [run.dask_tls]), or tcp://HOST:PORT on this machine (127.0.0.1, ::1, localhost; another machine "
            "only with dask_insecure)."
        ),
    )
    dask_insecure: bool = Field(
        default=False,
        description=(
            "Allow a plain tcp:// scheduler on another machine: the private data and the generator's key travel "
            "unencrypted (--dask-insecure for one run)."
        ),
    )
    dask_tls: DaskTlsConfig | None = Field(
        default=None, description="Certificate files of a tls:// scheduler: section [run.dask_tls]."
    )
    memory_limit_gib: float | None = Field(
        default=None, gt=0, le=1_048_576, allow_inf_nan=False,
        description=(
            "Most memory (GiB) the release's forecast may need; a plan over it is refused before anything is read or "
            "charged (default: 80% of the machine's physical memory, dqrelease.memory_estimate.MEMORY_SAFETY_FRACTION)."
        ),
    )

    @model_validator(mode="after")
    def _check(self) -> RunConfig:
        if self.seed_mode == "seeded" and self.seed is None:
            raise ValueError("seed_mode 'seeded' needs a seed")
        if self.seed_mode == "secure" and self.seed is not None:
            raise ValueError("a seed is only allowed with seed_mode = 'seeded' (tests and audits)")
        return self

    def dask_access(self, address: str | None = None, *, insecure: bool = False) -> DaskAccess | None:
        """How the run reaches its Dask cluster: ``address`` (``--dask``) or ``dask_address``; None without Dask.

        ``insecure`` (``--dask-insecure``) opts in to plain TCP as ``dask_insecure`` does.
        """
        address = address or self.dask_address
        if address is None:
            return None
        return DaskAccess(address=address, tls=self.dask_tls, insecure=insecure or self.dask_insecure)


class AccuracyConfig(StrictModel):
    """What the published table must reach, checked against the forecast before anything is read or charged.

    ``dqrelease plan`` prints the smallest epsilon whose forecast meets both targets; ``dqrelease run`` refuses a
    release whose forecast misses one (``--accept-low-utility`` publishes it anyway).
    """

    worst_one_way_cell: float = Field(
        default=0.05, gt=0, le=1, allow_inf_nan=False,
        description=(
            "Largest error of any value's share in any column (the forecast's 'worst one-way cell'); default 0.05: "
            "no published share more than 5 points off."
        ),
    )
    workload_max: float | None = Field(
        default=None, gt=0, le=1, allow_inf_nan=False,
        description="Largest error of any workload query (the forecast's 'workload max'); default: no target.",
    )


class ReleaseConfig(StrictModel):
    """One release: source, schema, privacy, workload, mechanism, ledger, output, run settings."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$", description="Release name (letters, digits, _ . -).")
    description: str = Field(default="", description="Free text, copied into the manifest.")
    schema_file: Path = Field(description="The public schema file (see docs/schema.md).")
    source: SourceConfig = Field(description="Where the raw table comes from: section [source].")
    privacy: PrivacyConfig = Field(description="Neighbouring relation, n, target budget: section [privacy].")
    workload: WorkloadConfig = Field(
        default_factory=default_workload,
        description=(
            "Queries to answer well: section [workload]; default: all 1-way and all 2-way marginals plus 64 random "
            "3-way ones (seed 0)."
        ),
    )
    mechanism: MechanismSettings = Field(
        default_factory=lambda: MECHANISMS[DEFAULT_MECHANISM].keys(),
        description="Synthesizer and its parameters: section [mechanism] (keys by mechanism below).",
    )
    ledger: LedgerConfig = Field(description="Budget ledger: section [ledger].")
    output: OutputConfig = Field(description="Published outputs: section [output].")
    run: RunConfig = Field(default_factory=RunConfig, description="Randomness and execution: section [run].")
    accuracy: AccuracyConfig = Field(
        default_factory=AccuracyConfig,
        description="Accuracy targets the forecast must meet before the release runs: section [accuracy].",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_mechanism_name(cls, raw: object) -> object:
        if isinstance(raw, dict) and isinstance(raw.get("mechanism"), dict) and "name" not in raw["mechanism"]:
            raw = {**raw, "mechanism": {"name": DEFAULT_MECHANISM, **raw["mechanism"]}}
        return raw

    @model_validator(mode="after")
    def _check(self) -> ReleaseConfig:
        m = self.mechanism
        if MECHANISMS[m.name].needs_public_n and self.privacy.n == "noisy":
            raise ValueError(
                f"mechanism {m.name!r} needs a public n (its engine scales its selection scores and noise by the true "
                "number of records): set privacy.n to the number of records and neighbouring = 'replace-one'"
            )
        m.check_release(privacy=self.privacy, output=self.output)
        return self

    @property
    def source_dir(self) -> Path:
        """Directory relative paths were resolved against."""
        return self.schema_file.parent


def load_config(path: Path) -> ReleaseConfig:
    """Parse and validate a release config; relative paths are resolved against its directory.

    Raises:
        ConfigInvalidError: On a missing file, invalid TOML or an invalid config (one line, with the key).
    """
    path = Path(path).resolve()
    raw = _read_resolved(path)
    try:
        return ReleaseConfig.model_validate(raw, strict=STRICT)
    except ValidationError as error:
        raise ConfigInvalidError(format_validation_error(error, path, raw, ReleaseConfig)) from None


class SourceSection(StrictModel):
    """The two keys of a release config that ``dqrelease schema init`` reads: the schema file and ``[source]``."""

    schema_file: Path = Field(description="The public schema file (see docs/schema.md).")
    source: SourceConfig = Field(description="Where the raw table comes from: section [source].")


def load_source_section(path: Path) -> SourceSection:
    """Parse a release config's ``schema_file`` and ``[source]`` alone (the other sections may still be unwritten).

    Paths are resolved as :func:`load_config` resolves them; the other keys are neither read nor checked.

    Raises:
        ConfigInvalidError: On a missing file, invalid TOML or an invalid ``schema_file`` / ``[source]``.
    """
    path = Path(path).resolve()
    raw = _read_resolved(path)
    section = {key: raw[key] for key in ("schema_file", "source") if key in raw}
    try:
        return SourceSection.model_validate(section, strict=STRICT)
    except ValidationError as error:
        raise ConfigInvalidError(format_validation_error(error, path, section, SourceSection)) from None


def _read_resolved(path: Path) -> dict:
    """The config file's TOML with its relative paths resolved against the file's directory."""
    raw = read_toml(path, what="config")
    base = path.parent
    if "schema_file" in raw:
        raw["schema_file"] = resolve_path(base, raw["schema_file"])
    source = raw.get("source", {})
    if isinstance(source, dict):
        if "paths" in source and isinstance(source["paths"], list):
            source["paths"] = [resolve_path(base, p) for p in source["paths"]]
        if "database" in source:
            source["database"] = resolve_path(base, source["database"])
    run = raw.get("run")
    tls = run.get("dask_tls") if isinstance(run, dict) else None
    for block, key in (
        (raw.get("output"), "directory"), (raw.get("ledger"), "path"), (run, "database"),
        (tls, "ca_file"), (tls, "cert_file"), (tls, "key_file"),
    ):
        if isinstance(block, dict) and key in block:
            block[key] = resolve_path(base, block[key])
    return raw


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
