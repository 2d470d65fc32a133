"""A memory forecast for a release, from public quantities only, and the limit a plan must fit.

``dqrelease plan`` prints the forecast and ``dqrelease run`` refuses, before anything is read or charged, a plan whose
forecast exceeds the limit (:func:`dqrelease.plan.check_release_memory`). The forecast adds the largest arrays a run
holds at once, each from the plan's public parameters and the schema's shape:

* **particles** (the table fit of DualQuery, DQRS, FEM and sepFEM, and MWEM on particles): ``r`` particles of ``m``
  columns as int64 codes, :data:`PARTICLE_CELL_BYTES` per particle and column at the peak (the copies that
  :class:`dq_engine.fit.particles.ParticleDistribution` makes when it builds, resamples and returns them), plus the
  cell of every particle in every marginal the particles answer (:data:`CELL_INDEX_BYTES` each, cached for the run);
* **universe** (MWEM over the whole domain): one weight per record and, for the output, the codes of the records;
* **oracle** (the best-response oracle's CP-SAT model): :data:`ORACLE_BASE_BYTES` plus a share per sampled query and
  per bit of the encoding;
* **answers**: the workload's arrays and its exact and published answers (:data:`ANSWER_BYTES_PER_QUERY`), the
  multiplicative weights of the oracle mechanisms over the queries (:data:`MW_BYTES_PER_QUERY`), and the answers of
  the marginals the particles are fitted to;
* **records**: the records a mechanism outputs as a whole table (randomized response, independent columns);
* **rows**: one publishing chunk (:func:`~dqrelease.runtime.chunks.chunk_rows_for` rows) sampled, decoded and written
  (:data:`PUBLISHED_CELL_BYTES` per cell, :data:`PUBLISHED_BINARY_CELL_BYTES` in a binary column);
* **data**: the private table's codes (``n`` rows of the schema's code width).

The parts are held together, after the source is read; before them, the **ingest** holds the row groups DuckDB is
writing to the raw table (:func:`ingest_bytes`), and the forecast peak is the larger of the two. The ingest is the
peak of a wide table only (10,000 binary columns: 2.7 GiB measured above the imports, against about 3 GiB for the rest
after it, most of it the publishing chunk).

It never reads data or a private count. The constants are upper-biased; ``bench/memory_forecast.py`` compares the
forecast with the measured peak (docs/benchmarks.md, "Memory forecast"). The interpreter and its imports (a few hundred
MiB) are not in the forecast: the default limit's safety fraction leaves room for them.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dqrelease.inputs.ingest import is_wide_ingest
from dqrelease.runtime.chunks import chunk_rows_for

if TYPE_CHECKING:
    from dq_engine.data.domain import Domain
    from dq_engine.data.workload import Workload
    from dqrelease.mechanisms import ReleasePlan

__all__ = [
    "ANSWER_BYTES_PER_QUERY",
    "CELL_INDEX_BYTES",
    "DUCKDB_ROW_GROUP_ROWS",
    "GIB",
    "INGEST_TEXT_CELL_BYTES",
    "MEMORY_SAFETY_FRACTION",
    "MW_BYTES_PER_QUERY",
    "ORACLE_BASE_BYTES",
    "ORACLE_BYTES_PER_BIT",
    "ORACLE_BYTES_PER_SAMPLE",
    "OUTPUT_CODE_BYTES",
    "PARTICLE_BYTES",
    "PARTICLE_CELL_BYTES",
    "PUBLISHED_BINARY_CELL_BYTES",
    "PUBLISHED_CELL_BYTES",
    "PUBLISH_CHUNK_ROWS",
    "RECORD_CELL_BYTES",
    "UNIVERSE_RECORD_BYTES",
    "WIDE_INGEST_BASE_BYTES",
    "WIDE_INGEST_COLUMN_BYTES",
    "MemoryEstimate",
    "MemoryLimit",
    "estimate_release_memory",
    "ingest_bytes",
    "memory_limit",
    "shown_bytes",
]

GIB = 2**30
MIB = 2**20

PARTICLE_CELL_BYTES = 40
"""Bytes per particle and column at the peak: five int64 copies of the particles (the drawn columns, their stack and
its int64 copy while they are built; the particles and their column-ordered copy while the fit runs; the contiguous
and the sorted copies ``numpy.unique`` makes when the distinct particles are returned)."""

CELL_INDEX_BYTES = 8
"""Bytes per particle and marginal: the int64 cell of each particle in each marginal it answers (cached)."""

PARTICLE_BYTES = 40
"""Bytes per particle besides its codes: the weights, their update's temporaries and the published weights."""

