"""DualQuery (Gaboardi, Gallego Arias, Hsu, Roth & Wu; Algorithm 2 of the DualQuery paper).

The query player runs multiplicative weights over the negation-closed query class; each round ``s``
queries are sampled from ``Q^t`` (the only access to private data besides the MW update), the data player
best-responds to the sampled queries with the CP-SAT/local-search oracle, and ``Q`` is updated with the
payoff ``A(x^t, q) = q(D) - q(x^t)`` (sign convention: see :mod:`dq_engine.privacy.mw`). The output is the
multiset of the ``T`` best responses.

Public constraints (:class:`~dq_engine.data.constraints.Constraints`, optional): the best response is taken over the
feasible records and the free attributes are filled without breaking a rule, so every published row is feasible;
the rules are public, so the privacy argument is unchanged (``docs/engine.md``, "Public constraints").

Privacy (replace-one, ``n`` public): Theorem 4.2 (pure ε = ηT(T-1)s/n), Theorem 4.3 (advanced
composition), and the tight zCDP analysis; all are reported (:mod:`dq_engine.privacy.theorems`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from dq_engine.data.answers import answer_records, answer_workload
from dq_engine.data.constraints import Constraints
from dq_engine.data.dataset import Dataset
from dq_engine.data.workload import Workload
from dq_engine.errors import ConfigError
from dq_engine.oracle import (
    FreeAttributeFiller,
    FreeNoise,
    FreePolicy,
    FreeScope,
    OracleConfig,
    best_response,
    check_free_settings,
    gaussian_one_way_marginals,
    noisy_one_way_marginals,
    problem_from_samples,
    with_witness,
)
from dq_engine.privacy.accounting import PaperAnalysis, PrivacyEvent, PureDpEvent, ZCDPEvent, mode_costs
from dq_engine.privacy.grant import PrivacyGrant, require_grant
from dq_engine.privacy.mw import QueryDistribution, SampledQueries
from dq_engine.privacy.theorems import dqrs_events, dualquery_events
from dq_engine.results import RoundDiagnostics, SynthesisResult

__all__ = ["DualQueryConfig", "RoundLoop", "dualquery"]

ProgressCallback = Callable[[RoundDiagnostics], None]


@dataclass(frozen=True, kw_only=True)
class DualQueryConfig:
    """Parameters of DualQuery.

    Attributes:
        eta: MW learning rate η > 0 (paper: 0.4 for dense data, 1.2-2.0 for sparse real data).
        samples: Queries sampled per round ``s`` >= 1.
        rounds: Number of rounds ``T`` >= 1 (see :func:`dq_engine.privacy.calibration.calibrate_rounds` to derive it
            from a target (ε, δ)).
        delta: δ used to report (ε, δ) costs, in (0, 1).
        free_policy: Free-attribute policy (``zero``, ``random``, ``dp-marginal``).
        free_epsilon: Pure ε spent once on Laplace one-way marginals for ``dp-marginal`` with
            ``free_noise="laplace"`` (else 0).
        free_noise: Noise of the ``dp-marginal`` one-way marginals: ``laplace`` (pure ε, the default) or
            ``gaussian`` (ρ-zCDP; useful with many attributes, see
            :func:`dq_engine.oracle.free_attributes.gaussian_one_way_marginals`).
        free_rho: zCDP ρ spent once on Gaussian one-way marginals for ``dp-marginal`` with
            ``free_noise="gaussian"`` (else 0).
        rows_per_round: Rows published per round, ``k`` >= 1 (default 1, the paper's algorithm). With ``k > 1``
            each round's best response becomes ``k`` rows that share every attribute a sampled query touches and
            draw the free attributes independently (policy ``random`` or ``dp-marginal``). Every row is a best
            response to the same samples, so the round's mixed strategy (their average) is one too and the MW
            update uses it; the rows are post-processing of already-charged outputs, so the privacy cost is
            unchanged. It lowers the variance the free attributes add to the answers (docs/decisions.md,
            "Several rows per round").
        free_scope: Which attributes the free-attribute policy fills: ``untouched`` (the paper's §6.4: those no
            sampled query touches) or ``slack`` (also the touched attributes the chosen record does not need
            to keep its satisfied sampled queries satisfied,
            :meth:`~dq_engine.oracle.problem.BestResponseProblem.needed_attributes`; the objective can only
            rise, so each row stays a best response).
        oracle: Best-response oracle settings.
        track_error: Record internal error-so-far in the diagnostics (costs one O(N) pass per round).
    """

    eta: float
    samples: int
    rounds: int
    delta: float = 1e-6
    free_policy: FreePolicy = "random"
    free_epsilon: float = 0.0
    free_noise: FreeNoise = "laplace"
    free_rho: float = 0.0
    rows_per_round: int = 1
    free_scope: FreeScope = "untouched"
    oracle: OracleConfig = field(default_factory=OracleConfig)
    track_error: bool = True

    def __post_init__(self) -> None:
        if not self.eta > 0:
            raise ConfigError(f"eta ({self.eta}) must be > 0")
        if self.samples < 1:
            raise ConfigError(f"samples ({self.samples}) must be >= 1")
        if self.rounds < 1:
            raise ConfigError(f"rounds ({self.rounds}) must be >= 1")
        if not 0 < self.delta < 1:
            raise ConfigError(f"delta ({self.delta}) must be in (0, 1)")
        check_free_settings(
            policy=self.free_policy, noise=self.free_noise, epsilon=self.free_epsilon, rho=self.free_rho,
            rows_per_round=self.rows_per_round, scope=self.free_scope,
        )


def free_attribute_events(config: DualQueryConfig) -> list[PrivacyEvent]:
    """The event of the dp-marginal free-attribute policy (empty for other policies)."""
    if config.free_policy != "dp-marginal":
        return []
    if config.free_noise == "gaussian":
        return [ZCDPEvent(rho=config.free_rho, count=1, label="Gaussian one-way marginals for free attributes")]
    return [PureDpEvent(epsilon=config.free_epsilon, count=1, label="noisy one-way marginals for free attributes")]


class RoundLoop:
    """The shared round machinery of DualQuery and DQRS: oracle call, free attributes, MW update, the result.

    Args:
        data: Private dataset.
        workload: Positive queries (the class is closed under negation internally).
        config: DualQuery-style parameters (``eta``, oracle, free policy).
        rng: Generator for everything random in the run.
        true_answers: Exact answers of the workload on ``data`` when already computed (e.g. partitioned
            by marginal on a Dask cluster); computed here otherwise.
        constraints: Public rules every row must keep (a witness is found once here when missing), or None.
        grant: The budget the run spends before the loop reads ``data``: the events of ``mechanism`` with
            ``config`` (and ``topup_fraction`` for DQRS), plus the free-attribute policy's.
        mechanism: The mechanism the loop plays, ``"dualquery"`` or ``"dqrs"``.
        topup_fraction: DQRS's top-up fraction (its events depend on it); ignored for DualQuery.
    """

    def __init__(
        self,
        data: Dataset,
        workload: Workload,
        config: DualQueryConfig,
        rng: np.random.Generator,
        true_answers: np.ndarray | None = None,
        *,
        constraints: Constraints | None = None,
        grant: PrivacyGrant,
        mechanism: Literal["dualquery", "dqrs"],
        topup_fraction: float = 0.0,
    ):
        if data.domain != workload.domain:
            raise ConfigError("the dataset and the workload are over different domains")
        if mechanism == "dqrs":
            events = dqrs_events(config.eta, config.samples, config.rounds, data.n, topup_fraction=topup_fraction)
        else:
            events = dualquery_events(config.eta, config.samples, config.rounds, data.n)
        require_grant(grant, mechanism=mechanism).spend([*free_attribute_events(config), *events], mechanism=mechanism)
        self.events = events
        self.data = data
        self.workload = workload
        self.config = config
        self.rng = rng
        if true_answers is not None and true_answers.shape != (len(workload),):
            raise ConfigError(f"true_answers must have shape ({len(workload)},), got {true_answers.shape}")
        self.true_answers = answer_workload(data, workload) if true_answers is None else true_answers
        self.distribution = QueryDistribution(len(workload), eta=config.eta)
        marginals = None
        if config.free_policy == "dp-marginal" and config.free_noise == "gaussian":
            marginals, _ = gaussian_one_way_marginals(data, rho=config.free_rho, rng=rng)
        elif config.free_policy == "dp-marginal":
            marginals, _ = noisy_one_way_marginals(data, epsilon=config.free_epsilon, rng=rng)
        self.constraints = with_witness(constraints) if constraints is not None and len(constraints) else None
        self.filler = FreeAttributeFiller(data.domain, config.free_policy, marginals, constraints=self.constraints)
        self.records: list[np.ndarray] = []  # one best response per round (its first published row)
        self.blocks: list[np.ndarray] = []  # the rows published per round, shape (rows_per_round, m) each
        self.synthetic_sum = np.zeros(len(workload), dtype=np.float64)
        self.diagnostics: list[RoundDiagnostics] = []
        # two (N,) buffers reused every round (the payoff and the error so far): fresh 16 MB temporaries at
        # N = 2,000,000 cost page faults every round (docs/benchmarks.md, "Profiles")
        self._payoff = np.empty(len(workload), dtype=np.float64)
        self._error = np.empty(len(workload), dtype=np.float64) if config.track_error else None

    def play(
        self, t: int, samples: SampledQueries, extra: dict[str, float] | None = None, *, sample_seconds: float = 0.0
    ) -> np.ndarray:
        """Best-respond to ``samples``, fill free attributes, update ``Q``; return the round's first row.

        ``sample_seconds`` (how long the caller took to draw ``samples``) is only recorded in the diagnostics.
        """
        began = time.perf_counter()
        problem = problem_from_samples(self.workload, samples, constraints=self.constraints)
        previous = self.records[-1] if self.records else None
        oracle_began = time.perf_counter()
        response = best_response(problem, self.config.oracle, self.rng, previous=previous)
        oracle_seconds = time.perf_counter() - oracle_began
        domain = self.data.domain
        kept = np.zeros(len(domain), dtype=bool)
        if self.config.free_scope == "slack":
            kept[problem.needed_attributes(domain.encode_records(response.codes[None, :])[0])] = True
        else:
            kept[problem.touched_attributes] = True
        free = np.nonzero(~kept)[0]
        block = np.stack([self.filler.fill(response.codes, free, self.rng) for _ in range(self.config.rows_per_round)])
        codes = block[0].copy()  # a view would keep the whole int64 block alive in self.records
        if len(block) > 1:  # k rows of 100,000 int64 codes per round would need 0.8 MB each; codes fit in far less
            block = block.astype(np.min_scalar_type(int(domain.sizes.max()) - 1))
        update_began = time.perf_counter()
        block_bits = domain.encode_records(block)
        if len(block) == 1:
            on_record = self.workload.evaluate_record(block_bits[0])
        else:  # the round's mixed strategy: the average of its rows
            on_record = answer_records(self.workload, block_bits)
        # q(D) - q(x^t) for every positive query; overwritten next round (DQRS consumes it within the round)
        self.last_payoff = np.subtract(self.true_answers, on_record, out=self._payoff)
        self.distribution.update(self.last_payoff)
        update_seconds = time.perf_counter() - update_began
        self.records.append(codes)
        self.blocks.append(block)
        self.synthetic_sum += on_record
        internal = {}
        if self.config.track_error:
            error = np.divide(self.synthetic_sum, len(self.records), out=self._error)
            error -= self.true_answers
            np.abs(error, out=error)
            internal = {
                "internal_max_error": float(error.max()),
                "internal_mean_error": float(error.mean()),
                "internal_entropy": self.distribution.entropy() if len(self.workload) <= 5_000_000 else None,
            }
        diagnostics = RoundDiagnostics(
            round=t,
            sampled=len(samples),
            distinct=problem.n_clauses,
            source=response.source,
            status=response.status,
            objective=response.objective,
            bound=response.bound,
            solver_seconds=response.solver_seconds,
            local_seconds=response.local_seconds,
            round_seconds=time.perf_counter() - began,
            free_attributes=len(free),
            sample_seconds=sample_seconds,
            oracle_seconds=oracle_seconds,
            update_seconds=update_seconds,
            extra=extra or {},
            **internal,
        )
        self.diagnostics.append(diagnostics)
        return codes

    def rows(self) -> np.ndarray:
        """Every published row so far, round by round, shape ``(rounds · rows_per_round, m)``."""
        return np.concatenate(self.blocks)

    def result(
        self, mechanism: str, events: list[PrivacyEvent], *, paper_analysis: PaperAnalysis, **parameters: float
    ) -> SynthesisResult:
        """The run's result: every published row, the public parameters, the events and their costs.

        Args:
            mechanism: Name recorded in the result.
            events: The rounds' events; the free-attribute policy's (:func:`free_attribute_events`) go first.
            paper_analysis: The paper's own analysis of the events (:func:`~dq_engine.privacy.accounting.mode_costs`).
            **parameters: The mechanism's own public parameters, listed after ``rounds``.
        """
        config = self.config
        charged = [*free_attribute_events(config), *events]
        return SynthesisResult(
            mechanism=mechanism,
            domain=self.data.domain,
            records=self.rows(),
            parameters={
                "eta": config.eta,
                "samples": config.samples,
                "rounds": config.rounds,
                **parameters,
                "free_policy": config.free_policy,
                "free_epsilon": config.free_epsilon,
                "free_noise": config.free_noise,
                "free_rho": config.free_rho,
                "rows_per_round": config.rows_per_round,
                "free_scope": config.free_scope,
            },
            events=tuple(charged),
            costs=mode_costs(charged, config.delta, paper_analysis=paper_analysis),
            n=self.data.n,
            diagnostics=tuple(self.diagnostics),
        )


def dualquery(
    data: Dataset,
    workload: Workload,
    config: DualQueryConfig,
    *,
    grant: PrivacyGrant,
    rng: np.random.Generator,
    progress: ProgressCallback | None = None,
    true_answers: np.ndarray | None = None,
    constraints: Constraints | None = None,
) -> SynthesisResult:
    """Run DualQuery (Algorithm 2) and return the ``T`` best responses.

    Args:
        data: Private dataset (``n`` records).
        workload: Positive queries; the algorithm plays over them and their negations.
        config: Parameters (η, s, T, oracle, free-attribute policy).
        grant: The budget this run spends before it reads ``data`` (refused when it does not cover the run).
        rng: Generator for sampling, oracle randomness and free attributes.
        progress: Called after every round with its diagnostics.
        true_answers: Precomputed exact answers of the workload (optional; see :class:`RoundLoop`).
        constraints: Public rules; every published row keeps them (None: no rules).

    Returns:
        The synthetic records, the privacy events and their costs in paper and tight modes, and the
        per-round diagnostics.
    """
    loop = RoundLoop(
        data, workload, config, rng, true_answers, constraints=constraints, grant=grant, mechanism="dualquery"
    )
    for t in range(1, config.rounds + 1):
        began = time.perf_counter()
        samples = loop.distribution.sample(config.samples, rng)
        loop.play(t, samples, sample_seconds=time.perf_counter() - began)
        if progress is not None:
            progress(loop.diagnostics[-1])
    return loop.result("dualquery", loop.events, paper_analysis="advanced_composition")
