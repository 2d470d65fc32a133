"""``mechanism.name = "auto"``: the mechanism the benchmarks show best for the table's public shape.

The choice is a small rule table (:data:`AUTO_RULES`) over public quantities only -- the number of columns
and of one-hot bits of the schema -- derived from the measurements in docs/benchmarks.md:

* **wide schemas** (more than :data:`WIDE_COLUMNS` columns, e.g. BMS-WebView's 497 and 3,340 item columns):
  DualQuery with the paper's rule for sparse data (η = 2, untouched attributes 0) and its raw records. MWEM on
  particles and the table fit hold 200,000 particles of every column (1.6 MB per column as codes, 0.8 GB at 500
  columns, and their MWEM replays grow with the columns), and a pairwise-marginal synthesizer (MST) did not
  finish BMS-WebView-1's edge selection in 40 minutes ("Sparse data (BMS-WebView)"); DualQuery ran both within
  40 s per release ("Sparse data").
* **otherwise**: MWEM on particles, the lowest workload max error of every default mechanism on ADULT at every
  ε ("Mechanisms": 0.065 at ε = 0.1, 0.015 at ε = 1, against 0.14-0.71 for the others' raw records), and the
  best-forecast mechanism of the registry (it spends the whole ρ on the measurements that the table fit of
  DualQuery, DQRS, FEM and sepFEM gets 70 % of).

The plan of ``auto`` is the chosen mechanism's plan with its default keys (``ReleasePlan.mechanism`` is the chosen
name) and a note saying which rule chose it and why. ``auto`` needs a declared ``privacy.n``: the forecast and
the choice are made before the data is read. :func:`preference` is the order in which refusals look for a
passing alternative (:mod:`dqrelease.mechanisms.utility`): auto's choice first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from dqrelease.mechanisms.base import Mechanism, MechanismKeys, PlanInputs, ReleasePlan, RunInputs

__all__ = ["AUTO", "AUTO_RULES", "WIDE_COLUMNS", "AutoKeys", "AutoRule", "choose", "preference"]

WIDE_COLUMNS = 200
"""Above this many columns a schema is *wide*: auto chooses the DualQuery family (module docstring)."""


class AutoKeys(MechanismKeys):
    """``[mechanism]`` of ``name = "auto"`` (no other key: the chosen mechanism's defaults apply)."""

    name: Literal["auto"] = "auto"

    def check_release(self, *, privacy, output) -> None:
        """The choice and the forecast are made before the data is read: a target ε is required."""
        if privacy.epsilon is None:
            raise ValueError("mechanism 'auto' needs privacy.epsilon (every mechanism it chooses from is calibrated "
                             "to it)")


@dataclass(frozen=True, kw_only=True)
class AutoRule:
    """One row of the rule table.

    Attributes:
        regime: The public shape it covers, in words.
        applies: Whether the rule covers ``inputs`` (public quantities only).
        mechanism: The mechanism chosen.
        keys: Keys given to that mechanism (the rest are its defaults).
        why: The measurement behind the choice (quoted by ``dqrelease plan``).
    """

    regime: str
    applies: Callable[[PlanInputs], bool]
    mechanism: str
    keys: dict[str, Any]
    why: str


AUTO_RULES: tuple[AutoRule, ...] = (
    AutoRule(
        regime=f"wide schema: more than {WIDE_COLUMNS} columns",
        applies=lambda inputs: len(inputs.public.domain) > WIDE_COLUMNS,
        mechanism="dualquery",
        keys={"eta": 2.0, "free_policy": "zero", "fit": {"enabled": False}},
        why=("particles of every column would not fit the memory and time of a release; DualQuery ran BMS-WebView's "
             "497 and 3,340 columns in under 40 s (docs/benchmarks.md, 'Sparse data')"),
    ),
    AutoRule(
        regime=f"at most {WIDE_COLUMNS} columns",
        applies=lambda inputs: True,
        mechanism="mwem-particles",
        keys={},
        why=("lowest workload max error of the default mechanisms on ADULT at every epsilon (docs/benchmarks.md, "
             "'Mechanisms'), and the best forecast: it spends all of rho on the measurements the table fit of the "
             "other mechanisms gets 70% of"),
    ),
)
"""The rule table, first match wins (module docstring)."""


def choose(inputs: PlanInputs) -> AutoRule:
    """The first rule of :data:`AUTO_RULES` that covers ``inputs``."""
    return next(rule for rule in AUTO_RULES if rule.applies(inputs))


def chosen_keys(rule: AutoRule) -> BaseModel:
    """The chosen mechanism's keys model with the rule's keys."""
    from dqrelease.mechanisms import mechanism

    return mechanism(rule.mechanism).keys(**rule.keys)


def preference(inputs: PlanInputs) -> list[str]:
    """Mechanism names in the order a passing alternative is looked for: auto's choice, then the registry's."""
    from dqrelease.mechanisms import MECHANISMS

    first = choose(inputs).mechanism
    return [first, *(name for name in MECHANISMS if name not in (first, "auto"))]


def _plan(keys: AutoKeys, inputs: PlanInputs) -> ReleasePlan:
    from dqrelease.mechanisms import plan_mechanism

    rule = choose(inputs)
    planned = plan_mechanism(chosen_keys(rule), inputs)
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