UNIVERSE_RECORD_BYTES = 24
"""Bytes per record of MWEM's universe besides the output codes: its weight, a snapshot and a marginal's temporary."""

OUTPUT_CODE_BYTES = 16
"""Bytes per record and column of MWEM's output over the universe (``numpy.unravel_index``'s int64 codes, their
stack)."""

ORACLE_BASE_BYTES = 32 * MIB
"""The CP-SAT model and its workers' solver state on a small problem (about 8 MiB measured on 100 to 10,000 bits)."""

ORACLE_BYTES_PER_SAMPLE = 8 * 1024
"""CP-SAT per sampled query of a round (about 4 KiB measured: 13 MiB for 3,000 clauses on 10,000 bits)."""

ORACLE_BYTES_PER_BIT = 1024
"""CP-SAT per bit of the encoding (a decision variable with its one-hot constraint and the workers' copies)."""

ANSWER_BYTES_PER_QUERY = 32
"""Bytes per workload query besides the workload's own arrays: its exact answer, its published answer (error report),
its cell in the marginal table and one temporary."""

MW_BYTES_PER_QUERY = 48
"""Bytes per query of the oracle mechanisms' multiplicative weights: log weights, two scratch buffers, the synthetic
answers' sum, the payoff and the error."""

RECORD_CELL_BYTES = 24
"""Bytes per record and column of a mechanism that outputs a whole table (int64 codes, a shuffled and a redrawn
copy)."""

PUBLISH_CHUNK_ROWS = 1024 * 1024
"""Rows sampled, decoded, validated and written at a time when a release is published, for a table of at most 64
columns (:func:`~dqrelease.runtime.chunks.chunk_rows_for`; :mod:`dqrelease.outputs.published_rows` reads it here,
so the forecast and the publishing agree). It bounds memory (about 100 MB of decoded text for 15 columns) and never
changes the CSV or DuckDB bytes. It is also the Parquet row group
(:data:`dqrelease.outputs.publish.PARQUET_ROW_GROUP_ROWS`), so that a chunk is written as it arrives."""

PUBLISHED_CELL_BYTES = 64
"""Bytes per published cell of a chunk: the sampled int64 code, its decoded value (a label string or a number) and its
text in the CSV. Set when pandas held that text twice (text, then bytes); DuckDB's text is held once since issue 26,
so the figure is now an upper bound (not re-measured)."""

PUBLISHED_BINARY_CELL_BYTES = 32
"""Bytes per published cell of a binary column: the sampled int64 code, its int8 value, its Arrow copy, ``0,`` or
``1,`` in the CSV text, and the Parquet and DuckDB writers' buffers. Measured: 1,000 binary columns, 100,000 rows,
the writing stage 3.0 GiB above start-up, about 32 bytes a cell (``bench/wide_columns.py``; 16 before, which
forecast half of it)."""

WIDE_INGEST_BASE_BYTES = 512 * MIB
"""Bytes a wide source's ingest holds whatever its width (DuckDB's reader and writer state)."""

WIDE_INGEST_COLUMN_BYTES = 256 * 1024
"""Bytes per column while a wide source is ingested (one thread, row groups of
:data:`~dqrelease.inputs.ingest.WIDE_ROW_GROUP_ROWS` rows): the column's segment of the row group being written holds
a 256 KiB block. With :data:`WIDE_INGEST_BASE_BYTES`, fitted to the ingest's peak above the imports measured on
1,000 and 10,000 binary columns of 100,000 rows (0.66 and 2.67 GiB: ``bench/wide_ingest.py``, docs/benchmarks.md,
"The ingest of a wide table"), and checked on 3,000 columns, which it was not fitted to."""

