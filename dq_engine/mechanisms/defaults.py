"""Default parameter rules of FEM, sepFEM, MWEM and MWEM on particles, computed from public quantities only.

One rule per mechanism, used by the release pipeline and by ``bench/mechanisms.py`` (which imports them,
so the benchmarked configurations are the pipeline's defaults). A rule may look at :class:`PublicQuantities`
only: the public ``n``, the target (ε, δ), the domain, the number of queries ``N`` and of marginals ``M``;
never at the data. Every budget is calibrated on the exact composed cost in the requested accounting mode,
so a rule's cost never exceeds the target. Any parameter given explicitly replaces the rule's value and the
remaining ones are calibrated around it.

* **FEM / sepFEM** (Vietri, Tian, Bun, Steinke & Wu 2020, "New Oracle-Efficient Algorithms for Private Synthetic Data
  Release"): ``T = n √(8ρ) / (2 ln 2N)`` clamped to ``[10, cap]`` (:func:`fem_rounds`),
  ε₀ calibrated to the target, ``s = clamp(1500 // (T + 1), 4, 50)`` oracle calls per round, perturbation
  scale η = 1 (FEM) and 0.5 (sepFEM), CP-SAT alone with a deterministic limit per call
  (:func:`ftpl_oracle`).
* **MWEM** (Hardt, Ligett & McSherry 2012): as published (whole universe, Laplace, one query per round,
  even select/measure split), ``T = 15`` as in the DualQuery paper's comparison, 10 history-replay sweeps
  per round (HLM's improvement).
* **MWEM on particles** (``support="sampled"`` with resample-move refreshes, :mod:`dq_engine.fit.mwem`):
  ``T = ⌊0.63 ρ (0.01 n)²⌋`` clamped to ``[8, min(M, 40)]`` (:func:`mwem_particle_rounds`), or, when that
  uncapped ``T`` is at least ``M`` and ``M ≤ 100``, ``T = M`` rounds that measure each workload marginal in turn
  with no selection (:func:`mwem_particles_measures_all`); 20 % of ρ for the prior's noisy one-way marginals of
  every column (replayed with the measurements, so the fit matches them: the one-way marginals are what a reader
  checks first), of the rest 30 % for exponential-mechanism selections and 70 % for Gaussian measurements of the
  whole selected marginal (all of it for the measurements when none is selected); 200,000 particles from a 20 %
  uniform / 80 % noisy product prior; λ = 2; one history replay per round and 10 to 100 at the end (until the fit
  is within the noise); one Metropolis-Hastings sweep per round. The best mechanism of ``bench/mechanisms.py`` on ADULT
  (docs/benchmarks.md, ``## Mechanisms``).

The constants were set from the papers and checked on ``bench/mechanisms.py``'s development proxy (a KDD
Cup 99 sample), not tuned on the benchmark data; the docstrings below give each one's reason.
"""

from __future__ import annotations

import math
from typing import Literal

from dq_engine.errors import AccountingError, ConfigError
from dq_engine.fit.mwem import MWEMConfig, calibrate_mwem
from dq_engine.mechanisms.fem import FEMConfig, calibrate_fem, fem_events
from dq_engine.mechanisms.sepfem import SepFEMConfig
from dq_engine.oracle import OracleConfig
from dq_engine.privacy.accounting import AccountingMode, fem_costs, within_target
from dq_engine.privacy.public import PublicQuantities

__all__ = [
    "FEM_NOISE_SCALE",
    "FEM_ROUNDS_CAP",
    "MWEM_PARTICLES_CANDIDATES",
    "MWEM_PARTICLES_FINAL_ESTIMATOR",
    "MWEM_PARTICLES_FINAL_MIN_SWEEPS",
    "MWEM_PARTICLES_FINAL_SWEEPS",
    "MWEM_PARTICLES_FINAL_TOLERANCE",
    "MWEM_PARTICLES_MEASURE_ALL_CAP",
    "MWEM_PARTICLES_PRIOR_MIX",
    "MWEM_PARTICLES_PRIOR_MIX_RULE",
    "MWEM_PARTICLES_PRIOR_SHARE",
    "MWEM_PARTICLES_ROUNDS_CAP",
    "MWEM_PARTICLES_SELECT",
    "MWEM_PARTICLES_SELECT_SHARE",
    "MWEM_PARTICLES_SUPPORT_SIZE",
    "MWEM_REPLAY_SWEEPS",
    "MWEM_ROUNDS",
    "SEPFEM_NOISE_SCALE",
    "SEPFEM_ROUNDS_CAP",
    "fem_rounds",
    "ftpl_oracle",
    "ftpl_samples",
    "game_config",
    "mwem_config",
    "mwem_particle_rounds",
    "mwem_particles_config",
    "mwem_particles_measures_all",
]

