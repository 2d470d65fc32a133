"""A fast numpy local search for the best-response MAX-CSP (iterated steepest ascent).

Moves change the value of one attribute (one bit on, one bit off inside a one-hot block, or one flip for
a binary attribute). Because no clause mentions two values of one attribute (sensible queries, DualQuery
paper §6.4), the gain of a move is the sum of a *turn-on* term of the new bit and a *turn-off* term of the
old bit. Both terms are kept per bit and updated **incrementally**: a move changes the literal counts of
the clauses of two bits only, and only those clauses' contributions to their (at most ``k``) bits' terms
change. A step therefore costs O(n_bits + literals of the touched clauses), not O(all literals).

When a problem has many touched attributes (:data:`BATCH_ATTRIBUTES` or more, e.g. thousands of binary
items), a step applies a *batch* of improving moves whose clause sets are pairwise disjoint (each chosen
move is the best-gain candidate in every clause it touches), so their gains add up exactly.

After a local optimum, a fraction of the touched attributes of the best record get random values and the
ascent restarts from there (iterated local search); the fraction cycles through
``perturb_fraction × (0.5, 1, 2, 5)`` so that, with the default 0.2, every fourth restart is a fresh random
record. The objective returned is recomputed exactly from the problem, never taken from the incremental
bookkeeping.

With public constraints on the problem (:class:`~dq_engine.data.constraints.Constraints`) the search only visits
feasible records: an infeasible start is repaired towards the constraints' witness; the best move is checked
before it is applied (only when a rule names its attribute: other moves cannot break a rule) and, if it would
complete a forbidden combination, masked so that the next best is tried (checking the chosen move costs one
feasibility test per step, where listing every blocked move cost several times more on Adult); a batch step
applies at most one move on a rule attribute, the best one that keeps the rules; and a perturbed restart is
repaired towards the best record so far.

Budget: at most ``max_restarts`` restarts and at most ``time_limit`` seconds, whichever comes first; the
first start is always completed. With ``time_limit=None`` the search is deterministic given its generator.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from dq_engine.oracle.problem import BestResponseProblem

__all__ = ["BATCH_ATTRIBUTES", "PERTURB_SCHEDULE", "LocalSearchResult", "local_search"]

BATCH_ATTRIBUTES = 256
"""Problems with at least this many touched attributes use batch steps of non-conflicting moves."""

PERTURB_SCHEDULE = (0.5, 1.0, 2.0, 5.0)
"""Restart ``r`` re-draws ``perturb_fraction · PERTURB_SCHEDULE[r mod 4]`` of the touched attributes (capped at
all of them): with the default 0.2 that cycles 10 %, 20 %, 40 %, 100 % (a fresh random record). On the
captured instances this cycle closed 62 % of the gap to the best known objective left by a fixed 20 %
(``docs/oracle.md``)."""

_EPSILON = 1e-9


@dataclass(frozen=True, kw_only=True)
class LocalSearchResult:
    """Outcome of :func:`local_search`.

    Attributes:
        codes: Best record found, as value codes ``(m,)``.
        objective: Its exact objective value.
        steps: Number of ascent steps applied (a batch step counts once).
        restarts: Number of perturbation restarts.
        seconds: Wall time.
        hit_time_limit: True when the wall-clock cap stopped the search.
        best_seconds: Wall time at which the best record was first reached.
    """

    codes: np.ndarray
    objective: float
    steps: int
    restarts: int
    seconds: float
    hit_time_limit: bool
    best_seconds: float = 0.0


class _State:
    """Literal counts per clause and incrementally maintained move terms per bit of one record.

    ``on_gain[b]`` = Σ over clauses ``c ∋ b`` of ``sw_c · [count_c = k_c - 1]`` (gain of turning ``b`` on when it
    is off) and ``off_loss[b]`` = Σ ``-sw_c · [count_c = k_c]`` (gain of turning ``b`` off when it is on), where
    ``sw_c`` is the clause weight, negative for a negated conjunction. Both arrays carry one extra slot (the
    padding bit of ``clause_bits``).
    """

    def __init__(self, problem: BestResponseProblem) -> None:
        domain = problem.domain
        self.problem = problem
        n_bits = domain.n_bits
        self.n_bits = n_bits
        self.rows, self.bits = problem.incidence
        self.k = problem.clause_size.astype(np.int64)
        self.signed_weight = np.where(problem.clause_negated, -1.0, 1.0) * problem.clause_weight.astype(float)
        self.padded_bits = np.where(problem.clause_bits >= 0, problem.clause_bits, n_bits).astype(np.intp)
        self.width = self.padded_bits.shape[1]
        self.bit_attribute = domain.bit_attribute
        self.bit_value = domain.bit_value
        self.offsets = domain.offsets
        self.is_binary = domain.is_binary
        self.binary_bit = domain.is_binary[domain.bit_attribute]
        touched = np.zeros(len(domain), dtype=bool)
        touched[problem.touched_attributes] = True
        self.touched_bit = touched[domain.bit_attribute]
        self.static_mask = np.where(self.touched_bit, 0.0, -np.inf)
        self.linear = problem.linear
        # bit -> clauses (CSR), for incremental count updates
        order = np.argsort(self.bits, kind="stable")
        self.by_bit_clause = self.rows[order]
        self.by_bit_ptr = np.searchsorted(self.bits[order], np.arange(n_bits + 1))
        # a clause with two bits of one attribute (never produced by sensible workloads) makes the two
        # halves of a move overlap; such problems take the de-duplicating update path
        attrs = np.where(problem.clause_bits >= 0, domain.bit_attribute[np.maximum(problem.clause_bits, 0)], -1)
        attrs = np.sort(attrs, axis=1)
        self.overlapping = bool(np.any((attrs[:, 1:] == attrs[:, :-1]) & (attrs[:, 1:] >= 0)))

    # ------------------------------------------------------------------ full (re)initialisation
    def set_codes(self, codes: np.ndarray) -> None:
        self.codes = np.asarray(codes, dtype=np.int64).copy()
        self.on = np.zeros(self.n_bits + 1, dtype=bool)
        self.on[: self.n_bits] = self.codes[self.bit_attribute] == self.bit_value
        self.current_bit = self.offsets + np.where(self.is_binary, 0, self.codes)
        self.count = np.bincount(self.rows, weights=self.on[self.bits], minlength=self.problem.n_clauses).astype(
            np.int64
        )
        sw = self.signed_weight[self.rows]
        c, k = self.count[self.rows], self.k[self.rows]
        size = self.n_bits + 1
        self.on_gain = np.bincount(self.bits, weights=sw * (c == k - 1), minlength=size)
        self.off_loss = np.bincount(self.bits, weights=-sw * (c == k), minlength=size)
        if self.linear is not None:
            self.on_gain[: self.n_bits] += self.linear
            self.off_loss[: self.n_bits] -= self.linear

    # ------------------------------------------------------------------ gains
    def gains(self) -> np.ndarray:
        """Gain of the move that turns each bit on (for an on binary bit: that turns it off)."""
        n = self.n_bits
        on = self.on[:n]
        categorical_gain = self.on_gain[:n] + self.off_loss[self.current_bit[self.bit_attribute]]
        gain = np.where(self.binary_bit, np.where(on, self.off_loss[:n], self.on_gain[:n]), categorical_gain)
        gain[on & ~self.binary_bit] = -np.inf
        gain += self.static_mask
        return gain

    # ------------------------------------------------------------------ moves
    def _clauses_of(self, bits: np.ndarray) -> np.ndarray:
        starts, ends = self.by_bit_ptr[bits], self.by_bit_ptr[bits + 1]
        lengths = ends - starts
        total = int(lengths.sum())
        shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        return self.by_bit_clause[np.arange(total) + shift]

    def apply(self, moves: np.ndarray) -> None:
        """Apply moves given as the bits to turn on (an on binary bit is turned off); attributes distinct."""
        moves = np.asarray(moves, dtype=np.intp)
        attributes = self.bit_attribute[moves]
        binary = self.is_binary[attributes]
        turn_on = moves[~binary | ~self.on[moves]]
        turn_off = np.concatenate([self.current_bit[attributes[~binary]], moves[binary & self.on[moves]]])
        # record and bit state
        self.on[turn_off] = False
        self.on[turn_on] = True
        self.codes[attributes] = np.where(binary, self.on[moves].astype(np.int64), self.bit_value[moves])
        self.current_bit[attributes] = np.where(binary, self.current_bit[attributes], moves)
        # clause counts
        off_clauses, on_clauses = self._clauses_of(turn_off), self._clauses_of(turn_on)
        clauses = np.concatenate([off_clauses, on_clauses])
        delta = np.concatenate([np.full(len(off_clauses), -1), np.ones(len(on_clauses), dtype=np.int64)])
        if self.overlapping:
            clauses, inverse = np.unique(clauses, return_inverse=True)
            delta = np.bincount(inverse, weights=delta, minlength=len(clauses)).astype(np.int64)
        old = self.count[clauses]
        new = old + delta
        self.count[clauses] = new
        # move terms of the bits of clauses whose full / one-short status changed
        k, sw = self.k[clauses], self.signed_weight[clauses]
        d_on = sw * ((new == k - 1).astype(float) - (old == k - 1))
        d_off = -sw * ((new == k).astype(float) - (old == k))
        changed = (d_on != 0) | (d_off != 0)
        if changed.any():
            bits = self.padded_bits[clauses[changed]].ravel()
            self.on_gain += np.bincount(bits, weights=np.repeat(d_on[changed], self.width), minlength=self.n_bits + 1)
            self.off_loss += np.bincount(
                bits, weights=np.repeat(d_off[changed], self.width), minlength=self.n_bits + 1
            )

    def batch(self, gain: np.ndarray) -> np.ndarray:
        """Improving moves with pairwise disjoint clause sets.

        The best move of each attribute is kept when it has the highest priority (gain, then lower attribute
        index) in every clause it touches, so no two kept moves share a clause and their gains add up.
        """
        per_attribute = np.maximum.reduceat(gain, self.offsets)
        candidates = np.flatnonzero(per_attribute > _EPSILON)
        if len(candidates) <= 1:
            return np.array([int(np.argmax(gain))], dtype=np.intp)
        is_best = (gain == per_attribute[self.bit_attribute]) & (gain > _EPSILON)
        best_bits = np.flatnonzero(is_best)
        _, first = np.unique(self.bit_attribute[best_bits], return_index=True)
        moves = best_bits[first]  # one bit per candidate attribute, in attribute order
        order = np.lexsort((self.bit_attribute[moves], -gain[moves]))
        priority = np.empty(len(moves), dtype=np.int64)
        priority[order] = np.arange(len(moves), 0, -1)
        attributes = self.bit_attribute[moves]
        other = np.where(self.is_binary[attributes], moves, self.current_bit[attributes])
        touched_bits = np.concatenate([moves, other])
        owner = np.concatenate([priority, priority])
        lengths = self.by_bit_ptr[touched_bits + 1] - self.by_bit_ptr[touched_bits]
        clauses = self._clauses_of(touched_bits)
        owners = np.repeat(owner, lengths)
        top = np.zeros(self.problem.n_clauses, dtype=np.int64)
        np.maximum.at(top, clauses, owners)
        beaten = np.bincount(np.repeat(np.arange(2 * len(moves)) % len(moves), lengths),
                             weights=top[clauses] != owners, minlength=len(moves))
        return moves[beaten == 0]


def local_search(
    problem: BestResponseProblem,
    starts: list[np.ndarray],
    rng: np.random.Generator,
    *,
    max_restarts: int = 30,
    perturb_fraction: float = 0.2,
    time_limit: float | None = 2.0,
    batch: bool | None = None,
) -> LocalSearchResult:
    """Iterated steepest-ascent local search.

    Args:
        problem: The best-response problem.
        starts: Initial records as value codes ``(m,)`` (e.g. the previous round's best response); the
            ascent runs from each, then from perturbations of the best record.
        rng: Generator for perturbations.
        max_restarts: Number of perturbation restarts after the given starts.
        perturb_fraction: Base fraction of the touched attributes re-drawn at random in a restart (at least
            one attribute; scaled by :data:`PERTURB_SCHEDULE`).
        time_limit: Wall-clock cap in seconds, or None for none (deterministic); the first start is always
            completed.
        batch: Batch steps of non-conflicting moves (None: when at least :data:`BATCH_ATTRIBUTES` attributes
            are touched).
    """
    began = time.perf_counter()
    domain = problem.domain
    touched = problem.touched_attributes
    state = _State(problem)
    use_batch = len(touched) >= BATCH_ATTRIBUTES if batch is None else batch
    constraints = problem.constraints if problem.constraints is not None and len(problem.constraints) else None
    if constraints is not None:
        rule_attribute = np.zeros(len(domain), dtype=bool)
        rule_attribute[constraints.attributes] = True
        everything = np.arange(len(domain))
        starts = [
            s if constraints.feasible(np.asarray(s)) else constraints.repair(s, constraints.witness_codes, everything)
            for s in starts
        ]
    best_codes, best_value, best_seconds = np.asarray(starts[0], dtype=np.int64).copy(), -np.inf, 0.0
    steps = restarts = 0
    hit_limit = False

    def keeps_rules(bit: int) -> bool:
        """Whether the move "turn ``bit`` on" leaves the (feasible) current record feasible."""
        attribute = int(domain.bit_attribute[bit])
        if not rule_attribute[attribute]:
            return True  # no rule names the attribute: the move cannot break one
        moved = state.codes.copy()
        moved[attribute] = 1 - moved[attribute] if domain.is_binary[attribute] else domain.bit_value[bit]
        return constraints.feasible(moved)

    def ascend() -> None:
        nonlocal steps
        while True:
            gain = state.gains()
            if use_batch:
                while True:
                    moves = state.batch(gain)
                    if not gain[moves[0]] > _EPSILON:
                        return
                    if constraints is None:
                        break
                    # at most one move on a rule attribute per batch, the best one that keeps the rules (moves on
                    # other attributes cannot break a rule); a batch left without moves retries without that bit
                    on_rule = rule_attribute[domain.bit_attribute[moves]]
                    ranked = moves[on_rule][np.argsort(-gain[moves[on_rule]], kind="stable")]
                    kept = next((int(b) for b in ranked if keeps_rules(int(b))), None)
                    gain[[int(b) for b in ranked if int(b) != kept]] = -np.inf
                    moves = np.sort(np.append(moves[~on_rule], [] if kept is None else [kept])).astype(np.intp)
                    if len(moves):
                        break
            else:
                while True:  # the best move that keeps the rules (a blocked move is masked, the next one tried)
                    bit = int(np.argmax(gain))
                    if not gain[bit] > _EPSILON:
                        return
                    if constraints is None or keeps_rules(bit):
                        break
                    gain[bit] = -np.inf
                moves = np.array([bit], dtype=np.intp)
            state.apply(moves)
            steps += 1

    satisfied_when_full = ~problem.clause_negated
    weight = problem.clause_weight.astype(float)

    def score() -> float:  # exact: integer counts, integer-valued weights summed in float64
        value = float(weight[(state.count == state.k) == satisfied_when_full].sum())
        if problem.linear is not None:
            value += float(problem.linear[state.on[: state.n_bits]].sum())
        return value

    for number in range(len(starts) + max_restarts):
        if number > 0 and time_limit is not None and time.perf_counter() - began > time_limit:
            hit_limit = True
            break
        start = starts[number] if number < len(starts) else None
        if start is None:
            if len(touched) == 0:
                break
            fraction = min(1.0, perturb_fraction * PERTURB_SCHEDULE[restarts % len(PERTURB_SCHEDULE)])
            n_perturb = min(len(touched), max(1, round(fraction * len(touched))))
            chosen = rng.choice(touched, size=n_perturb, replace=False)
            codes = best_codes.copy()
            codes[chosen] = (rng.random(len(chosen)) * domain.sizes[chosen]).astype(np.int64)
            if constraints is not None:
                codes = constraints.repair(codes, best_codes, chosen)
            restarts += 1
        else:
            codes = start
        state.set_codes(codes)
        ascend()
        value = score()
        if value > best_value:
            best_value, best_codes = value, state.codes.copy()
            best_seconds = time.perf_counter() - began
    exact = float(problem.objective(domain.encode_records(best_codes[None, :]))[0])
    return LocalSearchResult(
        codes=best_codes,
        objective=exact,
        steps=steps,
        restarts=restarts,
        seconds=time.perf_counter() - began,
        hit_time_limit=hit_limit,
        best_seconds=best_seconds,
    )