DUCKDB_ROW_GROUP_ROWS = 122_880
"""DuckDB's default rows per row group: what each of its threads holds while it writes a table that is not wide."""

INGEST_TEXT_CELL_BYTES = 16
"""Bytes per cell of the raw table's row group being written (a DuckDB string of up to 12 characters is 16 bytes)."""

MEMORY_SAFETY_FRACTION = 0.8
"""The default memory limit's share of the machine's physical memory: the rest is for the interpreter and its imports
(Prefect, DuckDB, pandas: about 0.5 GiB), the side process (Great Expectations: about 0.3 GiB), DuckDB's buffers while
the table is read, the operating system and what the forecast does not count."""


@dataclass(frozen=True, kw_only=True)
class MemoryEstimate:
    """A release's forecast peak memory in bytes, by part.

    Attributes:
        parts: Bytes of each part that is not zero (``particles``, ``universe``, ``oracle``, ``answers``,
            ``records``, ``rows``, ``data``), in that order: held together, after the ingest.
        ingest: Bytes held while the source is ingested, before the parts (:func:`ingest_bytes`).
        particles: Particles the plan holds (0 without particles).
        bytes_per_particle: What one more particle adds (0 without particles): the particles part is
            ``particles x bytes_per_particle``.
    """

    parts: dict[str, int]
    ingest: int = 0
    particles: int = 0
    bytes_per_particle: int = 0

    @property
    def total(self) -> int:
        """The forecast peak in bytes: the larger of the ingest and the parts' sum."""
        return max(self.ingest, sum(self.parts.values()))

    def shown(self) -> str:
        """``about 1.2 GiB (particles 1.1 GiB, oracle 32 MiB, ...; the ingest before them 20 MiB)``."""
        detail = ", ".join(f"{name} {shown_bytes(size)}" for name, size in self.parts.items())
        return f"about {shown_bytes(self.total)} ({detail}; the ingest before them {shown_bytes(self.ingest)})"

    def particles_within(self, limit: int) -> int:
        """The most particles whose forecast is within ``limit`` bytes, the rest of the plan unchanged (0: none)."""
        if not self.bytes_per_particle or self.ingest > limit:
            return 0
        room = limit - (sum(self.parts.values()) - self.parts.get("particles", 0))
        return max(0, room // self.bytes_per_particle)


def ingest_bytes(*, source_format: str, columns: int, n: int) -> int:
    """Bytes DuckDB holds while it writes the raw table (:mod:`dqrelease.inputs.ingest`), from public quantities.

    A wide source: :data:`WIDE_INGEST_BASE_BYTES` and :data:`WIDE_INGEST_COLUMN_BYTES` a column, whatever ``n``.
    Any other: each of DuckDB's threads (one per core) holds a row group of at most :data:`DUCKDB_ROW_GROUP_ROWS`
    rows of text (a basket file's long table has two columns). DuckDB's cache of the written blocks, which it gives
    back when memory is short, is not counted.
    """
    if is_wide_ingest(source_format, columns):
        return WIDE_INGEST_BASE_BYTES + columns * WIDE_INGEST_COLUMN_BYTES
    width = 2 if source_format == "transactions" else columns
    return (os.cpu_count() or 1) * min(n, DUCKDB_ROW_GROUP_ROWS) * width * INGEST_TEXT_CELL_BYTES


def estimate_release_memory(
    plan: ReleasePlan, *, n: int, domain: Domain, workload: Workload, rows: int, source_format: str
) -> MemoryEstimate:
    """The forecast peak memory of ``dqrelease run`` for ``plan`` (see the module docstring for the model).

    Args:
        plan: The release plan (its public parameters: particles, oracle samples, the mechanism).
        n: The public number of records.
        domain: The schema's public domain.
        workload: The public workload.
        rows: Rows to publish.
        source_format: The source's format (``source.format``), for the ingest (:func:`ingest_bytes`).
    """
    columns = len(domain)
    parameters = plan.parameters
    kmax = int(workload.marginals.shape[1])
    answers = len(workload) * (8 * (kmax + 1) + ANSWER_BYTES_PER_QUERY)
    parts: dict[str, int] = {}
    particles, per_particle = 0, 0
    fit = parameters.get("fit")
    if isinstance(fit, dict) or plan.mechanism == "mwem-particles":
        from dq_engine.fit.table_fit import fit_workload_size

        if isinstance(fit, dict):
            particles = int(fit["particles"])
            marginals, queries = fit_workload_size(workload)
            if queries != len(workload):  # the fit's own pairs: their arrays (two attributes) and answers
                answers += queries * (8 * 3 + ANSWER_BYTES_PER_QUERY)
        else:
            particles, marginals = int(parameters["support_size"]), workload.n_marginals
        per_particle = columns * PARTICLE_CELL_BYTES + marginals * CELL_INDEX_BYTES + PARTICLE_BYTES
        parts["particles"] = particles * per_particle
    if plan.mechanism == "mwem":
        universe = math.prod(int(size) for size in domain.sizes)
        parts["universe"] = universe * (UNIVERSE_RECORD_BYTES + OUTPUT_CODE_BYTES * columns)
    oracle = parameters.get("oracle")
    if isinstance(oracle, dict):
        samples = int(parameters.get("samples", 0) or 0)
        workers = int(oracle.get("num_workers") or 1)
        per_worker = samples * ORACLE_BYTES_PER_SAMPLE + domain.n_bits * ORACLE_BYTES_PER_BIT
        parts["oracle"] = ORACLE_BASE_BYTES + workers * per_worker
        answers += len(workload) * MW_BYTES_PER_QUERY
    parts["answers"] = answers
    if plan.mechanism in ("randomized_response", "independent"):
        parts["records"] = (n if plan.mechanism == "randomized_response" else rows) * columns * RECORD_CELL_BYTES
    binary = int(domain.is_binary.sum())
    cell_bytes = binary * PUBLISHED_BINARY_CELL_BYTES + (columns - binary) * PUBLISHED_CELL_BYTES
    parts["rows"] = min(rows, chunk_rows_for(columns, most=PUBLISH_CHUNK_ROWS)) * cell_bytes
    parts["data"] = n * columns * domain.code_dtype.itemsize
    return MemoryEstimate(parts=parts, ingest=ingest_bytes(source_format=source_format, columns=columns, n=n),
                          particles=particles, bytes_per_particle=per_particle)


@dataclass(frozen=True, kw_only=True)
class MemoryLimit:
    """The most memory a release may be forecast to need.

    Attributes:
        bytes: The limit.
        source: Where it comes from, in words (the config key, or the machine's memory and the safety fraction).
    """

    bytes: int
    source: str

    def shown(self) -> str:
        """``18.7 GiB (80% of this machine's 23.4 GiB, the default of run.memory_limit_gib)``."""
        return f"{shown_bytes(self.bytes)} ({self.source})"


def memory_limit(configured_gib: float | None) -> MemoryLimit:
    """``run.memory_limit_gib`` when set, else :data:`MEMORY_SAFETY_FRACTION` of the machine's physical memory."""
    if configured_gib is not None:
        return MemoryLimit(bytes=int(configured_gib * GIB), source="run.memory_limit_gib")
    import psutil

    physical = psutil.virtual_memory().total
    return MemoryLimit(
        bytes=int(physical * MEMORY_SAFETY_FRACTION),
        source=(f"{MEMORY_SAFETY_FRACTION:.0%} of this machine's {shown_bytes(physical)}, the default of "
                "run.memory_limit_gib"),
    )


def shown_bytes(size: float) -> str:
    """A size in the binary unit a person reads: ``512 MiB``, ``1.2 GiB``, ``20 PiB``."""
    for unit, scale in (("PiB", 2**50), ("TiB", 2**40), ("GiB", GIB)):
        if size >= scale:
            value = size / scale
            return f"{value:,.0f} {unit}" if value >= 1000 else f"{value:.3g} {unit}"
    return f"{max(1, round(size / MIB))} MiB"
