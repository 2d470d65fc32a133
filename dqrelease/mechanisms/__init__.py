"""The mechanism registry: every mechanism the pipeline can run, each defined once.

Each entry is a :class:`~dqrelease.mechanisms.base.Mechanism` from its own module (keys, plan rule, run).
``dqrelease plan`` and ``dqrelease run`` (:func:`plan_mechanism`, :func:`run_mechanism`), the release config
(:data:`MechanismSettings`), the docs generator and ``bench/mechanisms.py`` all read :data:`MECHANISMS`.

Adding a mechanism: write a module with its keys model, ``plan`` and ``run`` and a ``Mechanism`` object, import it
here, add it to the :func:`~dqrelease.mechanisms.registry.register` call and its keys model to
:data:`MechanismSettings` (``docs/engine.md``, "Adding a mechanism").

The package's modules, inner to outer: ``base`` (what a mechanism is), ``registry`` (the table, filled here),
``choice`` (auto's rule table), ``fit`` (the table fit's section and budget split), ``utility`` (the forecast of a
plan), ``dispatch`` (plan or run by name, and a refusal's advice), then one module per mechanism family and
``auto``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from dqrelease.mechanisms.auto import AUTO, AutoKeys
from dqrelease.mechanisms.base import Mechanism, MechanismKeys, PlanInputs, ReleasePlan, RunInputs
from dqrelease.mechanisms.dispatch import plan_mechanism, run_mechanism
from dqrelease.mechanisms.dualquery import DQRS, DUALQUERY, DQRSKeys, DualQueryKeys
from dqrelease.mechanisms.games import FEM, SEPFEM, FEMKeys, SepFEMKeys
from dqrelease.mechanisms.independent import INDEPENDENT, IndependentKeys
from dqrelease.mechanisms.mwem import MWEM, MWEM_PARTICLES, MWEMKeys, MWEMParticlesKeys
from dqrelease.mechanisms.randomized_response import RANDOMIZED_RESPONSE, RandomizedResponseKeys
from dqrelease.mechanisms.registry import DEFAULT_MECHANISM, MECHANISMS, mechanism, register

__all__ = [
    "DEFAULT_MECHANISM",
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

register(DUALQUERY, DQRS, FEM, SEPFEM, MWEM, MWEM_PARTICLES, RANDOMIZED_RESPONSE, INDEPENDENT, AUTO)  # the docs' order

MechanismSettings = Annotated[
    DualQueryKeys | DQRSKeys | FEMKeys | SepFEMKeys | MWEMKeys | MWEMParticlesKeys | RandomizedResponseKeys
    | IndependentKeys | AutoKeys,
    Field(discriminator="name"),
]
"""The ``[mechanism]`` section: the keys model of the mechanism its ``name`` selects."""

