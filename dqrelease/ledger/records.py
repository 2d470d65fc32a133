"""The ledger's records: caps, charges, totals, receipts, and the exact amounts they hold.

Every ε, δ, ρ in these records is a :class:`fractions.Fraction`: a float is taken at its exact binary value
(``Fraction(0.1) = 3602879701896397/2**55``; never rounded), a string is parsed exactly. ``as_dict`` views
give floats for reading plus the exact rationals as strings under ``exact`` (what ``budget show --json`` and
the run manifests contain).

The composition rule that compares these records lives in :mod:`dqrelease.ledger.composition`; how they are stored
in :mod:`dqrelease.ledger.store`; the operations on them in :class:`dqrelease.ledger.Ledger`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from numbers import Real
from typing import Any

from dqrelease.errors import ConfigInvalidError

__all__ = [
    "Amount",
    "Cap",
    "Charge",
    "ChargeReceipt",
    "DatasetBudget",
    "Remaining",
    "Spent",
    "amounts_view",
    "cap_amounts",
    "charge_amounts",
    "exact_amount",
    "float_at_least",
]

Amount = float | int | Fraction | Decimal | str
"""A privacy amount: a float (taken at its exact binary value), an exact number, or a decimal/ratio string."""


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
        return {**amounts_view(self.epsilon, self.delta, self.rho), "set_at": self.set_at.isoformat(), "seq": self.seq}


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
            **amounts_view(self.epsilon, self.delta, self.rho),
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

    @classmethod
    def of(cls, dataset_id: str, charges: list[Charge] | tuple[Charge, ...]) -> Spent:
        """The exact totals of ``charges`` (all of ``dataset_id``)."""
        without_rho = sum(1 for charge in charges if charge.rho is None)
        return cls(
            dataset_id=dataset_id,
            charges=len(charges),
            epsilon=sum((charge.epsilon for charge in charges), Fraction(0)),
            delta=sum((charge.delta for charge in charges), Fraction(0)),
            rho=None if without_rho else sum((charge.rho for charge in charges if charge.rho is not None), Fraction(0)),
            charges_without_rho=without_rho,
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly view."""
        return {
            "charges": self.charges,
            **amounts_view(self.epsilon, self.delta, self.rho),
            "charges_without_rho": self.charges_without_rho,
        }


@dataclass(frozen=True, kw_only=True)
class Remaining:
    """Cap minus spent (exact).

    Never negative in a ledger written since ``set_cap`` refuses a cap below what was spent; an older ledger may
    hold such a cap (then every charge is refused until it is raised).

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
        return amounts_view(self.epsilon, self.delta, self.rho)


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
        """JSON-friendly view (what ``dqrelease budget show --json`` prints)."""
        return {
            "dataset_id": self.dataset_id,
            "cap": None if self.cap is None else self.cap.as_dict(),
            "spent": self.spent.as_dict(),
            "remaining": None if self.remaining is None else self.remaining.as_dict(),
            "charges": [charge.as_dict() for charge in self.charges],
        }


# ---------------------------------------------------------------------- amounts
def exact_amount(name: str, value: Amount) -> Fraction:
    """The exact value of an amount: floats by their binary value (never rounded), strings parsed exactly.

    Raises:
        ConfigInvalidError: If ``value`` is not a number, not finite, or negative.
    """
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


def _exact_amounts(
    epsilon: Amount, delta: Amount, rho: Amount | None, *, delta_name: str
) -> tuple[Fraction, Fraction, Fraction | None]:
    """The exact (ε, δ, ρ) of a cap or a charge; δ < 1 (``delta_name`` names it in the message)."""
    amounts = (exact_amount("epsilon", epsilon), exact_amount("delta", delta),
               None if rho is None else exact_amount("rho", rho))
    if amounts[1] >= 1:
        raise ConfigInvalidError(f"{delta_name} ({delta}) must be < 1")
    return amounts


def cap_amounts(epsilon: Amount, delta: Amount, rho: Amount | None) -> tuple[Fraction, Fraction, Fraction | None]:
    """The exact (ε, δ, ρ) of a cap (δ < 1)."""
    return _exact_amounts(epsilon, delta, rho, delta_name="delta cap")


def charge_amounts(epsilon: Amount, delta: Amount, rho: Amount | None) -> tuple[Fraction, Fraction, Fraction | None]:
    """The exact (ε, δ, ρ) of a charge (δ < 1)."""
    return _exact_amounts(epsilon, delta, rho, delta_name="delta of a charge")


def amounts_view(epsilon: Fraction, delta: Fraction, rho: Fraction | None) -> dict[str, Any]:
    """Floats for reading plus the exact rationals as strings under ``exact``."""
    return {
        "epsilon": float(epsilon),
        "delta": float(delta),
        "rho": None if rho is None else float(rho),
        "exact": {"epsilon": str(epsilon), "delta": str(delta), "rho": None if rho is None else str(rho)},
    }


def float_at_least(amount: Fraction) -> float:
    """The smallest float not below an exact ledger amount (``float()`` rounds to nearest, possibly below it)."""
    value = float(amount)
    return math.nextafter(value, math.inf) if Fraction(value) < amount else value
