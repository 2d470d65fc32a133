"""A fast numpy local search for the best-response MAX-CSP (iterated steepest ascent).

Moves change the value of one attribute (one bit on, one bit off inside a one-hot block, or one flip for
a binary attribute). Because no clause mentions two values of one attribute (sensible queries), the gain of
a move is the sum of a *turn-off* term of the old bit and a *turn-on* term of the new bit, and all gains
are computed at once from per-clause counts with two ``bincount`` calls (O(literals + bits) per step).
After a local optimum, ``perturb`` random touched attributes get random values and the ascent restarts
from there (iterated local search); the best record seen is kept.

The search is deterministic given its generator and its step budget; the wall-clock limit is a safety
cap (recorded when hit) that makes it non-reproducible only when it binds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from dq_engine.oracle.problem import BestResponseProblem

__all__ = ["LocalSearchResult", "local_search"]


@dataclass(frozen=True, kw_only=True)
class LocalSearchResult:
    """Outcome of :func:`local_search`.

    Attributes:
        codes: Best record found, as value codes ``(m,)``.
        objective: Its objective value.
        steps: Number of ascent moves applied.
        restarts: Number of perturbation restarts.
        seconds: Wall time.
        hit_time_limit: True when the wall-clock cap stopped the search.
    """

    codes: np.ndarray
    objective: float
    steps: int
    restarts: int
    seconds: float
    hit_time_limit: bool


class _State:
    """Clause counts and move gains of one record."""

    def __init__(self, problem: BestResponseProblem, codes: np.ndarray) -> None:
        domain = problem.domain
        self.problem = problem
        self.rows, self.bits = problem.incidence
        self.k = problem.clause_size
        self.sign = np.where(problem.clause_negated, -1.0, 1.0)
        self.weight = problem.clause_weight.astype(float)
        self.signed_weight = self.sign * self.weight
        self.bit_attribute = domain.bit_attribute
        self.bit_value = domain.bit_value
        self.binary_bit = domain.is_binary[domain.bit_attribute]
        self.offsets = domain.offsets
        self.is_binary = domain.is_binary
        self.n_bits = domain.n_bits
        self.linear = problem.linear
        # bit -> clauses (CSR), for incremental count updates
        order = np.argsort(self.bits, kind="stable")
        self.by_bit_clause = self.rows[order]
        self.by_bit_ptr = np.searchsorted(self.bits[order], np.arange(self.n_bits + 1))
        touched = np.zeros(self.n_bits, dtype=bool)
        touched[domain.offsets[problem.touched_attributes]] = True
        self.touched_bit = np.isin(self.bit_attribute, problem.touched_attributes)
        self.set_codes(codes)

    def set_codes(self, codes: np.ndarray) -> None:
        self.codes = codes.copy()
        self.on = self._bits_on(self.codes)
        self.count = np.bincount(self.rows, weights=self.on[self.bits], minlength=self.problem.n_clauses)

    def _bits_on(self, codes: np.ndarray) -> np.ndarray:
        return codes[self.bit_attribute] == self.bit_value

    def objective(self) -> float:
        full = self.count == self.k
        satisfied = np.where(self.problem.clause_negated, ~full, full)
        value = float(self.weight[satisfied].sum())
        if self.linear is not None:
            value += float(self.linear[self.on].sum())
        return value

    def gains(self) -> np.ndarray:
        """Gain of the move that turns each bit on (its attribute takes the bit's value)."""
        c = self.count[self.rows]
        k = self.k[self.rows]
        sw = self.signed_weight[self.rows]
        on_gain = np.bincount(self.bits, weights=sw * (c == k - 1), minlength=self.n_bits)
        off_loss = np.bincount(self.bits, weights=-sw * (c == k), minlength=self.n_bits)
        if self.linear is not None:
            on_gain = on_gain + self.linear
            off_loss = off_loss - self.linear
        # categorical: gain(v) = on_gain[b_v] + off_loss[b_u]; binary: flip gain
        current_bit = self.offsets + np.where(self.is_binary, 0, self.codes)
        gain = on_gain + np.where(self.binary_bit, 0.0, off_loss[current_bit[self.bit_attribute]])
        binary_on = self.binary_bit & self.on
        gain[binary_on] = off_loss[binary_on]
        gain[~self.binary_bit & self.on] = -np.inf
        gain[~self.touched_bit] = -np.inf
        return gain

    def apply(self, bit: int) -> None:
        attribute = self.bit_attribute[bit]
        if self.is_binary[attribute]:
            changed = [(bit, not self.on[bit])]
            self.codes[attribute] = 1 - self.codes[attribute]
        else:
            old_bit = self.offsets[attribute] + self.codes[attribute]
            changed = [(old_bit, False), (bit, True)]
            self.codes[attribute] = self.bit_value[bit]
        for b, state in changed:
            self.on[b] = state
            clauses = self.by_bit_clause[self.by_bit_ptr[b] : self.by_bit_ptr[b + 1]]
            self.count[clauses] += 1.0 if state else -1.0


def local_search(
    problem: BestResponseProblem,
    starts: list[np.ndarray],
    rng: np.random.Generator,
    *,
    max_restarts: int = 30,
    perturb_fraction: float = 0.2,
    time_limit: float = 2.0,
) -> LocalSearchResult:
    """Iterated steepest-ascent local search.

    Args:
        problem: The best-response problem.
        starts: Initial records as value codes ``(m,)`` (e.g. the previous round's best response); the
            ascent runs from each, then from perturbations of the best record.
        rng: Generator for perturbations.
        max_restarts: Number of perturbation restarts after the given starts.
        perturb_fraction: Fraction of the touched attributes re-drawn at random in a restart (at least 1).
        time_limit: Wall-clock cap in seconds.
    """
    began = time.perf_counter()
    domain = problem.domain
    touched = problem.touched_attributes
    state = _State(problem, starts[0])
    best_codes, best_value = starts[0].copy(), -np.inf
    steps = restarts = 0
    hit_limit = False

    def ascend() -> None:
        nonlocal steps
        while True:
            gain = state.gains()
            bit = int(np.argmax(gain))
            if not gain[bit] > 1e-9:
                return
            state.apply(bit)
            steps += 1

    plan: list[np.ndarray | None] = [*starts, *([None] * max_restarts)]
    for start in plan:
        if time.perf_counter() - began > time_limit:
            hit_limit = True
            break
        if start is None:
            if len(touched) == 0:
                break
            codes = best_codes.copy()
            n_perturb = max(1, round(perturb_fraction * len(touched)))
            chosen = rng.choice(touched, size=min(n_perturb, len(touched)), replace=False)
            codes[chosen] = (rng.random(len(chosen)) * domain.sizes[chosen]).astype(np.int64)
            restarts += 1
        else:
            codes = start
        state.set_codes(codes)
        ascend()
        value = state.objective()
        if value > best_value:
            best_value, best_codes = value, state.codes.copy()
    return LocalSearchResult(
        codes=best_codes,
        objective=float(best_value),
        steps=steps,
        restarts=restarts,
        seconds=time.perf_counter() - began,
        hit_time_limit=hit_limit,
    )
