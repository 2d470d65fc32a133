"""The persistent privacy-budget ledger: per-dataset caps and append-only charges in a DuckDB file.

Concept. Every release of a dataset is paid for by one *charge* committed before the mechanism reads the
private data. A charge is an immutable event (run id, UTC time, config hash, mechanism, accounting mode,
ε, δ, optional ρ, public note); it is never refunded, updated or deleted, and this module has no API that
could. Each dataset has a *cap* (ε, δ) and optionally a zCDP cap ρ; changing a cap appends a new cap row,
so the history of caps is kept too.

Composition across runs (see ``docs/ledger.md``). With ``S`` the dataset's earlier charges and ``c`` the
new one, the charge is refused iff

* ``Σ_S ε + ε_c > cap_ε`` (basic composition, Dwork & Roth Theorem 3.16 for (ε, δ)), or
* ``Σ_S δ + δ_c > cap_δ``, or
* the cap has a ρ and (some charge of ``S ∪ {c}`` has no ρ, or ``Σ_S ρ + ρ_c > cap_ρ``) (zCDP composes
  by adding ρ, Bun & Steinke 2016 Lemma 2.3).

Invariants:

* Amounts are exact: every ε, δ, ρ is converted to :class:`fractions.Fraction` (a float by its exact binary
  value, ``Fraction(0.1) = 3602879701896397/2**55``; never rounded) and stored as the exact rational text
  next to a double for reading. Only the exact values are added and compared, so a cap is never exceeded
  by rounding; a charge that lands exactly on the cap is accepted.
* A charge is one transaction (begin; read cap and charges; check; insert; commit) on a connection opened
  for that operation only. DuckDB lets one process hold the file read-write; other processes get a lock
  error, so operations of different processes are serialized by the file lock (retried with jittered
  backoff up to ``lock_timeout`` seconds) and operations of threads of one process by a per-file lock.
  The primary key ``(dataset_id, seq)`` makes two writers that slipped past both locks conflict at commit
  instead of both charging.
"""

from __future__ import annotations

import math
import random
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from numbers import Real
from pathlib import Path
from typing import Any

import duckdb

from dqrelease.errors import BudgetRefusedError, ConfigInvalidError, LedgerError, LedgerLockedError
from dqrelease.sql import load_sql

__all__ = [
    "ACCOUNTING_MODES",
    "DEFAULT_LOCK_TIMEOUT",
    "SCHEMA_VERSION",
    "Amount",
    "Cap",
    "Charge",
    "ChargeReceipt",
    "DatasetBudget",
    "Ledger",
    "LedgerError",
    "LedgerLockedError",
    "Remaining",
    "Spent",
]

SCHEMA_VERSION = 1
"""Schema version this module writes and reads (``ledger_version`` table)."""

DEFAULT_LOCK_TIMEOUT = 30.0
"""Seconds an operation keeps retrying while another process holds the ledger file."""

ACCOUNTING_MODES = ("paper", "tight")
"""Accounting modes a charge may record (see :mod:`dq_engine.accounting`)."""

Amount = float | int | Fraction | Decimal | str
"""A privacy amount: a float (taken at its exact binary value), an exact number, or a decimal/ratio string."""

_DATASET_ID = re.compile(r"^[A-Za-z0-9_.\-]+$")
_LOCK_ERROR = "Could not set lock on file"
_LOCK_HOLDER = re.compile(r"\(PID (\d+)\)")
_FIRST_BACKOFF = 0.01
_MAX_BACKOFF = 0.5
_JITTER = random.Random()  # backoff jitter only; nothing privacy-relevant is drawn from it
_MIGRATIONS: dict[int, str] = {}  # target version -> sql file that upgrades from the version before


