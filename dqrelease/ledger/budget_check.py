"""The budget check before a run reads its data: does the ledger's remaining budget pay for the plan?

With a public ``n`` a release's cost is known before a row is read, so ``dqrelease run`` (before Prefect starts) and
the release flow (before its ingest) refuse a plan the dataset's remaining budget cannot pay. Nothing is written: the
charge itself is made after the validation (:func:`dqrelease.tasks.privacy.charge_budget`), and the ledger checks
again in that transaction (another run may have charged meanwhile).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dqrelease.ledger import Ledger, ledger_file_errors
from dqrelease.plan import ledger_amounts

if TYPE_CHECKING:
    from dqrelease.inputs.config import ReleaseConfig
    from dqrelease.mechanisms import ReleasePlan

__all__ = ["check_budget"]


def check_budget(config: ReleaseConfig, plan: ReleasePlan) -> None:
    """Refuse ``plan`` when its charge (:func:`~dqrelease.plan.ledger_amounts`) does not fit the remaining budget.

    A dataset without a cap is checked against the config's ``ledger.initial_cap_*`` (the cap the run would set).

    Raises:
        BudgetRefusedError: The charge's one-line refusal (exit code 4), as the ledger's charge gives it.
        LedgerError: The ledger file cannot be read.
    """
    epsilon, delta, rho = ledger_amounts(plan)
    settings = config.ledger
    initial = None if settings.initial_cap_epsilon is None else (settings.initial_cap_epsilon,
                                                                  settings.initial_cap_delta)
    with ledger_file_errors(settings.path):
        Ledger.of(settings).check_charge(settings.dataset_id, epsilon=epsilon, delta=delta, rho=rho,
                                           initial_cap=initial)