FEM_NOISE_SCALE = 1.0
"""η of FEM's exponential perturbation (Vietri et al. 2020, Table 3, uses 1 .. 4)."""
SEPFEM_NOISE_SCALE = 0.5
"""Laplace scale of sepFEM's separator-query weights."""
FEM_ROUNDS_CAP = 120
"""Largest T of FEM's rule (what the oracle time allows in about a minute on 2 cores)."""
SEPFEM_ROUNDS_CAP = 100
"""Largest T of sepFEM's rule."""
MWEM_ROUNDS = 15
"""T of MWEM's rule (the DualQuery paper's MWEM comparison)."""
MWEM_REPLAY_SWEEPS = 10
"""History-replay sweeps per MWEM round."""
MWEM_PARTICLES_ROUNDS_CAP = 40
"""Largest T of MWEM on particles (what the history replays allow in about a minute on 2 cores)."""
MWEM_PARTICLES_MEASURE_ALL_CAP = 100
"""Most workload marginals MWEM on particles (and the table fit) measures every one of, in turn and without
selection (:func:`mwem_particles_measures_all`): each round then replays the history without answering the
workload for a selection, and 100 rounds take what 40 selected ones do (measured, docs/benchmarks.md)."""
MWEM_PARTICLES_PRIOR_SHARE = 0.2
"""Share of ρ for the prior's noisy one-way marginals of MWEM on particles."""
MWEM_PARTICLES_SELECT_SHARE = 0.3
"""Share of the rounds' ρ (what the prior leaves) for the exponential-mechanism selections of MWEM on particles; the
rest measures the selected marginals."""
MWEM_PARTICLES_PRIOR_MIX = 0.2
"""Weight of the uniform distribution in the prior of MWEM on particles (``support_mix``): the rest is the prior's
noisy one-way marginals, projected onto the simplex."""
MWEM_PARTICLES_PRIOR_MIX_RULE = "noise"
"""How much uniform mass each attribute's prior factor gets (``support_mix_rule``): :data:`MWEM_PARTICLES_PRIOR_MIX`
for every attribute (``"fixed"``, the rule until 2026-11-28), or at most that, less where the prior's noise is small
against a uniform cell (``"noise"``, :func:`dq_engine.fit.prior.uniform_share`). Measured (``bench/fit_selection.py
--variants mix-noise``, 5 seeds, docs/benchmarks.md, "The prior's uniform mass"): on private-pgm's Adult at ε = 1
the pairs further from the data than DP independent columns went from 15 to 4 (DualQuery and MWEM on particles,
every seed), the mean one-way and two-way TVD down on every seed; level at ε = 0.1."""
MWEM_PARTICLES_SELECT = "alternate"
"""What a round of MWEM on particles (and of the table fit) selects (:class:`dq_engine.fit.mwem.MWEMConfig`,
``select``): the query of largest error (``"query"``), the marginal of largest L1 error beyond its expected noise
(``"marginal"``, AIM's score), or the two in turn (``"alternate"``, the default since 2026-11-28; was ``"query"``).
Measured (``bench/fit_selection.py``, docs/benchmarks.md, "What the fit's rounds select"): AIM's score alone wins
pairs at ε = 0.1 and loses the workload's worst cells at ε = 1 on Adult; in turn, the two keep the workload max
of the query rule and most of the score's gain on pairs."""
MWEM_PARTICLES_CANDIDATES = "closure"
"""Which marginals a round of MWEM on particles (and of the table fit) may select
(:class:`dq_engine.fit.mwem.MWEMConfig`, ``candidates``): the workload's (``"workload"``) or also every marginal
inside one (``"closure"``, AIM's candidates; the default since 2026-11-28). On a workload of 3-way marginals only
(ADULT-64) the closure lets the rounds measure pairs and single columns and the prior's one-way marginals be
replayed; on the default workload (all 1-way and 2-way marginals and some 3-way ones) it changes nothing."""
MWEM_PARTICLES_FINAL_ESTIMATOR = "sweeps"
"""How MWEM on particles (and the table fit) fits the whole history after the last round
(:class:`dq_engine.fit.mwem.MWEMConfig`, ``final_estimator``): cyclic MW sweeps (``"sweeps"``) or mirror descent on
the measurements' Gaussian log-likelihood (``"mirror"``, Private-PGM's estimation problem over the particles)."""
MWEM_PARTICLES_SUPPORT_SIZE = 200_000
"""Particles of MWEM on particles (about 1.6 MB per attribute as int64 codes)."""
MWEM_PARTICLES_FINAL_MOVES = 0
"""Metropolis-Hastings sweeps after resampling the particles to equal weights, once the final sweeps are done
(:meth:`dq_engine.fit.particles.ParticleDistribution.rejuvenate`; post-processing)."""
MWEM_PARTICLES_FINAL_SWEEPS = 100
"""Most sweeps over the whole measurement history after the last round (post-processing of the noisy measurements).

The cyclic MW updates converge slowly when the history is long: on KDD99 (42 columns, 40 measured marginals and
42 replayed one-way marginals, ε = 1, seed 0) the worst one-way cell of the fit was 0.014 after 10 sweeps, 0.0077
after 40 and 0.0047 after 100, for 23 s more of a 78 s run (docs/decisions.md, "The fit's final sweeps stop at
the noise")."""
MWEM_PARTICLES_FINAL_MIN_SWEEPS = 10
"""Fewest final sweeps; between this and :data:`MWEM_PARTICLES_FINAL_SWEEPS` they stop once the fit is within the
noise (:mod:`dq_engine.fit.mwem`, the discrepancy principle): on Adult at ε = 0.1 (seed 0) 100 sweeps fitted the noise
(worst one-way cell 0.067 instead of 0.050, workload max 0.083 instead of 0.059)."""
MWEM_PARTICLES_FINAL_TOLERANCE = 1e-3
"""The final sweeps also stop once one lowers the discrepancy by less than 0.1 % (converged). On ADULT-64 at
ε = 0.1 the history holds about 6 M noisy 3-way cells, nearly all empty, and its discrepancy stays at 1.001 from the
first sweep to the hundredth; running all 100 concentrated DualQuery's fitted table on the noise (seed 3: 6,991
distinct rows, worst one-way cell 0.211 instead of 0.058). On KDD99 each sweep still gains about 1 % at the
hundredth (DualQuery at ε = 0.1 excepted: it stops earlier on 3 of 5 seeds, third-digit changes), and on Adult
at ε = 1 (seed 0) the rule stops at sweep 28 instead of 37 with about the same figures.
Both the cells' mean and the measurements' mean of the discrepancy must stop (:mod:`dq_engine.fit.mwem`): with the
cells' mean alone the rule stopped private-pgm's encoding at ε = 1 while its one-way marginals were still far from
their measurements (MWEM on particles' mean one-way TVD 0.022 instead of 0.018, mean two-way TVD 0.068 instead of
0.060; docs/decisions.md, "The fit's final sweeps stop at the noise of every measurement")."""


