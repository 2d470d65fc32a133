"""What a mechanism is to the pipeline: its ``[mechanism]`` keys, its plan rule and its run, in one object.

A :class:`Mechanism` bundles

* ``keys`` -- the pydantic model of its ``[mechanism]`` section (unknown keys are errors; every field has a
  description, which ``docs/config.md`` is generated from);
* ``plan`` -- the rule from public quantities (:class:`PlanInputs`: the public ``n``, the target (ε, δ), the
  domain, the workload's size, the accounting mode) to the engine's parameters and the privacy events, as a
  :class:`ReleasePlan`; it never sees private data;
* ``run`` -- the engine call that executes a plan on the private data;
* ``enforces_constraints`` -- whether every record it publishes keeps the schema's public rules
  (:mod:`dqrelease.inputs.rules`). A mechanism that cannot is refused at plan time when the schema has rules.

The registry (:mod:`dqrelease.mechanisms`) is the only place that lists mechanisms; ``plan``, ``run``, the docs
generator and ``bench/mechanisms.py`` all read it. Heavy engine modules are imported inside ``plan`` and ``run``
so that loading a config (and refusing a bad one) stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    import numpy as np

    from dq_engine.data.constraints import Constraints
    from dq_engine.data.dataset import Dataset
    from dq_engine.data.workload import Workload
    from dq_engine.oracle import OracleConfig
    from dq_engine.privacy.accounting import ComposedCost, PrivacyEvent
    from dq_engine.privacy.grant import PrivacyGrant
    from dq_engine.privacy.public import PublicQuantities
    from dq_engine.results import RoundDiagnostics, SynthesisResult

__all__ = [
    "GRANT_ISSUER",
    "Mechanism",
    "MechanismGrant",
    "MechanismKeys",
    "OracleKeys",
    "PlanInputs",
    "ReleasePlan",
    "RunInputs",
    "oracle_config",
    "oracle_parameters",
]


# ---------------------------------------------------------------------- config keys
class MechanismKeys(BaseModel):
    """Base of every ``[mechanism]`` model: frozen, unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def check_release(self, *, privacy: Any, output: Any) -> None:
        """Cross-section checks against ``[privacy]`` and ``[output]`` (raise ``ValueError`` with the fix)."""


