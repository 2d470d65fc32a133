"""Stages that touch every row, chunk by chunk: in this process, or as map-reduce on the workers of a Dask cluster.

A stage hands :func:`map_chunks` its chunks (Arrow record batches of the run's working table, or the published rows'
value codes) and a function of one chunk; the results come back in the chunks' order. Without a cluster the function
runs here, one chunk after the other. With one (:func:`cluster_chunks`: the run's ``--dask`` cluster) each chunk is
scattered to a worker, round robin over the workers (the chunks are of equal size, so the work spreads evenly), and
the function runs there; at most :attr:`ChunkWorkers.in_flight` chunks are out at a time. A scattered chunk lives on
its worker, and a result stays there until it is fetched, in order: this process holds the chunk it is reading and
the result it is using, and the workers at most two chunks and results each. The chunks are plain Dask futures, not
Prefect task runs: a 5-million-row table is a handful of chunks per stage, a census thousands, and Prefect's API
sees none of them.

The reduce step of a grouped count is :func:`sum_counts`: partial ``GROUP BY`` results of several chunks summed
by key (Arrow's hash aggregation; NULL is a key like any other), the result the whole table's ``GROUP BY`` gives,
up to the order of its rows.

Invariant: nothing here logs or reports a count of chunks or rows (the number of chunks says how many rows the
private table has).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb
import pyarrow as pa

from dqrelease.errors import ConfigInvalidError
from dqrelease.warehouse import stream_batches, table_columns

if TYPE_CHECKING:
    from distributed import Client

__all__ = [
    "CHUNK_CELLS", "READ_CHUNK_ROWS", "ChunkWorkers", "chunk_rows_for", "cluster_chunks", "map_chunks", "sum_counts",
    "table_chunks",
]

READ_CHUNK_ROWS = 1_000_000
"""Rows of the working table per chunk when validation and discretization run on a cluster's workers (read at the
call, so tests may lower it), fewer beyond 64 columns (:func:`table_chunks`). Publishing cuts its rows by
:func:`chunk_rows_for` too."""

CHUNK_CELLS = 64 * 1024 * 1024
"""The most cells a chunk of rows holds, published or read for a cluster's workers: a table wider than 64 columns is
cut in chunks of fewer rows (:func:`chunk_rows_for`), so that a chunk's memory is bounded whatever the width (2 GiB of
published binary cells)."""

ALIGNMENT_HANDLING = ("ACERO_ALIGNMENT_HANDLING", "reallocate")
"""Arrow's setting for buffers that are not aligned to their type: copy them, silently. A part fetched from a Dask
worker is unpickled into buffers at any offset, and Arrow's default (``warn``) prints a warning line for each
:func:`sum_counts` over such parts. Arrow reads the setting once, at the first aggregation of the process, so it is
set (unless the environment sets it) when this module is imported."""
os.environ.setdefault(*ALIGNMENT_HANDLING)

IN_FLIGHT_PER_WORKER = 2
"""Chunks out per worker at a time: one running and one on its way, so no worker waits for the next chunk."""

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, kw_only=True, eq=False)
class ChunkWorkers:
    """The workers of a Dask cluster that a stage's chunks run on.

    Attributes:
        client: A client of the cluster (this process's; closed by whoever opened it).
        addresses: The workers' addresses, in the order chunks are dealt to them.
    """

    client: Client
    addresses: tuple[str, ...]

    @classmethod
    def of(cls, client: Client) -> ChunkWorkers:
        """The workers ``client``'s scheduler has now.

        Raises:
            ConfigInvalidError: The scheduler has no worker.
        """
        addresses = tuple(sorted(client.scheduler_info(n_workers=-1)["workers"]))
        if not addresses:
            raise ConfigInvalidError(
                "the Dask scheduler has no workers: start workers for it (dask worker ADDRESS), or run without --dask"
            )
        return cls(client=client, addresses=addresses)

    @property
    def in_flight(self) -> int:
        """The most chunks out at a time (:data:`IN_FLIGHT_PER_WORKER` per worker)."""
        return IN_FLIGHT_PER_WORKER * len(self.addresses)


@contextmanager
def cluster_chunks(address: str | None) -> Iterator[ChunkWorkers | None]:
    """The workers of the run's cluster at ``address`` (None: no cluster, the chunks run in this process).

    The client connects as the running flow's ``DaskTaskRunner`` does (its TLS security), else with Dask's
    configured security (tests, the Python API).

    Raises:
        ConfigInvalidError: The scheduler has no worker.
    """
    if address is None:
        yield None
        return
    from distributed import Client

    from dqrelease.runtime.cluster import flow_client_kwargs

    with Client(address, set_as_default=False, **flow_client_kwargs()) as client:
        yield ChunkWorkers.of(client)


def chunk_rows_for(columns: int, *, most: int) -> int:
    """Rows of a chunk (a publishing chunk and Parquet row group, or a chunk read for the workers) of ``columns``.

    ``most`` rows, fewer when that many rows would hold more than :data:`CHUNK_CELLS` cells (tables wider than 64
    columns at a million rows); a function of the public schema only, so the same table is cut the same way on every
    run.
    """
    return max(1, min(most, CHUNK_CELLS // max(1, columns)))


def table_chunks(con: duckdb.DuckDBPyConnection, table: str) -> Iterator[pa.RecordBatch]:
    """The rows of ``table`` as Arrow record batches of at most :data:`READ_CHUNK_ROWS` rows (``sql/table_rows.sql``).

    A table of more than 64 columns comes in batches of fewer rows
    (:func:`chunk_rows_for`: at most :data:`CHUNK_CELLS` cells).

    ``con`` is busy until the iterator is exhausted or closed.
    """
    rows = chunk_rows_for(len(table_columns(con, table)), most=READ_CHUNK_ROWS)
    return stream_batches(con, "table_rows", params={"table": table}, batch_size=rows)


def map_chunks(
    function: Callable[..., R], chunks: Iterable[T], *, workers: ChunkWorkers | None, **shared: Any
) -> Iterator[R]:
    """``function(chunk, **shared)`` of every chunk, in the chunks' order: here, or on ``workers``.

    On a cluster chunk ``i`` goes to worker ``i mod w`` (scattered there, then computed there); ``shared`` (small,
    public arguments: a query, a schema) travels with each chunk. A failure on a worker is raised here.
    """
    if workers is None:
        for chunk in chunks:
            yield function(chunk, **shared)
        return
    client, pending = workers.client, deque()
    for number, chunk in enumerate(chunks):
        address = [workers.addresses[number % len(workers.addresses)]]
        [data] = client.scatter([chunk], workers=address, hash=False)
        pending.append(client.submit(function, data, **shared, workers=address, pure=False))
        del data
        while len(pending) >= workers.in_flight:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def sum_counts(parts: Iterable[pa.Table], *, count: str) -> pa.Table | None:
    """The partial grouped counts ``parts`` summed by key: one row per distinct key, ``count`` their sum.

    Every part has the same columns: the key columns and ``count`` (integers). None when there is no part. The
    parts are folded in as they come, so memory holds the keys seen so far and one part.
    """
    merged: pa.Table | None = None
    for part in parts:
        joined = part if merged is None else pa.concat_tables([merged, part])
        keys = [name for name in joined.column_names if name != count]
        summed = joined.group_by(keys, use_threads=False).aggregate([(count, "sum")])
        merged = summed.select([*keys, f"{count}_sum"]).rename_columns([*keys, count])
    return merged