# ---------------------------------------------------------------------- value types
@dataclass(frozen=True, kw_only=True)
class Cap:
    """A dataset's budget cap (the latest one set).

    Attributes:
        dataset_id: Dataset the cap applies to.
        epsilon: Cap on Σε over all charges.
        delta: Cap on Σδ over all charges.
        rho: Optional cap on Σρ (zCDP); when set, every charge must report ρ.
        set_at: UTC time the cap was set.
        seq: 1 for the first cap of the dataset, +1 for each change.
    """

    dataset_id: str
    epsilon: Fraction
    delta: Fraction
    rho: Fraction | None
    set_at: datetime
    seq: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly view (floats for reading, exact rationals as strings under ``exact``)."""
        return {**_amounts(self.epsilon, self.delta, self.rho), "set_at": self.set_at.isoformat(), "seq": self.seq}


@dataclass(frozen=True, kw_only=True)
class Charge:
    """One committed charge: an immutable privacy-cost event of one run on one dataset.

    Attributes:
        dataset_id: Dataset charged.
        seq: Position in the dataset's charges (1, 2, ...).
        run_id: The run that was charged.
        charged_at: UTC commit time.
        config_hash: SHA-256 of the release config.
        mechanism: Mechanism name (public).
        mode: Accounting mode of the amounts (``"paper"`` or ``"tight"``).
        epsilon: ε of the run's (ε, δ) guarantee, exact.
        delta: δ of the guarantee, exact.
        rho: zCDP ρ of the run, or None when its analysis gives none.
        note: Public note (never private data).
    """

    dataset_id: str
    seq: int
    run_id: str
    charged_at: datetime
    config_hash: str
    mechanism: str
    mode: str
    epsilon: Fraction
    delta: Fraction
    rho: Fraction | None
    note: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly view."""
        return {
            "dataset_id": self.dataset_id,
            "seq": self.seq,
            "run_id": self.run_id,
            "charged_at": self.charged_at.isoformat(),
            "config_hash": self.config_hash,
            "mechanism": self.mechanism,
            "accounting_mode": self.mode,
            **_amounts(self.epsilon, self.delta, self.rho),
            "note": self.note,
        }


@dataclass(frozen=True, kw_only=True)
class Spent:
    """What a dataset's charges add up to (exact).

    Attributes:
        dataset_id: Dataset.
        charges: Number of charges.
        epsilon: Σε.
        delta: Σδ.
        rho: Σρ, or None when some charge has no ρ (then the total has no zCDP bound).
        charges_without_rho: Number of charges without ρ.
    """

    dataset_id: str
    charges: int
    epsilon: Fraction
    delta: Fraction
    rho: Fraction | None
    charges_without_rho: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly view."""
        return {
            "charges": self.charges,
            **_amounts(self.epsilon, self.delta, self.rho),
            "charges_without_rho": self.charges_without_rho,
        }


@dataclass(frozen=True, kw_only=True)
class Remaining:
    """Cap minus spent (exact). Negative after a cap was lowered below what was spent.

    Attributes:
        epsilon: ``cap.epsilon - spent.epsilon``.
        delta: ``cap.delta - spent.delta``.
        rho: ``cap.rho - spent.rho``; None when the cap has no ρ or some charge has no ρ.
    """

    epsilon: Fraction
    delta: Fraction
    rho: Fraction | None

    @classmethod
    def of(cls, cap: Cap, spent: Spent) -> Remaining:
        """The budget left under ``cap`` after ``spent``."""
        rho = cap.rho - spent.rho if cap.rho is not None and spent.rho is not None else None
        return cls(epsilon=cap.epsilon - spent.epsilon, delta=cap.delta - spent.delta, rho=rho)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly view."""
        return _amounts(self.epsilon, self.delta, self.rho)


