"""``mechanism.name = "auto"``: the mechanism the benchmarks show best for the table's public shape.

The choice is the rule table of :mod:`dqrelease.mechanisms.choice` (public quantities only). The plan of ``auto``
is the chosen mechanism's plan with its default keys (``ReleasePlan.mechanism`` is the chosen name) and a note
saying which rule chose it and why. ``auto`` needs a declared ``privacy.n``: the forecast and the choice are made
before the data is read.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from pydantic import BaseModel

from dqrelease.mechanisms.base import Mechanism, MechanismKeys, PlanInputs, ReleasePlan, RunInputs
from dqrelease.mechanisms.choice import WIDE_COLUMNS, AutoRule, choose
from dqrelease.mechanisms.dispatch import plan_mechanism
from dqrelease.mechanisms.independent import IndependentKeys
from dqrelease.mechanisms.registry import mechanism
from dqrelease.mechanisms.utility import forecast_plan, forecast_shape, independent_baseline

__all__ = ["AUTO", "AutoKeys", "chosen_keys"]


class AutoKeys(MechanismKeys):
    """``[mechanism]`` of ``name = "auto"`` (no other key: the chosen mechanism's defaults apply)."""

    name: Literal["auto"] = "auto"

    def check_release(self, *, privacy, output) -> None:
        """The choice and the forecast are made before the data is read: a target ε is required."""
        if privacy.epsilon is None:
            raise ValueError("mechanism 'auto' needs privacy.epsilon (every mechanism it chooses from is calibrated "
                             "to it)")


def chosen_keys(rule: AutoRule) -> BaseModel:
    """The chosen mechanism's keys model with the rule's keys."""
    return mechanism(rule.mechanism).keys(**rule.keys)


def _plan(keys: AutoKeys, inputs: PlanInputs) -> ReleasePlan:
    rule = choose(inputs)
    planned = plan_mechanism(chosen_keys(rule), inputs)
    shape = forecast_shape(inputs)
    baseline = independent_baseline(planned, shape)
    predicted = forecast_plan(planned, shape)
    if baseline is not None and predicted is not None:
        from dq_engine.evaluation.forecast import headline

        mine, theirs = headline(predicted), headline(baseline)
        if theirs <= mine:
            independent = plan_mechanism(IndependentKeys(), inputs)
            note = (f"auto chose independent columns: their forecast ({theirs:.3g}, the larger of worst one-way cell "
                    f"and workload max) is below {rule.mechanism}'s ({mine:.3g}) at this n and epsilon; the rule "
                    f"table would have chosen {rule.mechanism} ({rule.regime})")
            return dataclasses.replace(independent, notes=[note, *independent.notes])
    note = f"auto chose {rule.mechanism} ({rule.regime}): {rule.why}"
    return dataclasses.replace(planned, notes=[note, *planned.notes])


def _run(plan: ReleasePlan, inputs: RunInputs):  # pragma: no cover - plans of auto name the chosen mechanism
    raise RuntimeError("an auto plan names the chosen mechanism; run that one")


AUTO = Mechanism(
    name="auto",
    summary=(
        "chooses the mechanism the benchmarks show best for the schema's public shape (MWEM on particles; "
        f"DualQuery above {WIDE_COLUMNS} columns); `dqrelease plan` says which and why"
    ),
    reference="docs/benchmarks.md ('Mechanisms', 'Sparse data', 'Forecast')",
    keys=AutoKeys, plan=_plan, run=_run, needs_public_n=True, enforces_constraints=True,
)
