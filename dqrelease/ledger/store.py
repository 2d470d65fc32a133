"""Where the ledger lives: one DuckDB file, opened per operation, locked, versioned and migrated.

Invariants:

* A connection is opened for one operation only and never held open. Operations of dqrelease processes queue on
  a lock file next to the ledger (``<ledger>.lock``, :mod:`filelock`: an operating-system lock, released when its
  process ends, even by ``kill -9``), so waiting processes sleep instead of opening the database over and over;
  operations of threads of one process are serialized by a per-file lock (they share DuckDB's database instance).
  DuckDB's own file lock still stops other programs (a DuckDB shell left open on the ledger): opening is retried
  with jittered backoff. Both waits together last at most ``lock_timeout`` seconds.
* A write is one transaction (begin; read; check; insert; commit), rolled back on any exception. The primary
  key ``(dataset_id, seq)`` makes two writers that slipped past both locks conflict at commit instead of both
  writing.
* The schema version is recorded in the ``ledger_version`` table: a new file gets schema version 1 and every
  migration of :data:`MIGRATIONS`, an older one the migrations it lacks, in one transaction; a newer one is refused.
* Seeds are stored as an HMAC-SHA256 under a random key kept in the file (:func:`seed_digest`), never as such.
* Amounts are stored as exact rational text next to a double for reading; only the exact text is read back.

SQL lives in ``sql/ledger_*.sql`` (:func:`dqrelease.sql.load_sql`).
"""

from __future__ import annotations

import hashlib
import hmac
import random
import re
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import filelock

from dqrelease.errors import LedgerError, LedgerLockedError
from dqrelease.ledger.records import Cap, Charge
from dqrelease.sql import load_sql

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "LedgerFile",
    "charges",
    "current_caps",
    "insert_cap",
    "insert_charge",
    "insert_seed",
    "naive_utc",
    "seed_digest",
    "seed_runs",
    "utc_now",
]

SCHEMA_VERSION = 2
"""Schema version this module writes and reads (``ledger_version`` table)."""

DEFAULT_LOCK_TIMEOUT = 120.0
"""Seconds an operation waits for its turn while other processes use the ledger file (``ledger.lock_timeout``).

Two minutes: sixteen releases of one dataset charging at once on a loaded 2-core machine (five ledger operations
each) kept some of them waiting for more than 30 s, the old default, and a release that gives up after its ingest
only to be run again is worse than one that waits (docs/decisions.md, "The ledger's queue")."""

MIGRATIONS: dict[int, str] = {2: "ledger_migrate_2"}
"""Target version -> SQL file that upgrades from the version before (2: the seeds charged per dataset)."""

_LOCK_ERROR = "Could not set lock on file"
_LOCK_HOLDER = re.compile(r"\(PID (\d+)\)")
_FIRST_BACKOFF = 0.01
_MAX_BACKOFF = 0.5
_JITTER = random.Random()  # backoff jitter only; nothing privacy-relevant is drawn from it