class OracleKeys(BaseModel):
    """Section ``[mechanism.oracle]``: the best-response oracle (:class:`dq_engine.oracle.OracleConfig`).

    Omitted keys take the engine's defaults, which ``docs/oracle.md`` measured.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["portfolio", "cpsat", "local"] | None = Field(
        default=None, description="Local search, then CP-SAT with its record as a hint (portfolio, the default)."
    )
    time_limit: float | None = Field(default=None, gt=0, le=3600, description="CP-SAT seconds per call (secure runs).")
    num_workers: int | None = Field(default=None, ge=1, le=64, description="CP-SAT workers.")
    deterministic_time_limit: float | None = Field(
        default=None, gt=0, le=3600, description="CP-SAT deterministic-time limit per call (seeded runs)."
    )
    max_presolve_iterations: int | None = Field(default=None, ge=0, description="CP-SAT presolve iterations.")
    local_time_limit: float | None = Field(default=None, gt=0, le=3600, description="Local-search seconds per call.")
    local_restarts: int | None = Field(default=None, ge=0, le=1_000_000, description="Local-search restarts per call.")
    fallback: Literal["previous", "random"] | None = Field(
        default=None, description="Record used when no solver returns one."
    )


def oracle_config(keys: OracleKeys, *, deterministic: bool, base: OracleConfig | None = None) -> OracleConfig:
    """The engine's oracle settings: ``base`` (default: the engine's defaults) with the keys given replacing it."""
    import dataclasses

    from dq_engine.oracle import OracleConfig

    given = {name: value for name, value in keys.model_dump().items() if value is not None}
    return dataclasses.replace(base or OracleConfig(), deterministic=deterministic, **given)


def oracle_parameters(oracle: OracleConfig) -> dict[str, Any]:
    """The oracle settings as JSON-friendly plan parameters."""
    return {f.name: getattr(oracle, f.name) for f in fields(oracle)}


# ---------------------------------------------------------------------- plans
@dataclass(frozen=True, kw_only=True)
class PlanInputs:
    """Everything a plan rule may look at: public quantities only.

    Attributes:
        public: The public ``n``, the mechanism's target (ε, δ), the domain and the workload's size.
        mode: The accounting mode charged to the ledger (``tight`` or ``paper``).
        deterministic: Seeded run: the oracle must be reproducible.
        constraints: The schema's public rules over the domain, or None when it declares none.
        workload: The public workload, whose shape the utility forecast reads (:mod:`dq_engine.evaluation.forecast`), or
            None (the forecast then approximates it from ``public``'s ``N`` and ``M``).
    """

    public: PublicQuantities
    mode: Literal["tight", "paper"]
    deterministic: bool
    constraints: Constraints | None = None
    workload: Workload | None = None


@dataclass(frozen=True, kw_only=True)
class ReleasePlan:
    """Everything decided before the mechanism touches the data.

    Attributes:
        mechanism: Mechanism name.
        n: Number of records the sensitivity analysis uses.
        engine_config: The dq_engine configuration object to run.
        parameters: Public parameters (JSON-friendly).
        events: Privacy events of the mechanism.
        costs: Cost in each accounting mode.
        mode: The accounting mode charged to the ledger.
        progress_rounds: Rounds the mechanism reports progress for (0: no per-round progress).
        notes: Plain-language notes on how the rule chose the parameters.
        constraints: The schema's public rules the run must keep (from :class:`PlanInputs`), or None.
        fit: The table fit's MWEM config (:mod:`dqrelease.mechanisms.fit`), or None for the raw records.
    """

    mechanism: str
    n: int
    engine_config: Any
    parameters: dict[str, Any]
    events: tuple[PrivacyEvent, ...]
    costs: dict[str, ComposedCost]
    mode: str
    progress_rounds: int = 0
    notes: list[str] = field(default_factory=list)
    constraints: Constraints | None = None
    fit: Any = None

    @property
    def charged(self) -> ComposedCost:
        """The cost charged to the ledger (in the config's accounting mode)."""
        return self.costs[self.mode]

    def as_dict(self) -> dict[str, Any]:
        """Public, JSON-friendly view of the plan."""
        return {
            "mechanism": self.mechanism,
            "n": self.n,
            "parameters": self.parameters,
            "accounting_mode": self.mode,
            "costs": {mode: cost.as_dict() for mode, cost in self.costs.items()},
            "events": [
                {"type": type(e).__name__, "label": e.label, "count": e.count,
                 **{k: getattr(e, k) for k in ("epsilon", "rho") if hasattr(e, k)}}
                for e in self.events
            ],
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------------- runs
@dataclass(frozen=True, kw_only=True)
class RunInputs:
    """What a run gets besides its plan.

    Attributes:
        data: The private dataset.
        workload: The public workload.
        rng: The mechanism's generator.
        progress: Per-round callback (only public diagnostics are forwarded to logs and the UI).
        true_answers: Exact workload answers already computed (partitioned on a cluster), or None.
        dask_address: Scheduler address, when the run's parallel parts go to a Dask cluster.
        constraints: The schema's public rules every published record keeps (the plan's when not given).
        grant: The budget the engine spends before it reads the data; set by
            :func:`~dqrelease.mechanisms.dispatch.run_mechanism` from a :class:`MechanismGrant` (a run without
            one is refused by the engine).
    """

    data: Dataset
    workload: Workload
    rng: np.random.Generator
    progress: Callable[[RoundDiagnostics], None] | None = None
    true_answers: np.ndarray | None = None
    dask_address: str | None = None
    constraints: Constraints | None = None
    grant: PrivacyGrant | None = None


GRANT_ISSUER = object()
"""Held by :mod:`dqrelease.ledger.grants`, the only module that makes a :class:`MechanismGrant`."""


@dataclass(frozen=True, kw_only=True)
class MechanismGrant:
    """Permission to run one plan on private data: issued only after a ledger charge or for a checked replay.

    :func:`~dqrelease.mechanisms.dispatch.run_mechanism` takes nothing else, and hands the engine ``privacy``, the
    budget of the charge, which every engine mechanism spends before it reads the data.

    Attributes:
        plan: The plan the mechanism runs.
        run_id: The run the grant belongs to.
        basis: ``"ledger charge"`` or ``"replay"``.
        reference: The ledger charge (``dataset_id#seq``) or the replayed manifest's path.
        privacy: The engine budget: the charged (or, for a replay, the recorded) amounts.
    """

    plan: ReleasePlan
    run_id: str
    basis: Literal["ledger charge", "replay"]
    reference: str
    privacy: PrivacyGrant
    _issuer: object = field(repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._issuer is not GRANT_ISSUER:
            from dqrelease.errors import UnchargedRunError

            raise UnchargedRunError(
                "a MechanismGrant is issued only by dqrelease.ledger.grants (grant_after_charge after a ledger "
                "charge, grant_for_replay for a checked replay, grant_for_study after a study ledger's charge); "
                "run a release with dqrelease.flows.release.release"
            )


@dataclass(frozen=True, kw_only=True)
class Mechanism:
    """One mechanism of the pipeline: its keys, plan rule and run (see the module docstring).

    Attributes:
        name: The value of ``mechanism.name``.
        summary: One line for the docs and ``dqrelease plan``.
        reference: The paper and algorithm it implements.
        keys: The pydantic model of its ``[mechanism]`` section.
        plan: ``plan(keys, inputs) -> ReleasePlan`` from public quantities only.
        run: ``run(plan, inputs) -> SynthesisResult`` on the private data.
        needs_public_n: Refused with ``privacy.n = "noisy"``.
        has_oracle: Calls the best-response oracle (the report shows its solver statistics).
        enforces_constraints: Every published record keeps the schema's rules (refused at plan time when the
            schema has rules and this is False).
    """

    name: str
    summary: str
    reference: str
    keys: type[MechanismKeys]
    plan: Callable[[Any, PlanInputs], ReleasePlan]
    run: Callable[[ReleasePlan, RunInputs], SynthesisResult]
    needs_public_n: bool = True
    has_oracle: bool = False
    enforces_constraints: bool = False