@dataclass(frozen=True, kw_only=True)
class ChargeReceipt:
    """A committed charge and the dataset's budget right after it.

    Attributes:
        charge: The charge.
        cap: The cap it was checked against.
        spent: Totals including this charge.
        remaining: Budget left after this charge.
    """

    charge: Charge
    cap: Cap
    spent: Spent
    remaining: Remaining

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly view (goes into the run manifest)."""
        return {
            **self.charge.as_dict(),
            "cap": self.cap.as_dict(),
            "spent": self.spent.as_dict(),
            "remaining": self.remaining.as_dict(),
        }


@dataclass(frozen=True, kw_only=True)
class DatasetBudget:
    """Everything the ledger knows about one dataset.

    Attributes:
        dataset_id: Dataset.
        cap: Current cap (None if never set).
        spent: Totals of all charges.
        remaining: Cap minus spent (None without a cap).
        charges: All charges, oldest first.
    """

    dataset_id: str
    cap: Cap | None
    spent: Spent
    remaining: Remaining | None
    charges: tuple[Charge, ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly view (what ``dqrelease budget show`` prints)."""
        return {
            "dataset_id": self.dataset_id,
            "cap": None if self.cap is None else self.cap.as_dict(),
            "spent": self.spent.as_dict(),
            "remaining": None if self.remaining is None else self.remaining.as_dict(),
            "charges": [charge.as_dict() for charge in self.charges],
        }


