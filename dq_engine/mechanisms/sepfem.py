r"""sepFEM: Separator-FTPL with the Exponential Mechanism.

Vietri, Tian, Bun, Steinke & Wu 2020, "New Oracle-Efficient Algorithms for Private Synthetic Data Release",
Algorithms 1 and 3.

The query player is FEM's (one ε₀-DP exponential-mechanism draw per round); the data player runs
Separator-FTPL (Syrgkanis et al. 2016): each of the ``s`` samples of a round solves

    x_j ∈ argmax_x  Σ_{i<t} q_i(x) + Σ_{q̃ ∈ sep(Q)} σ_{j,q̃} q̃(x),   σ_{j,q̃} ~ Lap(η) i.i.d.,

i.e. the selected queries plus "fake" separator queries with random Laplace weights.

**Separator set.** A set ``sep(Q)`` separates the records if any two distinct records disagree on one of
its queries (Definition 4.1). For k-way conjunctions over one-hot blocks we use the one-way queries
``x_b = 1``, one per bit ``b`` (every value of every categorical attribute, the bit of every binary
attribute): two records that differ differ in some attribute's value, hence in the bit of that value. So
``Σ σ_b q̃_b(x) = <x, σ>`` and the separator weights are exactly the best-response problem's linear term
(``+σ``, Laplace), solved by the same CP-SAT oracle as FEM. (One bit per block could be dropped; keeping
all of them is what the paper's "separator sets of size d" statement for conjunctions uses.)

Privacy is Theorem 8, identical to FEM's: the data player never reads the data, so the guarantee holds
for any oracle; accuracy (Corollary 8.2) assumes exact argmax answers (see :mod:`dq_engine.mechanisms.fem`).
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass, field

import numpy as np

from dq_engine.data.constraints import Constraints
from dq_engine.data.dataset import Dataset
from dq_engine.data.workload import Workload
from dq_engine.mechanisms.fem import (
    ProgressCallback,
    check_game_parameters,
    default_fem_oracle,
    run_primal_game,
)
from dq_engine.oracle import OracleConfig
from dq_engine.privacy.grant import PrivacyGrant
from dq_engine.results import SynthesisResult

__all__ = ["SepFEMConfig", "sepfem"]


@dataclass(frozen=True, kw_only=True)
class SepFEMConfig:
    """Parameters of sepFEM.

    Attributes:
        epsilon_0: Pure ε₀ of each exponential-mechanism draw.
        noise_scale: η, the Laplace scale of the separator-query weights.
        samples: ``s``, Separator-FTPL samples (oracle calls) per round, >= 1.
        rounds: ``T``, number of exponential-mechanism draws (see :func:`dq_engine.mechanisms.fem.calibrate_fem`;
            sepFEM's cost is FEM's).
        burn_in: Fraction in [0, 1) of the first data-player rounds left out of the output.
        delta: δ used to report (ε, δ) costs, in (0, 1).
        oracle: Oracle settings (deterministic by default).
        workers: Processes for the oracle calls of a round.
        track_error: Record internal error-so-far in the diagnostics.
    """

    epsilon_0: float
    noise_scale: float
    samples: int
    rounds: int
    burn_in: float = 0.0
    delta: float = 1e-6
    oracle: OracleConfig = field(default_factory=default_fem_oracle)
    workers: int = 1
    track_error: bool = True

    def __post_init__(self) -> None:
        check_game_parameters(self)


def sepfem(
    data: Dataset,
    workload: Workload,
    config: SepFEMConfig,
    *,
    grant: PrivacyGrant,
    rng: np.random.Generator,
    progress: ProgressCallback | None = None,
    executor: Executor | None = None,
    constraints: Constraints | None = None,
) -> SynthesisResult:
    """Run sepFEM (Vietri et al. 2020, Algorithms 1 and 3) and return the union of the per-round samples.

    Args:
        data: Private dataset.
        workload: Positive k-way conjunction queries (closed under negation internally).
        config: Parameters.
        grant: The budget this run spends before it reads ``data`` (refused when it does not cover the run).
        rng: Generator.
        progress: Called after every data-player round with its diagnostics.
        executor: Runs each round's oracle calls instead of ``config.workers`` processes (see :func:`fem`).
        constraints: Public rules; every published sample keeps them (None: no rules).
    """
    return run_primal_game(
        data, workload, config, mechanism="sepfem", perturbation="separator-laplace", grant=grant,
        rng=rng, progress=progress, executor=executor, constraints=constraints,
    )