class LedgerFile:
    """The ledger's DuckDB file: connections, transactions, schema version, and rows in and out.

    Args:
        path: The DuckDB file; created (with its parent directory) on first use.
        lock_timeout: Seconds to keep retrying while another process holds the file (0: try once).
    """

    def __init__(self, path: Path, lock_timeout: float) -> None:
        self.path = path
        self.lock_timeout = lock_timeout

    # ------------------------------------------------------------------ connections
    @contextmanager
    def connection(self, *, reading: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for one operation: per-file thread lock, file lock (retried), schema ready.

        ``reading``: the operation only reads, so a file this process may not write (an auditor's copy, a
        read-only mount) is opened read-only instead of refused; it must already have the current schema.
        """
        deadline = time.monotonic() + self.lock_timeout
        lock = _thread_lock(str(self.path.resolve()))
        if not (lock.acquire(timeout=self.lock_timeout) if self.lock_timeout > 0 else lock.acquire(blocking=False)):
            raise LedgerLockedError(self._locked_message(None))
        try:
            with self._queued(deadline), self._opened(deadline, reading=reading) as con:
                yield con
        finally:
            lock.release()

    @contextmanager
    def _queued(self, deadline: float) -> Iterator[None]:
        """Hold the ledger's lock file until the block ends: dqrelease processes take turns on the ledger.

        Without it, every waiting process tried to open the database every 10-500 ms; 16 releases charging at
        once on a loaded 2-core machine kept each other out for over 30 s (``tests/robustness/test_concurrency.py``)
        although each operation needs the file for a moment. A folder where the lock file cannot be created (an
        auditor's read-only copy) has no queue: the database's own lock is then the only one, as before.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        queue = filelock.FileLock(f"{self.path}.lock", timeout=max(deadline - time.monotonic(), 0.0))
        try:
            queue.acquire()
        except filelock.Timeout:
            raise LedgerLockedError(self._locked_message(None, queued=True)) from None
        except OSError:  # no lock file here (read-only folder): the database's lock alone
            yield
            return
        try:
            yield
        finally:
            queue.release()

    @contextmanager
    def _opened(self, deadline: float, *, reading: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        """The connection of one operation, its schema ready (or checked), closed at the end."""
        con, writable = self._open(deadline, reading=reading)
        try:
            if writable:
                self._prepare(con)
            else:
                self._check_version(con)
            yield con
        except duckdb.IOException as error:  # a damaged file fails when it is read, not when it is opened
            raise LedgerError(
                f"ledger {self.path} cannot be read (the file is damaged, e.g. truncated, or is not a dqrelease "
                "ledger); restore it from a backup or fix ledger.path"
            ) from error
        finally:
            con.close()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """:meth:`connection` inside ``begin`` ... ``commit`` (rolled back on any exception)."""
        with self.connection() as con:
            con.execute("begin transaction")
            try:
                yield con
            except BaseException:
                with suppress(duckdb.Error):
                    con.execute("rollback")
                raise
            try:
                con.execute("commit")
            except duckdb.TransactionException as error:
                raise LedgerError(
                    f"ledger {self.path} was written by another connection during this operation (nothing was "
                    "changed); retry"
                ) from error

    def _open(self, deadline: float, *, reading: bool = False) -> tuple[duckdb.DuckDBPyConnection, bool]:
        """The connection and whether it is writable, retried with jittered backoff until ``deadline`` (monotonic).

        Read-write; for ``reading`` an existing file that cannot be opened read-write (not a lock), read-only. The
        folder exists: :meth:`_queued` made it.
        """
        backoff = _FIRST_BACKOFF
        while True:
            try:
                return duckdb.connect(str(self.path)), True
            except duckdb.Error as error:
                if reading and self.path.is_file() and not (isinstance(error, duckdb.IOException)
                                                            and _LOCK_ERROR in str(error)):
                    with suppress(duckdb.Error):
                        return duckdb.connect(str(self.path), read_only=True), False
                if not (isinstance(error, duckdb.IOException) and _LOCK_ERROR in str(error)):
                    first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
                    raise LedgerError(f"cannot open ledger {self.path} ({first_line}); check ledger.path") from error
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LedgerLockedError(self._locked_message(str(error))) from error
                time.sleep(min(left, _JITTER.uniform(backoff / 2, backoff)))
                backoff = min(2 * backoff, _MAX_BACKOFF)

    def _locked_message(self, error: str | None, *, queued: bool = False) -> str:
        """Why the ledger could not be opened; ``error`` is DuckDB's lock error (None: a thread or process of ours).

        ``queued``: the wait was for the lock file, i.e. for other dqrelease operations on this ledger.
        """
        if queued:
            by = f"other dqrelease operations (their queue is {self.path}.lock)"
        elif error is None:
            by = "another thread of this process"
        else:
            holder = _LOCK_HOLDER.search(error)
            by = f"another process (PID {holder.group(1)})" if holder else "another process"
        return (
            f"ledger {self.path} is locked by {by}; retry later (waited {self.lock_timeout:g} s; "
            "a charge needs the file for a moment only, so close long-lived DuckDB sessions on it)"
        )

    # ------------------------------------------------------------------ schema version
    def _check_version(self, con: duckdb.DuckDBPyConnection) -> None:
        """A read-only file must already have this dqrelease's schema version (it cannot be upgraded)."""
        try:
            (version,) = con.execute(load_sql("ledger_version_current")).fetchall()[0]
        except duckdb.Error as error:
            raise LedgerError(f"ledger {self.path} is read-only and has no ledger schema; check ledger.path") from error
        if version != SCHEMA_VERSION:
            raise LedgerError(
                f"ledger {self.path} is read-only and has schema version {version}, this dqrelease reads version "
                f"{SCHEMA_VERSION}; open it once with write access (any budget command) to upgrade it"
            )

    def _prepare(self, con: duckdb.DuckDBPyConnection) -> None:
        """Create the schema in a new file; upgrade an older one; refuse a newer one."""
        con.execute(load_sql("ledger_version_table"))
        (version,) = con.execute(load_sql("ledger_version_current")).fetchall()[0]
        if version == SCHEMA_VERSION:
            return
        if version is not None and version > SCHEMA_VERSION:
            raise LedgerError(
                f"ledger {self.path} has schema version {version} but this dqrelease reads up to version "
                f"{SCHEMA_VERSION}; upgrade dqrelease"
            )
        con.execute("begin transaction")
        try:
            if version is None:  # a new file: version 1, then every migration, as an old file would get them
                con.execute(load_sql("ledger_schema"))
                applied = list(range(1, SCHEMA_VERSION + 1))
            else:
                applied = list(range(version + 1, SCHEMA_VERSION + 1))
            for target in applied:
                if target in MIGRATIONS:
                    con.execute(load_sql(MIGRATIONS[target]))
                con.execute(load_sql("ledger_version_insert"), {"version": target, "applied_at_utc": naive_utc()})
            con.execute("commit")
        except BaseException:
            with suppress(duckdb.Error):
                con.execute("rollback")
            raise


# ---------------------------------------------------------------------- rows
def current_caps(con: duckdb.DuckDBPyConnection, dataset_id: str | None) -> list[Cap]:
    """The latest cap of one dataset (or of every dataset when ``dataset_id`` is None)."""
    rows = con.execute(load_sql("ledger_caps_current"), {"dataset_id": dataset_id}).fetchall()
    return [
        Cap(
            dataset_id=row[0], seq=row[1], set_at=row[2].replace(tzinfo=UTC), epsilon=Fraction(row[3]),
            delta=Fraction(row[4]), rho=None if row[5] is None else Fraction(row[5]),
        )
        for row in rows
    ]


def charges(con: duckdb.DuckDBPyConnection, dataset_id: str | None) -> list[Charge]:
    """Every charge of one dataset (or of all), oldest first."""
    rows = con.execute(load_sql("ledger_charges_select"), {"dataset_id": dataset_id}).fetchall()
    return [
        Charge(
            dataset_id=row[0], seq=row[1], run_id=row[2], charged_at=row[3].replace(tzinfo=UTC), config_hash=row[4],
            mechanism=row[5], mode=row[6], epsilon=Fraction(row[7]), delta=Fraction(row[8]),
            rho=None if row[9] is None else Fraction(row[9]), note=row[10],
        )
        for row in rows
    ]


def insert_cap(
    con: duckdb.DuckDBPyConnection, dataset_id: str, amounts: tuple[Fraction, Fraction, Fraction | None], *, seq: int
) -> Cap:
    """Append a cap row and return it."""
    cap = Cap(dataset_id=dataset_id, epsilon=amounts[0], delta=amounts[1], rho=amounts[2], set_at=utc_now(), seq=seq)
    con.execute(load_sql("ledger_cap_insert"), {
        "dataset_id": dataset_id, "seq": seq, "set_at_utc": naive_utc(cap.set_at), **_amount_params(*amounts),
    })
    return cap


def insert_charge(con: duckdb.DuckDBPyConnection, charge: Charge) -> None:
    """Append a charge row."""
    con.execute(load_sql("ledger_charge_insert"), {
        "dataset_id": charge.dataset_id, "seq": charge.seq, "run_id": charge.run_id,
        "charged_at_utc": naive_utc(charge.charged_at), "config_hash": charge.config_hash,
        "mechanism": charge.mechanism, "accounting_mode": charge.mode, "note": charge.note,
        **_amount_params(charge.epsilon, charge.delta, charge.rho),
    })


def seed_digest(con: duckdb.DuckDBPyConnection, dataset_id: str, seed: int, *, create_key: bool) -> str | None:
    """HMAC-SHA256 of ``dataset_id`` and ``seed`` under the file's random key (None: no key yet and none made).

    The key (32 bytes from :mod:`secrets`) is made in the transaction of the first seeded charge. Keyed per file
    and per dataset, equal seeds give unrelated hashes in two ledgers or two datasets; whoever holds the file and
    its key can still test a guessed seed (``docs/ledger.md``, "Seeds").
    """
    rows = con.execute(load_sql("ledger_seed_key_select")).fetchall()
    if rows:
        key = bytes.fromhex(rows[0][0])
    elif create_key:
        key = secrets.token_bytes(32)
        con.execute(load_sql("ledger_seed_key_insert"), {"key_hex": key.hex(), "created_at_utc": naive_utc()})
    else:
        return None
    return hmac.new(key, f"{dataset_id}\n{int(seed)}".encode(), hashlib.sha256).hexdigest()


def seed_runs(con: duckdb.DuckDBPyConnection, dataset_id: str, digest: str) -> list[str]:
    """The run that charged ``dataset_id`` with the seed of HMAC ``digest`` (empty: the seed is unused)."""
    rows = con.execute(load_sql("ledger_seed_runs"), {"dataset_id": dataset_id, "seed_hmac": digest}).fetchall()
    return [row[0] for row in rows]


def insert_seed(con: duckdb.DuckDBPyConnection, dataset_id: str, digest: str, *, run_id: str, charge_seq: int) -> None:
    """Record that ``run_id`` charged ``dataset_id`` with the seed of HMAC ``digest``."""
    con.execute(load_sql("ledger_seed_insert"), {
        "dataset_id": dataset_id, "seed_hmac": digest, "run_id": run_id, "charge_seq": charge_seq,
        "recorded_at_utc": naive_utc(),
    })


def _amount_params(epsilon: Fraction, delta: Fraction, rho: Fraction | None) -> dict[str, Any]:
    return {
        "epsilon_exact": str(epsilon), "delta_exact": str(delta), "rho_exact": None if rho is None else str(rho),
        "epsilon": float(epsilon), "delta": float(delta), "rho": None if rho is None else float(rho),
    }


def utc_now() -> datetime:
    """The current UTC time (timezone-aware)."""
    return datetime.now(UTC)


def naive_utc(moment: datetime | None = None) -> datetime:
    """UTC wall time without tzinfo, as stored in the TIMESTAMP columns."""
    return (moment or utc_now()).astimezone(UTC).replace(tzinfo=None)


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def _thread_lock(key: str) -> threading.Lock:
    """One lock per ledger file for the threads of this process (they share DuckDB's database instance)."""
    with _THREAD_LOCKS_GUARD:
        return _THREAD_LOCKS.setdefault(key, threading.Lock())
