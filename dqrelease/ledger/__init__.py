"""The persistent privacy-budget ledger: per-dataset caps and append-only charges in a DuckDB file.

Concept. Every release of a dataset is paid for by one *charge* committed before the mechanism reads the
private data. A charge is an immutable event (run id, UTC time, config hash, mechanism, accounting mode,
ε, δ, optional ρ, public note); it is never refunded, updated or deleted, and this module has no API that
could. Each dataset has a *cap* (ε, δ) and optionally a zCDP cap ρ; changing a cap appends a new cap row,
so the history of caps is kept too. A seeded run's charges also record a keyed hash of its seed, and a seed that
another run charged to the dataset is refused (the same seed on changed data would draw the same noise).
``docs/ledger.md`` explains composition across runs, seeds and locking.

One concept per module:

* :class:`Ledger` (here): the operations, each one transaction on the file: set or ensure a cap, charge,
  read totals and budgets.
* :mod:`dqrelease.ledger.records`: the records (:class:`Cap`, :class:`Charge`, :class:`Spent`,
  :class:`Remaining`, :class:`ChargeReceipt`, :class:`DatasetBudget`) and their exact amounts.
* :mod:`dqrelease.ledger.composition`: the composition rule that refuses a charge, and the refusal messages.
* :mod:`dqrelease.ledger.store`: the DuckDB file: connections, process and thread locking, transactions,
  schema versions and migrations, rows in and out.
* :mod:`dqrelease.ledger.budget_check`: whether the remaining budget pays for a release's plan, checked before the
  run reads its data (:meth:`Ledger.check_charge`, read-only).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from dqrelease.errors import BudgetRefusedError, ConfigInvalidError, LedgerError, LedgerLockedError
from dqrelease.ledger import store
from dqrelease.ledger.composition import (
    cap_below_spent_message,
    no_cap_message,
    refusal_message,
    refusals,
    seed_reuse_message,
)
from dqrelease.ledger.records import (
    Amount,
    Cap,
    Charge,
    ChargeReceipt,
    DatasetBudget,
    Remaining,
    Spent,
    cap_amounts,
    charge_amounts,
)
from dqrelease.ledger.store import DEFAULT_LOCK_TIMEOUT, SCHEMA_VERSION

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
    "ledger_file_errors",
]

ACCOUNTING_MODES = ("paper", "tight")
"""Accounting modes a charge may record (see :mod:`dq_engine.privacy.accounting`)."""

_DATASET_ID = re.compile(r"^[A-Za-z0-9_.\-]+$")


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
        self._file = store.LedgerFile(self.path, self.lock_timeout)

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r}, lock_timeout={self.lock_timeout:g})"

    @classmethod
    def of(cls, settings: Any) -> Ledger:
        """The ledger a release config's ``[ledger]`` section names (its ``path`` and ``lock_timeout``)."""
        timeout = settings.lock_timeout
        return cls(settings.path, lock_timeout=DEFAULT_LOCK_TIMEOUT if timeout is None else timeout)

    # ------------------------------------------------------------------ caps
    def set_cap(self, dataset_id: str, *, epsilon: Amount, delta: Amount, rho: Amount | None = None) -> Cap:
        """Create or change the dataset's cap (appends a cap row; earlier caps stay in the history).

        A cap below what the dataset's charges already spent (in ε, δ or ρ) is refused: charges are never refunded,
        so it could only refuse every later charge. A cap equal to what was spent stops further releases.

        Raises:
            ConfigInvalidError: If an amount is negative or not finite, or δ >= 1, or the id is invalid, or the cap is
                below what was spent (the message names both and the least cap allowed).
        """
        _check_dataset_id(dataset_id)
        amounts = cap_amounts(epsilon, delta, rho)
        with self._file.transaction() as con:
            below = cap_below_spent_message(dataset_id, amounts, Spent.of(dataset_id, store.charges(con, dataset_id)))
            if below is not None:
                raise ConfigInvalidError(below)
            current = store.current_caps(con, dataset_id)
            return store.insert_cap(con, dataset_id, amounts, seq=current[0].seq + 1 if current else 1)

    def ensure_cap(self, dataset_id: str, *, epsilon: Amount, delta: Amount, rho: Amount | None = None) -> Cap:
        """Create the dataset's cap if it has none; an existing cap is returned unchanged.

        Raises:
            ConfigInvalidError: If an amount is invalid (checked even when the cap exists).
        """
        _check_dataset_id(dataset_id)
        amounts = cap_amounts(epsilon, delta, rho)
        with self._file.transaction() as con:
            current = store.current_caps(con, dataset_id)
            return current[0] if current else store.insert_cap(con, dataset_id, amounts, seq=1)

    def cap(self, dataset_id: str) -> Cap | None:
        """The dataset's current cap, or None."""
        _check_dataset_id(dataset_id)
        with self._file.connection() as con:
            current = store.current_caps(con, dataset_id)
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
        seed: int | None = None,
    ) -> ChargeReceipt:
        """Commit a charge if it fits the dataset's cap (one transaction); otherwise refuse it.

        Every call that returns charges: a retried run that calls again pays again (the ledger never
        deduplicates by run id, so one charge can never cover two executions of a mechanism).

        A seeded run gives its ``seed``: the charge is refused (before the cap is read) when another run already
        charged the dataset with that seed; otherwise the seed's keyed hash is recorded with the run id, once per
        run (a noisy count and the release it plans are two charges of one run, with one seed).

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
            seed: The run's seed when it is seeded (``run.seed``), None for a secure run (its seed is never kept).

        Returns:
            The receipt: the committed charge and the budget remaining after it.

        Raises:
            BudgetRefusedError: If the dataset has no cap or the charge does not fit (nothing is written).
            ConfigInvalidError: If an amount or a text field is invalid, or another run charged ``seed`` to the
                dataset (nothing is written).
            LedgerLockedError: If the file stayed locked for ``lock_timeout`` seconds.
        """
        _check_dataset_id(dataset_id)
        request = charge_amounts(epsilon, delta, rho)
        if mode not in ACCOUNTING_MODES:
            raise ConfigInvalidError(f"accounting mode {mode!r} must be one of {', '.join(ACCOUNTING_MODES)}")
        for name, value in (("mechanism", mechanism), ("config_hash", config_hash), ("run_id", run_id)):
            if not isinstance(value, str) or not value:
                raise ConfigInvalidError(f"{name} of a charge must be a non-empty string")
        if not isinstance(note, str):
            raise ConfigInvalidError("note of a charge must be a string")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ConfigInvalidError("seed of a charge must be a non-negative integer or None")
        with self._file.transaction() as con:
            digest = None if seed is None else store.seed_digest(con, dataset_id, seed, create_key=True)
            seed_runs = [] if digest is None else store.seed_runs(con, dataset_id, digest)
            if any(other != run_id for other in seed_runs):
                raise ConfigInvalidError(seed_reuse_message(dataset_id, self.path))
            current = store.current_caps(con, dataset_id)
            if not current:
                raise BudgetRefusedError(no_cap_message(dataset_id, self.path))
            cap = current[0]
            history = store.charges(con, dataset_id)
            spent = Spent.of(dataset_id, history)
            reasons = refusals(cap, spent, *request)
            if reasons:
                raise BudgetRefusedError(refusal_message(cap, spent, request, reasons, self.path))
            charge = Charge(
                dataset_id=dataset_id, seq=history[-1].seq + 1 if history else 1, run_id=run_id,
                charged_at=store.utc_now(), config_hash=config_hash, mechanism=mechanism, mode=mode,
                epsilon=request[0], delta=request[1], rho=request[2], note=note,
            )
            store.insert_charge(con, charge)
            if digest is not None and not seed_runs:
                store.insert_seed(con, dataset_id, digest, run_id=run_id, charge_seq=charge.seq)
        after = Spent.of(dataset_id, [*history, charge])
        return ChargeReceipt(charge=charge, cap=cap, spent=after, remaining=Remaining.of(cap, after))

    def check_charge(
        self,
        dataset_id: str,
        *,
        epsilon: Amount,
        delta: Amount,
        rho: Amount | None,
        initial_cap: tuple[Amount, Amount] | None = None,
    ) -> None:
        """Refuse, reading only, a charge that :meth:`charge` would refuse now (before anything is read or charged).

        The same rule and message as :meth:`charge`; nothing is written (a ledger file that does not exist yet is
        not created). :meth:`charge` checks again in its transaction, so a charge committed meanwhile by another
        run is still caught there.

        Args:
            dataset_id: Dataset to charge.
            epsilon: ε of the planned charge.
            delta: δ of the planned charge.
            rho: ρ of the planned charge, or None.
            initial_cap: ``(ε, δ)`` the run would set as the cap when the dataset has none (the release config's
                ``ledger.initial_cap_*``), or None.

        Raises:
            BudgetRefusedError: The dataset has no cap (and no ``initial_cap``), or the charge does not fit.
        """
        _check_dataset_id(dataset_id)
        request = charge_amounts(epsilon, delta, rho)
        current: list[Cap] = []
        history: list[Charge] = []
        if self.path.exists():
            with self._file.connection(reading=True) as con:
                current = store.current_caps(con, dataset_id)
                history = store.charges(con, dataset_id)
        if current:
            cap = current[0]
        elif initial_cap is not None:
            amounts = cap_amounts(*initial_cap, None)
            cap = Cap(dataset_id=dataset_id, seq=0, set_at=store.utc_now(), epsilon=amounts[0], delta=amounts[1],
                      rho=None)
        else:
            raise BudgetRefusedError(no_cap_message(dataset_id, self.path))
        spent = Spent.of(dataset_id, history)
        reasons = refusals(cap, spent, *request)
        if reasons:
            raise BudgetRefusedError(refusal_message(cap, spent, request, reasons, self.path))

    def check_seed(self, dataset_id: str, seed: int) -> None:
        """Refuse ``seed`` if a run already charged the dataset with it (before anything is read or charged).

        :meth:`charge` checks again in its transaction; this check lets a run stop before it reads the data. A
        ledger file that does not exist yet holds no seed (and is not created).

        Raises:
            ConfigInvalidError: Another run charged the dataset with ``seed``.
        """
        _check_dataset_id(dataset_id)
        if not self.path.exists():
            return
        with self._file.connection(reading=True) as con:
            digest = store.seed_digest(con, dataset_id, seed, create_key=False)
            if digest is not None and store.seed_runs(con, dataset_id, digest):
                raise ConfigInvalidError(seed_reuse_message(dataset_id, self.path))

    # ------------------------------------------------------------------ reading
    def spent(self, dataset_id: str) -> Spent:
        """Exact totals of the dataset's charges (zero for an unknown dataset)."""
        _check_dataset_id(dataset_id)
        with self._file.connection() as con:
            return Spent.of(dataset_id, store.charges(con, dataset_id))

    def budgets(self, dataset_id: str | None = None) -> list[DatasetBudget]:
        """Cap, totals, remaining budget and charges of one dataset or of all (empty list if unknown)."""
        if dataset_id is not None:
            _check_dataset_id(dataset_id)
        with self._file.connection(reading=True) as con:
            caps = {cap.dataset_id: cap for cap in store.current_caps(con, dataset_id)}
            charges = store.charges(con, dataset_id)
        result = []
        for known in sorted(set(caps) | {charge.dataset_id for charge in charges}):
            own = tuple(charge for charge in charges if charge.dataset_id == known)
            cap, spent = caps.get(known), Spent.of(known, own)
            remaining = None if cap is None else Remaining.of(cap, spent)
            result.append(DatasetBudget(dataset_id=known, cap=cap, spent=spent, remaining=remaining, charges=own))
        return result

    def show(self, dataset_id: str | None = None) -> list[dict[str, Any]]:
        """JSON-friendly :meth:`budgets`: caps, totals, remaining and charges (``budget show --json``)."""
        return [budget.as_dict() for budget in self.budgets(dataset_id)]


@contextmanager
def ledger_file_errors(path: Path) -> Iterator[None]:
    """A DuckDB error of the ledger file ``path`` (truncated, not a database) as a :class:`LedgerError` naming it."""
    try:
        yield
    except duckdb.Error as error:
        raise LedgerError(
            f"ledger {path} cannot be read ({type(error).__name__}: the file is damaged, e.g. "
            "truncated, or is not a dqrelease ledger); restore it from a backup or fix ledger.path"
        ) from None


def _check_dataset_id(dataset_id: str) -> None:
    if not isinstance(dataset_id, str) or not _DATASET_ID.match(dataset_id):
        raise ConfigInvalidError(
            f"dataset id {dataset_id!r} must be non-empty and use only letters, digits, '_', '.' and '-'"
        )
