"""Which mechanism the benchmarks show best for a table's public shape: the rule table of ``auto`` and the advice.

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
  DualQuery, DQRS, FEM and sepFEM gets 90 % of).

``mechanism.name = "auto"`` (:mod:`dqrelease.mechanisms.auto`) plans the mechanism :func:`choose` picks;
:func:`preference` is the order in which refusals look for a passing alternative
(:func:`dqrelease.mechanisms.dispatch.passing_alternative`): auto's choice first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dqrelease.mechanisms.base import PlanInputs
from dqrelease.mechanisms.registry import MECHANISMS

__all__ = ["AUTO_RULES", "WIDE_COLUMNS", "AutoRule", "choose", "preference"]

WIDE_COLUMNS = 200
"""Above this many columns a schema is *wide*: auto chooses the DualQuery family (module docstring)."""


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
             "other mechanisms gets 90% of"),
    ),
)
"""The rule table, first match wins (module docstring)."""


def choose(inputs: PlanInputs) -> AutoRule:
    """The first rule of :data:`AUTO_RULES` that covers ``inputs``."""
    return next(rule for rule in AUTO_RULES if rule.applies(inputs))


def preference(inputs: PlanInputs) -> list[str]:
    """Mechanism names in the order a passing alternative is looked for: auto's choice, then the registry's."""
    first = choose(inputs).mechanism
    return [first, *(name for name in MECHANISMS if name not in (first, "auto"))]
