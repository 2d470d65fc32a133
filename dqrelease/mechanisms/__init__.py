"""The mechanism registry: every mechanism the pipeline can run, each defined once.

Each entry is a :class:`~dqrelease.mechanisms.base.Mechanism` from its own module (keys, plan rule, run).
``dqrelease plan`` and ``dqrelease run`` (:func:`plan_mechanism`, :func:`run_mechanism`), the release config
(:data:`MechanismSettings`), the docs generator and ``bench/mechanisms.py`` all read :data:`MECHANISMS`.

Adding a mechanism: write a module with its keys model, ``plan`` and ``run`` and a ``Mechanism`` object, and
add that object to :data:`MECHANISMS` (``docs/engine.md``, "Adding a mechanism").
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from pydantic import Field

from dqrelease.errors import ConfigInvalidError
from dqrelease.mechanisms.auto import AUTO, AutoKeys
from dqrelease.mechanisms.base import Mechanism, MechanismKeys, PlanInputs, ReleasePlan, RunInputs
from dqrelease.mechanisms.dualquery import DQRS, DUALQUERY, DQRSKeys, DualQueryKeys
from dqrelease.mechanisms.fit import plan_with_fit, run_fit
from dqrelease.mechanisms.games import FEM, SEPFEM, FEMKeys, SepFEMKeys
from dqrelease.mechanisms.mwem import MWEM, MWEM_PARTICLES, MWEMKeys, MWEMParticlesKeys
from dqrelease.mechanisms.randomized_response import RANDOMIZED_RESPONSE, RandomizedResponseKeys

__all__ = [
    "MECHANISMS",
    "Mechanism",
    "MechanismKeys",
    "MechanismSettings",
    "PlanInputs",
    "ReleasePlan",
    "RunInputs",
    "mechanism",
    "plan_mechanism",
    "run_mechanism",
]

MECHANISMS: dict[str, Mechanism] = {
    m.name: m for m in (DUALQUERY, DQRS, FEM, SEPFEM, MWEM, MWEM_PARTICLES, RANDOMIZED_RESPONSE, AUTO)
}
"""Every mechanism by its ``mechanism.name``, in the order the docs list them (the default first)."""

DEFAULT_MECHANISM = "dualquery"

MechanismSettings = Annotated[
    DualQueryKeys | DQRSKeys | FEMKeys | SepFEMKeys | MWEMKeys | MWEMParticlesKeys | RandomizedResponseKeys | AutoKeys,
    Field(discriminator="name"),
]
"""The ``[mechanism]`` section: the keys model of the mechanism its ``name`` selects."""


def mechanism(name: str) -> Mechanism:
    """The registered mechanism called ``name``.

    Raises:
        KeyError: With the list of names, if there is none.
    """
    if name not in MECHANISMS:
        raise KeyError(f"no mechanism {name!r}; choose one of {', '.join(MECHANISMS)}")
    return MECHANISMS[name]


def plan_mechanism(keys: MechanismKeys, inputs: PlanInputs) -> ReleasePlan:
    """Plan ``keys.name`` from public quantities only (engine errors propagate; callers name the section).

    Raises:
        ConfigInvalidError: The schema has rules and the mechanism cannot enforce them (names those that can).
    """
    chosen = mechanism(keys.name)
    constraints = inputs.constraints if inputs.constraints is not None and len(inputs.constraints) else None
    if constraints is not None and not chosen.enforces_constraints:
        from dqrelease.mechanisms.utility import recommendation

        raise ConfigInvalidError(
            f"mechanism {chosen.name!r} cannot keep the schema's rules ({', '.join(constraints.rule_names)}): it "
            f"would publish records that break them; use {recommendation(inputs, exclude=(chosen.name,))}, or "
            "remove the rules"
        )
    fit = getattr(keys, "fit", None)
    planned = plan_with_fit(chosen.plan, keys, inputs) if fit is not None and fit.enabled else chosen.plan(keys, inputs)
    return dataclasses.replace(planned, constraints=constraints)


def run_mechanism(plan: ReleasePlan, inputs: RunInputs) -> Any:
    """Run the mechanism a plan describes on the private data; returns its ``SynthesisResult``.

    The plan's public rules reach the engine through :attr:`RunInputs.constraints` (unless the inputs carry them).
    """
    if inputs.constraints is None and plan.constraints is not None:
        inputs = dataclasses.replace(inputs, constraints=plan.constraints)
    return run_fit(plan, inputs, mechanism(plan.mechanism).run(plan, inputs))
