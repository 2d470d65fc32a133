"""Randomized response (mechanism E of seed 003) in the pipeline: keys, plan rule and run.

Every record is kept or replaced by a uniform record of the domain; the ``n`` randomized records are
published and the error report answers with seed 003's unbiased estimator. Refused at plan time where its
estimates would be noise (:data:`RR_MAX_ESTIMATE_SD`) or its keep probability cannot be computed.

It cannot keep the schema's public rules (``enforces_constraints = False``): a replaced record is uniform over
the whole domain, and dropping or redrawing infeasible ones would change the distribution its unbiased estimator
assumes. A schema with rules refuses it at plan time.
"""

from __future__ import annotations

from typing import Literal

from dqrelease.mechanisms.base import Mechanism, MechanismKeys, PlanInputs, ReleasePlan, RunInputs

__all__ = ["RANDOMIZED_RESPONSE", "RR_LABEL", "RR_MAX_ESTIMATE_SD", "RandomizedResponseKeys"]

RR_MAX_ESTIMATE_SD = 0.5
"""Largest worst-case standard deviation of randomized response's unbiased estimate a release may have.

Answers are fractions in [0, 1]: with a standard deviation above 0.5 a ±2σ interval covers more than the
whole range, so the release would spend its budget on noise.
"""

RR_LABEL = "mechanism E: per-record randomized response"
"""The label of randomized response's privacy event (as :func:`dq_engine.mechanisms.randomized_response` writes it)."""


class RandomizedResponseKeys(MechanismKeys):
    """``[mechanism]`` of ``name = "randomized_response"`` (no other key)."""

    name: Literal["randomized_response"] = "randomized_response"

    def check_release(self, *, privacy, output) -> None:
        """Needs a target epsilon; publishes exactly n rows."""
        if privacy.epsilon is None:
            raise ValueError("mechanism 'randomized_response' needs privacy.epsilon (its budget is the whole target)")
        if output.rows is not None:
            raise ValueError("randomized_response publishes exactly one randomized row per record; remove output.rows")


def _plan(keys: RandomizedResponseKeys, inputs: PlanInputs) -> ReleasePlan:
    from dq_engine.errors import ConfigError, UniverseTooLargeError
    from dq_engine.mechanisms.randomized_response import (
        MAX_RR_UNIVERSE_LOG2,
        RandomizedResponseConfig,
        estimate_sd_bound,
        keep_probability,
    )
    from dq_engine.privacy.accounting import PureDpEvent, mwem_costs
    from dqrelease.mechanisms.dispatch import recommendation

    public = inputs.public
    domain, epsilon = public.domain, public.epsilon
    try:
        sd = estimate_sd_bound(epsilon, domain, public.n)
    except UniverseTooLargeError:
        raise UniverseTooLargeError(
            f"mechanism 'randomized_response' needs a domain of at most 2^{MAX_RR_UNIVERSE_LOG2:g} records; this "
            f"schema's has 2^{domain.universe_log2:.1f}; drop or coarsen columns, or use "
            f"{recommendation(inputs, exclude=('randomized_response',))}"
        ) from None
    p = keep_probability(epsilon, domain)
    if sd > RR_MAX_ESTIMATE_SD:
        raise ConfigError(
            f"mechanism 'randomized_response' would publish noise: with 2^{domain.universe_log2:.1f} records in the "
            f"domain and epsilon = {epsilon:.4g} a record is kept with probability {p:.3g}, so an estimated answer "
            f"has a standard deviation up to {sd:.3g} (limit {RR_MAX_ESTIMATE_SD}); drop or coarsen columns, "
            f"raise privacy.epsilon, or use {recommendation(inputs, exclude=('randomized_response',))}"
        )
    engine_config = RandomizedResponseConfig(epsilon=epsilon, delta=public.delta)
    events = (PureDpEvent(epsilon=epsilon, count=1, label=RR_LABEL),)
    parameters = {
        "epsilon": epsilon, "keep_probability": p, "universe_log2": domain.universe_log2,
        "estimate_sd_bound": sd, "delta": public.delta,
    }
    notes = [
        f"each record is kept with probability {p:.4g}, else replaced by a uniform record; the workload's "
        f"unbiased estimates have a standard deviation of at most {sd:.3g}"
    ]
    return ReleasePlan(
        mechanism="randomized_response", n=public.n, engine_config=engine_config, parameters=parameters,
        events=events, costs=mwem_costs(list(events), public.delta), mode=inputs.mode, notes=notes,
    )


def _run(plan: ReleasePlan, inputs: RunInputs):
    from dq_engine.mechanisms.randomized_response import randomized_response

    return randomized_response(inputs.data, plan.engine_config, grant=inputs.grant, rng=inputs.rng)


RANDOMIZED_RESPONSE = Mechanism(
    name="randomized_response",
    summary=(
        "every record kept or replaced by a uniform record; publishes the n randomized records, and the error "
        "report answers with the unbiased estimator; refused at plan time when that estimator would be noise"
    ),
    reference=(
        "randomized response over the record domain (mechanism E of 'minimax distortion of query-set-independent "
        "mechanisms')"
    ),
    keys=RandomizedResponseKeys, plan=_plan, run=_run, enforces_constraints=False,
)
