"""A distribution over records represented by weighted particles, with resample-move refreshes.

Used by MWEM on particles (:mod:`dq_engine.fit.mwem`, ``support="sampled"``) and by the table fit that calibrates
a synthesizer's records against noisy marginals (:mod:`dq_engine.fit.table_fit`). Everything here is
post-processing: it reads only the particles, the noisy measurements it is given and public randomness.

With public constraints (:class:`~dq_engine.data.constraints.Constraints`, optional) the particles stay in the feasible
set: they must be feasible on construction, and a Metropolis-Hastings proposal that breaks a rule is rejected, so
each move targets ``A`` restricted to the feasible records (its density times the indicator of feasibility).
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

from dq_engine.data.constraints import Constraints
from dq_engine.data.marginal_tables import MarginalIndex, record_cells
from dq_engine.errors import InfeasibleConstraintsError
from dq_engine.privacy.rng import spawn

__all__ = ["MOVE_SHARD_PARTICLES", "MoveShard", "ParticleDistribution", "move_shard"]

MOVE_SHARD_PARTICLES = 50_000
"""Particles per shard of a Metropolis-Hastings sweep: each shard moves with a generator of its own, so the moves
are the same bytes whether the shards run here one after another or on the workers of a cluster (an executor).
A public constant: the shards depend on the number of particles only, never on the data or the workers."""


class ParticleDistribution:
    """``A`` represented by weighted particles (support records), with optional resample-move refreshes.

    MW over the universe started at the prior ``P0`` keeps ``A`` log-linear in the measured marginals:
    ``A(x) ∝ P0(x) · exp(Σ_m θ_m[cell_m(x)])``, where ``θ_m`` accumulates every update applied to marginal
    ``m``. The particles are a self-normalised importance sample of ``A``: drawn from ``P0`` with equal
    weights, each update multiplies a particle's weight by ``exp(Δθ_m[cell_m(x)])``. A *refresh*
    (``support_moves > 0``) resamples the particles by weight when the effective sample size drops below
    half and then moves every particle with Metropolis-Hastings steps that target ``A`` exactly: attribute
    ``a`` proposes a value from ``P0_a`` and accepts with probability ``min(1, exp(Δθ))`` (the prior and
    proposal terms cancel). Only ``θ`` and the particles are touched: a refresh is post-processing.

    Args:
        codes: The particles, value codes ``(r, m)``.
        priors: ``P0``'s factor of each attribute (probability vectors).
        index: The marginals' cell index.
        rng: Generator of the refreshes.
        constraints: Public rules the particles keep (every particle must be feasible), or None.
        executor: Runs the shards of each Metropolis-Hastings sweep (:func:`move_shard`, one ``submit`` each; e.g.
            a Dask cluster's executor); None moves them here, one after another, with the same result.

    Raises:
        InfeasibleConstraintsError: A particle breaks a rule of ``constraints``.
    """

    def __init__(
        self,
        codes: np.ndarray,
        priors: list[np.ndarray],
        index: MarginalIndex,
        rng: np.random.Generator,
        *,
        constraints: Constraints | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.executor = executor
        self.constraints = constraints if constraints is not None and len(constraints) else None
        if self.constraints is not None and not self.constraints.feasible(codes).all():
            raise InfeasibleConstraintsError("every particle must keep the constraints; draw or repair them first")
        self.codes = np.asfortranarray(codes)  # column access (one attribute of every particle) is the hot path
        self.priors = priors
        self.index = index
        self.rng = rng
        self.p = np.full(codes.shape[0], 1.0 / codes.shape[0])
        self.theta: dict[int, np.ndarray] = {}
        self._cells: dict[int, np.ndarray] = {}

    def _cells_of(self, m: int) -> np.ndarray:
        if m not in self._cells:
            self._cells[m] = self.index.cells(m, self.codes)
        return self._cells[m]

    def table(self, m: int, weights: np.ndarray | None = None) -> np.ndarray:
        """Marginal ``m`` of the weighted particles (cell probabilities, C order), under ``weights`` if given."""
        weights = self.p if weights is None else weights
        return np.bincount(self._cells_of(m), weights=weights, minlength=int(self.index.n_cells[m]))

    def weights_after(self, factors: dict[int, np.ndarray]) -> np.ndarray:
        """The weights ``A(x) · exp(Σ_m factors[m][cell_m(x)])``, normalised, without changing ``A``."""
        log = np.zeros(self.p.shape[0])
        for m, factor in factors.items():
            log += factor[self._cells_of(m)]
        weights = self.p * np.exp(log - log.max())
        return weights / weights.sum()

    def set_weights(self, weights: np.ndarray, factors: dict[int, np.ndarray]) -> None:
        """Make ``weights`` (from :meth:`weights_after` with ``factors``) ``A``'s, adding ``factors`` to ``θ``."""
        self.p = weights
        for m, factor in factors.items():
            self.theta[m] = self.theta.get(m, 0.0) + factor

    def apply(self, m: int, cells: np.ndarray, values: np.ndarray, learning_rate: float) -> np.ndarray:
        """The MW update of the measured cells; ``θ_m`` keeps the running sum of the log factors.

        Returns the residuals ``values - A_cells`` before the update.
        """
        table = self.table(m)
        residual = values - table[cells]
        log_factor = np.zeros(int(self.index.n_cells[m]))
        log_factor[cells] = learning_rate * residual
        log_factor -= log_factor.max()
        if m not in self.theta:
            self.theta[m] = np.zeros(int(self.index.n_cells[m]))
        self.theta[m] += log_factor
        self.p = self.p * np.exp(log_factor[self._cells_of(m)])
        self.p /= self.p.sum()
        return residual

    def refresh(self, moves: int) -> None:
        """Resample when the effective sample size is below half, then ``moves`` MH sweeps."""
        if self.effective_size() < 0.5 * self.codes.shape[0]:
            self._resample()
        self._move(moves)

    def rejuvenate(self, moves: int) -> None:
        """Resample to equal weights, then ``moves`` MH sweeps: particles to publish rows from.

        After the last updates the weights can sit on few particles, and a particle of weight ``k/n`` is published
        ``k`` times: the published table then varies more than a sample of ``A`` would, on every marginal (pairs
        that ``A`` keeps independent included). Resampling, then moving every particle with the kernel that
        leaves ``A`` invariant, leaves equally weighted particles spread over ``A``'s records. Post-processing: it
        reads ``θ``, the particles and public randomness only.
        """
        self._resample()
        self._move(moves)

    def effective_size(self) -> float:
        """The weights' effective sample size ``1 / Σ p²`` (equal weights: the number of particles)."""
        return float(1.0 / np.sum(self.p**2))

    def _resample(self) -> None:
        r = self.codes.shape[0]
        positions = (self.rng.random() + np.arange(r)) / r  # systematic resampling
        chosen = np.minimum(np.searchsorted(np.cumsum(self.p), positions), r - 1)
        self.codes = np.asfortranarray(self.codes[chosen])
        self.p = np.full(r, 1.0 / r)
        self._cells.clear()

    def _move(self, moves: int) -> None:
        """``moves`` Metropolis-Hastings sweeps of every particle, by shards of :data:`MOVE_SHARD_PARTICLES`."""
        measured = sorted(self.theta)
        if not measured or moves == 0:
            return
        r = self.codes.shape[0]
        bounds = [(start, min(start + MOVE_SHARD_PARTICLES, r)) for start in range(0, r, MOVE_SHARD_PARTICLES)]
        generators = spawn(self.rng, len(bounds))
        local = self.executor is None  # here each shard moves its slice of the particles and cached cells in place
        # to the workers the codes travel in the narrowest type that holds every value (a shard is then small)
        largest = max(len(prior) for prior in self.priors)
        dtype = self.codes.dtype if local else np.uint8 if largest <= 256 else np.uint16 if largest <= 65536 else None
        tasks = [
            MoveShard(
                codes=self.codes[start:stop].astype(dtype or self.codes.dtype, copy=False),
                theta={m: self.theta[m] for m in measured},
                attributes={m: self.index.attributes[m] for m in measured},
                strides={m: self.index.strides[m] for m in measured}, priors=self.priors,
                constraints=self.constraints, rng=rng, moves=moves,
                cells={m: self._cells_of(m)[start:stop] for m in measured} if local else None,
            )
            for (start, stop), rng in zip(bounds, generators, strict=True)
        ]
        if local:  # no copy: the particles' memory stays what the plan forecast
            for task in tasks:
                move_shard(task)
            for m in [m for m in self._cells if m not in self.theta]:  # an unmeasured marginal's cells are stale
                del self._cells[m]
        else:  # one submission per shard: each travels alone (a map would send every shard in one graph)
            futures = [self.executor.submit(move_shard, task) for task in tasks]
            moved = [future.result()[0] for future in futures]
            self.codes = np.asfortranarray(np.concatenate(moved).astype(self.codes.dtype))
            self._cells.clear()  # recomputed from the moved particles when next needed
        # weights are unchanged by the moves: each MH kernel leaves the current A invariant, which is the
        # resample-move SMC step (Del Moral, Doucet & Jasra 2006, with the time-reversal backward kernel)

    def snapshot(self) -> np.ndarray:
        """A copy of the particle weights."""
        return self.p.copy()

    def records(self, probabilities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The distinct particles and their total weight under ``probabilities`` (normalised)."""
        distinct, inverse = np.unique(self.codes, axis=0, return_inverse=True)
        weights = np.bincount(inverse.ravel(), weights=probabilities, minlength=len(distinct))
        return distinct.astype(np.int64), weights / weights.sum()


# ---------------------------------------------------------------------- one shard's moves
@dataclass(frozen=True, kw_only=True)
class MoveShard:
    """What one shard's Metropolis-Hastings sweeps need (all of it post-processing: no private data).

    Attributes:
        codes: The shard's particles ``(r_s, d)``.
        theta: ``θ_m`` of every measured marginal.
        attributes: The measured marginals' attributes.
        strides: The measured marginals' cell strides.
        priors: ``P0``'s factor of each attribute (the proposals).
        constraints: Public rules a move must keep, or None.
        rng: The shard's own generator.
        moves: Sweeps over the attributes.
        cells: The particles' cells of the measured marginals when the caller has them: then ``codes`` and ``cells``
            are the caller's arrays (views), moved in place. None: ``codes`` is copied and the cells computed here.
    """

    codes: np.ndarray
    theta: dict[int, np.ndarray]
    attributes: dict[int, np.ndarray]
    strides: dict[int, np.ndarray]
    priors: list[np.ndarray]
    constraints: Constraints | None
    rng: np.random.Generator
    moves: int
    cells: dict[int, np.ndarray] | None = None


def move_shard(task: MoveShard) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """Move the shard's particles with ``task.moves`` Metropolis-Hastings sweeps.

    Attribute ``a`` proposes a value from ``P0_a``, accepted with probability ``min(1, exp(Δθ))``
    (:class:`ParticleDistribution`); a proposal that breaks a public rule is rejected.

    Returns:
        The moved particles, and their cells of the measured marginals when ``task`` gave cells (its own arrays;
        else empty).
    """
    in_place = task.cells is not None
    codes = task.codes if in_place else np.array(task.codes, order="F")
    r, d = codes.shape
    rng, constraints = task.rng, task.constraints
    measured = sorted(task.theta)
    cells = task.cells if in_place else {m: record_cells(codes, task.attributes[m], task.strides[m]) for m in measured}
    touching = {a: [m for m in measured if a in set(task.attributes[m].tolist())] for a in range(d)}
    on_rule = np.zeros(d, dtype=bool)
    if constraints is not None:
        on_rule[constraints.attributes] = True
    strides = {(m, a): int(task.strides[m][list(task.attributes[m]).index(a)])
               for a, marginals in touching.items() for m in marginals}
    for _ in range(task.moves):
        for a, marginals in touching.items():
            if not marginals:
                continue
            prior = task.priors[a]
            proposal = rng.choice(len(prior), size=r, p=prior)
            uniforms = rng.random(r)
            old = codes[:, a].copy()
            moved = proposal != old  # an unchanged particle is accepted and stays: nothing to compute
            if on_rule[a]:  # a proposal that breaks a public rule is rejected: the target is A on feasible records
                codes[:, a] = np.where(moved, proposal, old)
                moved &= constraints.feasible(codes, attributes=np.array([a]))
                codes[:, a] = old
            rows = np.flatnonzero(moved)
            # a changed attribute moves the particle's cell of marginal m by (new - old) x the attribute's stride
            shift = proposal[rows].astype(np.int64) - old[rows]
            before = {m: cells[m][rows] for m in marginals}
            after = {m: before[m] + shift * strides[m, a] for m in marginals}
            current = sum(task.theta[m][before[m]] for m in marginals)
            proposed = sum(task.theta[m][after[m]] for m in marginals)
            accept = np.log(uniforms[rows]) < proposed - current
            chosen = rows[accept]
            codes[chosen, a] = proposal[chosen]
            for m in marginals:
                cells[m][chosen] = after[m][accept]
    return codes, (cells if in_place else {})  # a worker's cells stay there: the driver recomputes them

