"""Permission to run mechanisms on private data: a budget the mechanisms spend before they read it.

Every entry point of the engine that runs a mechanism on private data (DualQuery, DQRS, FEM, sepFEM, MWEM,
randomized response, DualQuery over parities, the table fit) takes a :class:`PrivacyGrant` and spends the events
it is about to produce on it *before* it reads the data: a grant that does not cover them refuses the run, so no
public function of the engine runs a mechanism without a budget that pays for it (``tests/privacy/test_doors.py``
tries every one).

A grant holds a budget ``(ε, δ)`` in one accounting mode and the events spent on it so far. :meth:`spend` composes
*all* events spent on the grant, the new ones included, and refuses when the smallest valid bound of that mode
exceeds the budget. Every analysis of :func:`~dq_engine.privacy.accounting.mode_costs` is a valid bound in its mode
(the papers' own, zCDP, basic composition), so the check never refuses a run its own accounting would allow, and
runs that share one grant (a mechanism and its table fit) are composed exactly, not added.

Who makes grants:

* the release pipeline, only after its ledger committed the charge (``dqrelease.ledger.grants``), with the charged
  amounts (rounded up), so a grant cannot be spent twice beyond what the ledger holds;
* a library user or a benchmark, who states the budget it is willing to spend (``PrivacyGrant(epsilon=1.0,
  delta=1e-9, purpose="benchmark on public data")``): that is the user's own accountant, as in diffprivlib's
  ``BudgetAccountant``. The grant records its purpose; the pipeline never accepts one it did not issue.

Messages name the mechanism and the public budget, never a value computed from the data.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from dq_engine.errors import BudgetExceededError, ConfigError
from dq_engine.privacy.accounting import AccountingMode, PrivacyEvent, mode_costs

__all__ = ["PrivacyGrant", "require_grant"]

_ANALYSES = (
    {"paper_analysis": "zcdp", "pure_when_smaller": True},
    {"paper_analysis": "advanced_composition", "pure_when_smaller": True},
    {"paper_analysis": "basic_composition", "pure_when_smaller": True},
)
"""The analyses a grant tries: each is a valid bound in its mode, so the smallest is too."""


class PrivacyGrant:
    """A privacy budget that mechanisms spend before they read private data.

    Args:
        epsilon: ε of the budget (> 0).
        delta: δ of the budget, in ``[0, 1)``; every spend is composed at this δ.
        mode: Accounting mode the budget is stated in (``"tight"`` or ``"paper"``).
        purpose: Who issued it and why (a ledger charge, a benchmark): recorded, shown in refusals.
    """

    def __init__(self, *, epsilon: float, delta: float, mode: AccountingMode = "tight", purpose: str) -> None:
        if not epsilon > 0 or epsilon != epsilon:
            raise ConfigError(f"a privacy grant's epsilon ({epsilon}) must be > 0")
        if not 0 <= delta < 1:
            raise ConfigError(f"a privacy grant's delta ({delta}) must be in [0, 1)")
        if mode not in ("tight", "paper"):
            raise ConfigError(f"a privacy grant's mode ({mode!r}) must be 'tight' or 'paper'")
        if not purpose:
            raise ConfigError("a privacy grant needs a purpose (who issued it, e.g. 'ledger charge uci-adult#3')")
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.mode: AccountingMode = mode
        self.purpose = purpose
        self._spent: list[PrivacyEvent] = []
        self._lock = threading.Lock()

    @property
    def spent(self) -> tuple[PrivacyEvent, ...]:
        """Every event spent on the grant so far, in order."""
        return tuple(self._spent)

    def cost(self, events: Sequence[PrivacyEvent]) -> tuple[float, float]:
        """``(ε, δ)`` of ``events`` in the grant's mode: the smallest valid bound, composed at the grant's δ."""
        if not events:
            return 0.0, 0.0
        delta = self.delta if self.delta > 0 else 1e-300  # a pure budget: only pure bounds can fit (δ = 0 below)
        bounds = [mode_costs(list(events), delta, **analysis)[self.mode] for analysis in _ANALYSES]
        best = min(bounds, key=lambda cost: (cost.delta > self.delta, cost.epsilon))
        return best.epsilon, best.delta

    def spend(self, events: Sequence[PrivacyEvent], *, mechanism: str) -> None:
        """Spend ``events`` before ``mechanism`` reads private data.

        Raises:
            BudgetExceededError: The events spent so far and these together cost more than the budget.
        """
        with self._lock:
            combined = [*self._spent, *events]
            epsilon, delta = self.cost(combined)
            if epsilon > self.epsilon or delta > self.delta:
                raise BudgetExceededError(
                    f"{mechanism} would spend epsilon = {epsilon:.6g}, delta = {delta:.3g} in {self.mode} accounting "
                    f"(with what was spent before), more than its grant ({self.purpose}: epsilon = "
                    f"{self.epsilon:.6g}, delta = {self.delta:.3g}); plan the run again and charge its cost"
                )
            self._spent.extend(events)

    def __getstate__(self) -> dict:
        """Pickled (e.g. to a Dask worker) with what was spent so far; the lock is made anew on the other side."""
        with self._lock:
            state = dict(self.__dict__)
            state["_spent"] = list(self._spent)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"PrivacyGrant(epsilon={self.epsilon!r}, delta={self.delta!r}, mode={self.mode!r}, "
            f"purpose={self.purpose!r}, spent={len(self._spent)} events)"
        )


def require_grant(grant: object, *, mechanism: str) -> PrivacyGrant:
    """``grant`` itself, checked to be a :class:`PrivacyGrant` (a mechanism's first step).

    Raises:
        BudgetExceededError: ``grant`` is missing or of another type (nothing pays for the run).
    """
    if not isinstance(grant, PrivacyGrant):
        raise BudgetExceededError(
            f"{mechanism} runs on private data only with a PrivacyGrant that pays for it, not "
            f"{type(grant).__name__}: pass grant=PrivacyGrant(epsilon=..., delta=..., purpose=...) (the release "
            "pipeline issues one after its ledger charge)"
        )
    return grant