# ---------------------------------------------------------------------- the ledger
class Ledger:
    """Caps and charges of every dataset in one DuckDB file (opened per operation, never held open).

    Args:
        path: The DuckDB file; created (with its parent directory) on first use.
        lock_timeout: Seconds to keep retrying while another process holds the file (0: try once).
    """

    def __init__(self, path: Path | str, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> None:
        if not (lock_timeout >= 0 and math.isfinite(lock_timeout)):
            raise ConfigInvalidError(f"lock_timeout ({lock_timeout}) must be finite and >= 0")
        self.path = Path(path)
        self.lock_timeout = float(lock_timeout)

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r}, lock_timeout={self.lock_timeout:g})"

    # ------------------------------------------------------------------ caps
    def set_cap(self, dataset_id: str, *, epsilon: Amount, delta: Amount, rho: Amount | None = None) -> Cap:
        """Create or change the dataset's cap (appends a cap row; earlier caps stay in the history).

        A cap below what was already spent is allowed; every later charge is then refused until it is raised.

        Raises:
            ConfigInvalidError: If an amount is negative or not finite, or δ >= 1, or the id is invalid.
        """
        _check_dataset_id(dataset_id)
        amounts = _cap_amounts(epsilon, delta, rho)
        with self._transaction() as con:
            current = _current_caps(con, dataset_id)
            return _insert_cap(con, dataset_id, amounts, seq=current[0].seq + 1 if current else 1)

    def ensure_cap(self, dataset_id: str, *, epsilon: Amount, delta: Amount, rho: Amount | None = None) -> Cap:
        """Create the dataset's cap if it has none; an existing cap is returned unchanged.

        Raises:
            ConfigInvalidError: If an amount is invalid (checked even when the cap exists).
        """
        _check_dataset_id(dataset_id)
        amounts = _cap_amounts(epsilon, delta, rho)
        with self._transaction() as con:
            current = _current_caps(con, dataset_id)
            return current[0] if current else _insert_cap(con, dataset_id, amounts, seq=1)

    def cap(self, dataset_id: str) -> Cap | None:
        """The dataset's current cap, or None."""
        _check_dataset_id(dataset_id)
        with self._connection() as con:
            current = _current_caps(con, dataset_id)
        return current[0] if current else None

    # ------------------------------------------------------------------ charges
    def charge(
        self,
        dataset_id: str,
        *,
        epsilon: Amount,
        delta: Amount,
        rho: Amount | None,
        mode: str,
        mechanism: str,
        config_hash: str,
        run_id: str,
        note: str = "",
    ) -> ChargeReceipt:
        """Commit a charge if it fits the dataset's cap (one transaction); otherwise refuse it.

        Every call that returns charges: a retried run that calls again pays again (the ledger never
        deduplicates by run id, so one charge can never cover two executions of a mechanism).

        Args:
            dataset_id: Dataset to charge.
            epsilon: ε of the run (a float is taken at its exact binary value).
            delta: δ of the run.
            rho: zCDP ρ of the run, or None when its analysis has none.
            mode: Accounting mode of the amounts, ``"paper"`` or ``"tight"``.
            mechanism: Mechanism name.
            config_hash: Hash of the release config.
            run_id: Run identifier.
            note: Public note; must not contain private data.

        Returns:
            The receipt: the committed charge and the budget remaining after it.

        Raises:
            BudgetRefusedError: If the dataset has no cap or the charge does not fit (nothing is written).
            ConfigInvalidError: If an amount or a text field is invalid.
            LedgerLockedError: If the file stayed locked for ``lock_timeout`` seconds.
        """
        _check_dataset_id(dataset_id)
        request = _charge_amounts(epsilon, delta, rho)
        if mode not in ACCOUNTING_MODES:
            raise ConfigInvalidError(f"accounting mode {mode!r} must be one of {', '.join(ACCOUNTING_MODES)}")
        for name, value in (("mechanism", mechanism), ("config_hash", config_hash), ("run_id", run_id)):
            if not isinstance(value, str) or not value:
                raise ConfigInvalidError(f"{name} of a charge must be a non-empty string")
        if not isinstance(note, str):
            raise ConfigInvalidError("note of a charge must be a string")
        with self._transaction() as con:
            current = _current_caps(con, dataset_id)
            if not current:
                raise BudgetRefusedError(self._no_cap_message(dataset_id))
            cap = current[0]
            history = _charges(con, dataset_id)
            spent = _spent(dataset_id, history)
            refusals = _refusals(cap, spent, *request)
            if refusals:
                raise BudgetRefusedError(self._refusal_message(cap, spent, request, refusals))
            charge = Charge(
                dataset_id=dataset_id, seq=history[-1].seq + 1 if history else 1, run_id=run_id,
                charged_at=_utc_now(), config_hash=config_hash, mechanism=mechanism, mode=mode,
                epsilon=request[0], delta=request[1], rho=request[2], note=note,
            )
            con.execute(load_sql("ledger_charge_insert"), {
                "dataset_id": dataset_id, "seq": charge.seq, "run_id": run_id,
                "charged_at_utc": _naive_utc(charge.charged_at), "config_hash": config_hash,
                "mechanism": mechanism, "accounting_mode": mode, "note": note,
                **_amount_params(charge.epsilon, charge.delta, charge.rho),
            })
        after = _spent(dataset_id, [*history, charge])
        return ChargeReceipt(charge=charge, cap=cap, spent=after, remaining=Remaining.of(cap, after))

    # ------------------------------------------------------------------ reading
    def spent(self, dataset_id: str) -> Spent:
        """Exact totals of the dataset's charges (zero for an unknown dataset)."""
        _check_dataset_id(dataset_id)
        with self._connection() as con:
            return _spent(dataset_id, _charges(con, dataset_id))

    def budgets(self, dataset_id: str | None = None) -> list[DatasetBudget]:
        """Cap, totals, remaining budget and charges of one dataset or of all (empty list if unknown)."""
        if dataset_id is not None:
            _check_dataset_id(dataset_id)
        with self._connection() as con:
            caps = {cap.dataset_id: cap for cap in _current_caps(con, dataset_id)}
            charges = _charges(con, dataset_id)
        result = []
        for known in sorted(set(caps) | {charge.dataset_id for charge in charges}):
            own = tuple(charge for charge in charges if charge.dataset_id == known)
            cap, spent = caps.get(known), _spent(known, own)
            remaining = None if cap is None else Remaining.of(cap, spent)
            result.append(DatasetBudget(dataset_id=known, cap=cap, spent=spent, remaining=remaining, charges=own))
        return result

    def show(self, dataset_id: str | None = None) -> list[dict[str, Any]]:
        """JSON-friendly :meth:`budgets` for the CLI: caps, totals, remaining and charges."""
        return [budget.as_dict() for budget in self.budgets(dataset_id)]

    # ------------------------------------------------------------------ messages
    def _set_cap_command(self, dataset_id: str, rho: bool) -> str:
        return (
            f"`dqrelease budget set-cap {dataset_id} --epsilon E --delta D{' --rho R' if rho else ''} "
            f"--ledger {self.path}`"
        )

    def _no_cap_message(self, dataset_id: str) -> str:
        return (
            f"dataset {dataset_id!r} has no budget cap in ledger {self.path}; set one with "
            f"{self._set_cap_command(dataset_id, False)} or give ledger.initial_cap_epsilon and "
            "ledger.initial_cap_delta in the release config"
        )

    def _refusal_message(
        self, cap: Cap, spent: Spent, request: tuple[Fraction, Fraction, Fraction | None], refusals: list[str]
    ) -> str:
        epsilon, delta, rho = request
        remaining = Remaining.of(cap, spent)
        show_rho = cap.rho is not None
        parts = [
            f"budget refused for dataset {cap.dataset_id!r} ({', '.join(refusals)}): requested "
            f"{_describe(epsilon, delta, rho, show_rho)} but remaining is "
            f"{_describe(remaining.epsilon, remaining.delta, remaining.rho, show_rho)} "
            f"of the cap {_describe(cap.epsilon, cap.delta, cap.rho, show_rho)} after {spent.charges} charge(s)"
        ]
        if remaining.epsilon < 0 or remaining.delta < 0 or (remaining.rho is not None and remaining.rho < 0):
            parts.append("the cap is below what was already spent, so every charge is refused until it is raised")
        if "this charge has no rho" in refusals:
            parts.append('the cap has a rho: charge with privacy.accounting = "tight" (it reports rho)')
        if "an earlier charge has no rho" in refusals:
            parts.append(
                f"{spent.charges_without_rho} earlier charge(s) have no rho, so the rho cap refuses every "
                "charge: set the cap without --rho"
            )
        lower = [name for name, key in (("privacy.epsilon", "epsilon"), ("privacy.delta", "delta"))
                 if any(reason.startswith(key) for reason in refusals)]
        if any(reason.startswith("rho exceeds") for reason in refusals) and "privacy.epsilon" not in lower:
            lower.append("privacy.epsilon")
        fix = f"lower {' / '.join(lower)} or raise" if lower else "raise"
        parts.append(f"{fix} the cap with {self._set_cap_command(cap.dataset_id, show_rho)}")
        return "; ".join(parts)

    # ------------------------------------------------------------------ connections
    @contextmanager
    def _connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for one operation: per-file thread lock, file lock (retried), schema ready."""
        deadline = time.monotonic() + self.lock_timeout
        lock = _thread_lock(str(self.path.resolve()))
        if not (lock.acquire(timeout=self.lock_timeout) if self.lock_timeout > 0 else lock.acquire(blocking=False)):
            raise LedgerLockedError(self._locked_message(None))
        try:
            con = self._open(deadline)
            try:
                self._prepare(con)
                yield con
            finally:
                con.close()
        finally:
            lock.release()

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """:meth:`_connection` inside ``begin`` ... ``commit`` (rolled back on any exception)."""
        with self._connection() as con:
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

    def _open(self, deadline: float) -> duckdb.DuckDBPyConnection:
        """Connect read-write, retrying with jittered exponential backoff until ``deadline`` (monotonic)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        backoff = _FIRST_BACKOFF
        while True:
            try:
                return duckdb.connect(str(self.path))
            except duckdb.Error as error:
                if not (isinstance(error, duckdb.IOException) and _LOCK_ERROR in str(error)):
                    first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
                    raise LedgerError(f"cannot open ledger {self.path} ({first_line}); check ledger.path") from error
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LedgerLockedError(self._locked_message(str(error))) from error
                time.sleep(min(left, _JITTER.uniform(backoff / 2, backoff)))
                backoff = min(2 * backoff, _MAX_BACKOFF)

    def _locked_message(self, error: str | None) -> str:
        """Why the ledger could not be opened; ``error`` is DuckDB's lock error (None: a thread of ours)."""
        if error is None:
            by = "another thread of this process"
        else:
            holder = _LOCK_HOLDER.search(error)
            by = f"another process (PID {holder.group(1)})" if holder else "another process"
        return (
            f"ledger {self.path} is locked by {by}; retry later (waited {self.lock_timeout:g} s; "
            "a charge needs the file for a moment only, so close long-lived DuckDB sessions on it)"
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
            if version is None:
                con.execute(load_sql("ledger_schema"))
                applied = [SCHEMA_VERSION]
            else:
                applied = list(range(version + 1, SCHEMA_VERSION + 1))
                for target in applied:
                    con.execute(load_sql(_MIGRATIONS[target]))
            for target in applied:
                con.execute(load_sql("ledger_version_insert"), {"version": target, "applied_at_utc": _naive_utc()})
            con.execute("commit")
        except BaseException:
            with suppress(duckdb.Error):
                con.execute("rollback")
            raise


# ---------------------------------------------------------------------- composition rule
def _refusals(cap: Cap, spent: Spent, epsilon: Fraction, delta: Fraction, rho: Fraction | None) -> list[str]:
    """Why a charge does not fit (empty list: it fits). Exact comparisons; landing on the cap is allowed."""
    reasons = []
    if spent.epsilon + epsilon > cap.epsilon:
        reasons.append("epsilon exceeds the cap")
    if spent.delta + delta > cap.delta:
        reasons.append("delta exceeds the cap")
    if cap.rho is not None:
        if rho is None:
            reasons.append("this charge has no rho")
        if spent.rho is None:
            reasons.append("an earlier charge has no rho")
        if rho is not None and spent.rho is not None and spent.rho + rho > cap.rho:
            reasons.append("rho exceeds the cap")
    return reasons


def _spent(dataset_id: str, charges: list[Charge] | tuple[Charge, ...]) -> Spent:
    without_rho = sum(1 for charge in charges if charge.rho is None)
    return Spent(
        dataset_id=dataset_id,
        charges=len(charges),
        epsilon=sum((charge.epsilon for charge in charges), Fraction(0)),
        delta=sum((charge.delta for charge in charges), Fraction(0)),
        rho=None if without_rho else sum((charge.rho for charge in charges if charge.rho is not None), Fraction(0)),
        charges_without_rho=without_rho,
    )


# ---------------------------------------------------------------------- amounts
def _exact(name: str, value: Amount) -> Fraction:
    """The exact value of an amount: floats by their binary value (never rounded), strings parsed exactly."""
    if isinstance(value, bool) or not isinstance(value, Real | Decimal | str):
        raise ConfigInvalidError(f"{name} ({value!r}) must be a number")
    try:
        if isinstance(value, str):
            exact = Fraction(value.strip())
        elif isinstance(value, Fraction | int | float | Decimal):
            exact = Fraction(value)
        else:  # other real types (numpy scalars): float() is exact for float32/float64
            exact = Fraction(float(value))
    except (ValueError, OverflowError, ZeroDivisionError) as error:
        raise ConfigInvalidError(f"{name} ({value!r}) must be a finite number") from error
    if exact < 0:
        raise ConfigInvalidError(f"{name} ({value}) must be >= 0")
    return exact


def _cap_amounts(epsilon: Amount, delta: Amount, rho: Amount | None) -> tuple[Fraction, Fraction, Fraction | None]:
    amounts = (_exact("epsilon", epsilon), _exact("delta", delta), None if rho is None else _exact("rho", rho))
    if amounts[1] >= 1:
        raise ConfigInvalidError(f"delta cap ({delta}) must be < 1")
    return amounts


def _charge_amounts(epsilon: Amount, delta: Amount, rho: Amount | None) -> tuple[Fraction, Fraction, Fraction | None]:
    amounts = (_exact("epsilon", epsilon), _exact("delta", delta), None if rho is None else _exact("rho", rho))
    if amounts[1] >= 1:
        raise ConfigInvalidError(f"delta of a charge ({delta}) must be < 1")
    return amounts


def _amount_params(epsilon: Fraction, delta: Fraction, rho: Fraction | None) -> dict[str, Any]:
    return {
        "epsilon_exact": str(epsilon), "delta_exact": str(delta), "rho_exact": None if rho is None else str(rho),
        "epsilon": float(epsilon), "delta": float(delta), "rho": None if rho is None else float(rho),
    }


def _amounts(epsilon: Fraction, delta: Fraction, rho: Fraction | None) -> dict[str, Any]:
    return {
        "epsilon": float(epsilon),
        "delta": float(delta),
        "rho": None if rho is None else float(rho),
        "exact": {"epsilon": str(epsilon), "delta": str(delta), "rho": None if rho is None else str(rho)},
    }


def _number(value: Fraction | None) -> str:
    """Short readable form: integers as such, else the shortest float repr (the comparison stays exact)."""
    if value is None:
        return "n/a"
    return str(value.numerator) if value.denominator == 1 else repr(float(value))


def _describe(epsilon: Fraction, delta: Fraction, rho: Fraction | None, show_rho: bool) -> str:
    text = f"epsilon={_number(epsilon)}, delta={_number(delta)}"
    return f"{text}, rho={_number(rho)}" if show_rho else text


# ---------------------------------------------------------------------- sql and rows
def _current_caps(con: duckdb.DuckDBPyConnection, dataset_id: str | None) -> list[Cap]:
    rows = con.execute(load_sql("ledger_caps_current"), {"dataset_id": dataset_id}).fetchall()
    return [
        Cap(
            dataset_id=row[0], seq=row[1], set_at=row[2].replace(tzinfo=UTC), epsilon=Fraction(row[3]),
            delta=Fraction(row[4]), rho=None if row[5] is None else Fraction(row[5]),
        )
        for row in rows
    ]


def _charges(con: duckdb.DuckDBPyConnection, dataset_id: str | None) -> list[Charge]:
    rows = con.execute(load_sql("ledger_charges_select"), {"dataset_id": dataset_id}).fetchall()
    return [
        Charge(
            dataset_id=row[0], seq=row[1], run_id=row[2], charged_at=row[3].replace(tzinfo=UTC), config_hash=row[4],
            mechanism=row[5], mode=row[6], epsilon=Fraction(row[7]), delta=Fraction(row[8]),
            rho=None if row[9] is None else Fraction(row[9]), note=row[10],
        )
        for row in rows
    ]


def _insert_cap(
    con: duckdb.DuckDBPyConnection, dataset_id: str, amounts: tuple[Fraction, Fraction, Fraction | None], *, seq: int
) -> Cap:
    cap = Cap(dataset_id=dataset_id, epsilon=amounts[0], delta=amounts[1], rho=amounts[2], set_at=_utc_now(), seq=seq)
    con.execute(load_sql("ledger_cap_insert"), {
        "dataset_id": dataset_id, "seq": seq, "set_at_utc": _naive_utc(cap.set_at), **_amount_params(*amounts),
    })
    return cap


def _check_dataset_id(dataset_id: str) -> None:
    if not isinstance(dataset_id, str) or not _DATASET_ID.match(dataset_id):
        raise ConfigInvalidError(
            f"dataset id {dataset_id!r} must be non-empty and use only letters, digits, '_', '.' and '-'"
        )


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _naive_utc(moment: datetime | None = None) -> datetime:
    """UTC wall time without tzinfo, as stored in the TIMESTAMP columns."""
    return (moment or _utc_now()).astimezone(UTC).replace(tzinfo=None)


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def _thread_lock(key: str) -> threading.Lock:
    """One lock per ledger file for the threads of this process (they share DuckDB's database instance)."""
    with _THREAD_LOCKS_GUARD:
        return _THREAD_LOCKS.setdefault(key, threading.Lock())