def fem_rounds(public: PublicQuantities, *, cap: int) -> int:
    """``T = n √(8ρ) / (2 ln 2N)``, clamped to [10, cap].

    Balances the exponential mechanism's selection error ``2 ln(2N) / (n ε₀)`` with ``ε₀ = √(8ρ/T)`` (tight
    mode) against a ``1/√T`` regret term. The cap is what the oracle time allows: a call's CP-SAT time grows
    with the number of selected queries.
    """
    ideal = public.n * math.sqrt(8 * public.rho) / (2 * math.log(2 * public.n_queries))
    return int(min(cap, max(10, round(ideal))))


def ftpl_samples(rounds: int) -> int:
    """``s = clamp(1500 // (T + 1), 4, 50)``: about 1,500 oracle calls per run."""
    return int(min(50, max(4, 1500 // (rounds + 1))))


def ftpl_oracle() -> OracleConfig:
    """CP-SAT alone, one worker per call, deterministic limit 0.2 (reproducible, bounded per call)."""
    return OracleConfig(kind="cpsat", num_workers=1, deterministic=True, deterministic_time_limit=0.2)


def _game_budget(
    public: PublicQuantities, *, mode: AccountingMode, cap: int, rounds: int | None, epsilon_0: float | None
) -> tuple[float, int]:
    """``(ε₀, T)`` of FEM / sepFEM: the rule's T, explicit values, calibrated to the target."""
    if rounds is not None and epsilon_0 is not None:
        if public.epsilon is not None:
            cost = fem_costs(fem_events(epsilon_0, rounds), public.delta)[mode].epsilon
            if not within_target(cost, public.epsilon):
                raise AccountingError(
                    f"{rounds} rounds at epsilon_0 = {epsilon_0:g} cost epsilon {cost:.4g} > the target "
                    f"{public.epsilon:.4g} ({mode} accounting); lower rounds or epsilon_0, or omit one of them"
                )
        return float(epsilon_0), int(rounds)
    if public.epsilon is None:
        raise ConfigError("give a target epsilon, or both rounds and epsilon_0")
    if epsilon_0 is not None:
        return calibrate_fem(epsilon=public.epsilon, delta=public.delta, mode=mode, epsilon_0=epsilon_0)
    if rounds is None:
        rounds = fem_rounds(public, cap=cap)
    return calibrate_fem(epsilon=public.epsilon, delta=public.delta, mode=mode, rounds=rounds)


_GAMES: dict[str, tuple[type[FEMConfig] | type[SepFEMConfig], int, float]] = {
    "fem": (FEMConfig, FEM_ROUNDS_CAP, FEM_NOISE_SCALE),
    "sepfem": (SepFEMConfig, SEPFEM_ROUNDS_CAP, SEPFEM_NOISE_SCALE),
}
"""The one rule's parameter sets: the config type, the cap on T and the perturbation scale η of each game."""


def game_config(
    mechanism: Literal["fem", "sepfem"],
    public: PublicQuantities,
    *,
    mode: AccountingMode = "tight",
    rounds: int | None = None,
    epsilon_0: float | None = None,
    samples: int | None = None,
    noise_scale: float | None = None,
    oracle: OracleConfig | None = None,
    workers: int = 1,
    track_error: bool = True,
) -> FEMConfig | SepFEMConfig:
    """The FEM / sepFEM rule (see the module docstring); explicit arguments replace the rule's values.

    FEM and sepFEM share the rule; sepFEM's T is capped at :data:`SEPFEM_ROUNDS_CAP` (FEM's at
    :data:`FEM_ROUNDS_CAP`) and its separator weights have Laplace scale :data:`SEPFEM_NOISE_SCALE` (FEM's
    perturbation :data:`FEM_NOISE_SCALE`).

    Raises:
        AccountingError: If the target cannot be met, or explicit ``rounds`` and ``epsilon_0`` exceed it.
        ConfigError: If neither a target ε nor both ``rounds`` and ``epsilon_0`` are given.
    """
    config_type, cap, default_noise_scale = _GAMES[mechanism]
    epsilon_0, rounds = _game_budget(public, mode=mode, cap=cap, rounds=rounds, epsilon_0=epsilon_0)
    return config_type(
        epsilon_0=epsilon_0, noise_scale=default_noise_scale if noise_scale is None else noise_scale,
        samples=ftpl_samples(rounds) if samples is None else samples, rounds=rounds, delta=public.delta,
        oracle=ftpl_oracle() if oracle is None else oracle, workers=workers, track_error=track_error,
    )


def mwem_config(
    public: PublicQuantities,
    *,
    mode: AccountingMode = "tight",
    rounds: int | None = None,
    track_error: bool = True,
) -> MWEMConfig:
    """MWEM's rule: as published, ``T = 15`` (or ``rounds``), budgets calibrated to the target in ``mode``.

    Raises:
        AccountingError: If no positive budget fits the target.
        ConfigError: Without a target ε.
    """
    if public.epsilon is None:
        raise ConfigError("MWEM's rule needs a target epsilon")
    rounds = MWEM_ROUNDS if rounds is None else rounds
    budget = calibrate_mwem(epsilon=public.epsilon, delta=public.delta, rounds=rounds, mode=mode)
    return MWEMConfig(
        rounds=rounds, replay_sweeps=MWEM_REPLAY_SWEEPS, delta=public.delta, track_error=track_error, **budget
    )


def _ideal_particle_rounds(public: PublicQuantities) -> int:
    return math.floor(0.63 * public.rho * (0.01 * public.n) ** 2)


def mwem_particles_measures_all(public: PublicQuantities) -> bool:
    """Whether the rule measures every workload marginal, in turn and without selection (``select="all"``).

    When the budget can measure each of the workload's ``M`` marginals at the noise the rounds' rule aims for
    (:func:`mwem_particle_rounds`' uncapped ``T`` is at least ``M``) but the selecting rounds' cap
    :data:`MWEM_PARTICLES_ROUNDS_CAP` would leave some unmeasured, and ``M`` is at most
    :data:`MWEM_PARTICLES_MEASURE_ALL_CAP` (rounds without selection are cheaper), the selections' budget measures
    instead. With ``M`` within the cap the selecting rounds reach ``T = M`` and their adaptivity is kept: it can
    skip a marginal the prior's one-way measurements already fit and measure a bad one twice (on a planted 6-column
    table of 21 marginals, measuring each once was 0.002 further on the mean two-way TVD).
    """
    m = public.n_marginals
    return MWEM_PARTICLES_ROUNDS_CAP < m <= MWEM_PARTICLES_MEASURE_ALL_CAP and _ideal_particle_rounds(public) >= m


def mwem_particle_rounds(public: PublicQuantities) -> int:
    """``T = ⌊0.63 ρ (0.01 n)²⌋`` clamped to ``[8, min(M, 40)]``.

    With 63 % of ρ for the measurements (0.9 x 0.7, shares in :func:`mwem_particles_config`), each measured
    cell then gets Gaussian noise of standard deviation about 1 % of ``n``; more rounds would only add noise,
    fewer would leave marginals unmeasured. 40 rounds is what the history replays allow in the time budget.
    """
    return int(min(min(public.n_marginals, MWEM_PARTICLES_ROUNDS_CAP), max(8, _ideal_particle_rounds(public))))


def mwem_particles_config(
    public: PublicQuantities,
    *,
    mode: AccountingMode = "tight",
    rounds: int | None = None,
    support_size: int | None = None,
    support_share: float | None = None,
    replay_prior: bool = True,
    seed_fraction: float = 0.0,
    track_error: bool = True,
    select: str | None = None,
    candidates: str | None = None,
) -> MWEMConfig:
    """The rule of MWEM on particles (see the module docstring); explicit arguments replace the rule's values.

    Privacy: the prior's one-way marginals, ``T`` exponential-mechanism selections and ``T`` Gaussian
    measurements are the only steps that read the data (:func:`dq_engine.fit.mwem.mwem_events`); resampling and
    Metropolis-Hastings moves of the particles use only those noisy results (post-processing).

    Raises:
        AccountingError: If no positive budget fits the target.
        ConfigError: Without a target ε.
    """
    if public.epsilon is None:
        raise ConfigError("the rule of MWEM on particles needs a target epsilon")
    if rounds is None and select is None and mwem_particles_measures_all(public):
        rounds, select = public.n_marginals, "all"
    rounds = mwem_particle_rounds(public) if rounds is None else rounds
    select = MWEM_PARTICLES_SELECT if select is None else select
    budget = calibrate_mwem(
        epsilon=public.epsilon, delta=public.delta, rounds=rounds, mode=mode, measure_noise="gaussian",
        select_share=0.0 if select == "all" else MWEM_PARTICLES_SELECT_SHARE,
        support_share=MWEM_PARTICLES_PRIOR_SHARE if support_share is None else support_share,
    )
    return MWEMConfig(
        rounds=rounds, measure_noise="gaussian", measure="marginal", select=select,
        candidates=MWEM_PARTICLES_CANDIDATES if candidates is None else candidates, learning_rate=2.0, replay_sweeps=1,
        final_sweeps=MWEM_PARTICLES_FINAL_SWEEPS,
        final_min_sweeps=MWEM_PARTICLES_FINAL_MIN_SWEEPS, final_tolerance=MWEM_PARTICLES_FINAL_TOLERANCE,
        final_estimator=MWEM_PARTICLES_FINAL_ESTIMATOR, support="sampled",
        support_size=MWEM_PARTICLES_SUPPORT_SIZE if support_size is None else support_size,
        support_mix=MWEM_PARTICLES_PRIOR_MIX, support_mix_rule=MWEM_PARTICLES_PRIOR_MIX_RULE,
        support_moves=1, final_moves=MWEM_PARTICLES_FINAL_MOVES, seed_fraction=seed_fraction,
        replay_prior=replay_prior, delta=public.delta,
        track_error=track_error, **budget,
    )
