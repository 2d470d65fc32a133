r"""Workloads of k-way marginal (conjunction) queries.

A k-way marginal query ``q_{S,y}(x) = 1[x_S = y]`` fixes values ``y`` of ``k`` distinct attributes ``S``
(DualQuery paper, Definition 5.1, generalised from bits to one-hot blocks). In bit terms it is the
conjunction of the ``k`` bits ``(S_i, y_i)``. Queries are stored grouped by their attribute set (the
*marginal*), so that answering a workload costs one contingency table per marginal, not a loop over queries.

Only the positive queries are stored. The query class used by the algorithms is closed under negation
(``q̄ = 1 - q``, paper §3.1): the negation of query ``i`` is represented by the pair ``(i, negated=True)``
wherever samples are drawn, and errors are reported on the positive queries, as the papers do.

For a natively binary attribute only the value 1 is queried (its bit), as in the paper's Netflix and
synthetic experiments; to query a value 0, declare the attribute categorical with two values.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dq_engine.data.domain import Domain
from dq_engine.data.rows import unique_rows
from dq_engine.errors import WorkloadError

__all__ = [
    "MAX_KWAY_MARGINALS",
    "MAX_WAY",
    "Workload",
    "WorkloadPart",
    "all_kway_marginals",
    "concatenate_workloads",
    "downward_closure_sets",
    "kway_attribute_sets",
    "kway_marginals",
    "marginal_queries",
    "random_marginals",
    "random_queries",
]

MAX_WAY = 5
"""Largest supported k."""

DEFAULT_MAX_QUERIES = 50_000_000
"""Builders refuse to enumerate more queries than this unless told otherwise (memory guard)."""

MAX_KWAY_MARGINALS = 2_000
"""Above this many k-way attribute sets (k >= 2), "all k-way marginals" becomes a public sample of this many
(:func:`kway_attribute_sets`): 2,000 sets are every pair of 63 columns, and a sample beyond that keeps the
workload and the fidelity evaluation linear in the schema's width."""


@dataclass(frozen=True, eq=False, kw_only=True)
class WorkloadPart:
    """One part of a concatenated workload.

    Attributes:
        description: The part's public description (e.g. ``"all 2-way marginals"``).
        positions: Position in the concatenated workload of each of the part's queries, in the part's own
            order, shape ``(N_part,)`` (a query shared with an earlier part has the same position in both).
        n_marginals: Number of marginals (attribute sets) of the part.
    """

    description: str
    positions: np.ndarray
    n_marginals: int

    @property
    def n_queries(self) -> int:
        """Number of the part's positive queries (before merging with the other parts)."""
        return int(self.positions.shape[0])


@dataclass(frozen=True, eq=False)
class Workload:
    """A set of positive k-way marginal queries, grouped by marginal.

    Attributes:
        domain: The public domain the queries are over.
        marginals: Attribute indices of each marginal, shape ``(M, kmax)``, ascending, padded with -1.
        query_marginal: Marginal index of each query, shape ``(N,)``, non-decreasing.
        query_values: Value code of each query on each of its marginal's attributes, shape ``(N, kmax)``,
            padded with -1.
        description: Human-readable, public description of how the workload was built.
        parts: For a workload concatenated from parts (:func:`concatenate_workloads`), where each part's
            queries are; empty otherwise.
    """

    domain: Domain
    marginals: np.ndarray
    query_marginal: np.ndarray
    query_values: np.ndarray
    description: str = ""
    parts: tuple[WorkloadPart, ...] = ()

    def __post_init__(self) -> None:
        if self.query_marginal.ndim != 1 or self.query_values.shape[0] != self.query_marginal.shape[0]:
            raise WorkloadError("query_marginal and query_values must describe the same number of queries")
        if len(self.query_marginal) == 0:
            raise WorkloadError("the workload is empty; give at least one query")
        if np.any(np.diff(self.query_marginal) < 0):
            raise WorkloadError("queries must be grouped by marginal (query_marginal non-decreasing)")
        ways = (self.marginals >= 0).sum(axis=1)
        if ways.min() < 1 or ways.max() > MAX_WAY:
            raise WorkloadError(f"marginals must have between 1 and {MAX_WAY} attributes")

    # ------------------------------------------------------------------ sizes
    def __len__(self) -> int:
        return int(self.query_marginal.shape[0])

    @property
    def n_queries(self) -> int:
        """Number of positive queries ``N`` (the query class has ``2N`` with negations)."""
        return len(self)

    @property
    def n_marginals(self) -> int:
        """Number of distinct attribute sets."""
        return int(self.marginals.shape[0])

    @cached_property
    def ways(self) -> np.ndarray:
        """``k`` of each marginal, shape ``(M,)``."""
        return (self.marginals >= 0).sum(axis=1)

    @cached_property
    def marginal_starts(self) -> np.ndarray:
        """Query offsets of each marginal, shape ``(M+1,)``: marginal ``j`` holds queries ``[s_j, s_{j+1})``."""
        return np.searchsorted(self.query_marginal, np.arange(self.n_marginals + 1)).astype(np.int64)

    @cached_property
    def query_bits(self) -> tuple[np.ndarray, ...]:
        """Bit index of each query's literals, one int32 array of shape ``(N,)`` per position.

        Positions beyond a query's ``k`` hold the sentinel ``domain.n_bits``, an always-true bit appended
        to every record before evaluation, so mixed-``k`` workloads evaluate with the same gathers.
        """
        sentinel = self.domain.n_bits
        attrs = self.marginals[self.query_marginal]
        columns = []
        for position in range(self.marginals.shape[1]):
            a = attrs[:, position]
            v = self.query_values[:, position]
            present = a >= 0
            safe_a = np.where(present, a, 0)
            bits = self.domain.offsets[safe_a] + np.where(self.domain.is_binary[safe_a], 0, v)
            columns.append(np.where(present, bits, sentinel).astype(np.int32))
        return tuple(columns)

    def marginal_names(self) -> list[str]:
        """Public names of the marginals, e.g. ``"age x sex x income"``."""
        names = self.domain.names
        return [" x ".join(names[a] for a in row if a >= 0) for row in self.marginals]

    @cached_property
    def _by_first_literal(self) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
        """Queries grouped by their first literal: ``(order, starts, other literal columns in that order)``.

        ``order[starts[b]:starts[b+1]]`` are the queries whose first literal is bit ``b``. Built once
        (one stable argsort) for :meth:`evaluate_record`.
        """
        first = self.query_bits[0]
        order = np.argsort(first, kind="stable")
        starts = np.searchsorted(first[order], np.arange(self.domain.n_bits + 2)).astype(np.int64)
        rest = tuple(np.ascontiguousarray(column[order]) for column in self.query_bits[1:])  # int32, like query_bits
        index_type = np.int32 if len(self) < 2**31 else np.int64
        return order.astype(index_type), starts, rest

    def evaluate_record(self, record_bits: np.ndarray) -> np.ndarray:
        """Value of every positive query on one bit record, shape ``(N,)`` bool.

        A query can hold only if its first literal is on, so only the queries whose first literal is one
        of the record's set bits are checked (about ``N · ones / n_bits`` of them); records with many set
        bits (dense binary domains) use a direct gather over all queries. Both give the same result.

        Args:
            record_bits: Bool array of shape ``(n_bits,)``.
        """
        extended = np.empty(self.domain.n_bits + 1, dtype=bool)
        extended[:-1] = record_bits
        extended[-1] = True
        order, starts, rest = self._by_first_literal
        on = np.flatnonzero(extended[:-1])
        lengths = starts[on + 1] - starts[on]
        candidates = int(lengths.sum())
        if candidates > len(self) // 4:
            columns = self.query_bits
            result = extended[columns[0]]
            for column in columns[1:]:
                result &= extended[column]
            return result
        # positions (in first-literal order) of every query whose first literal is on
        shift = np.repeat(starts[on] - (np.cumsum(lengths) - lengths), lengths)
        positions = np.arange(candidates, dtype=np.intp) + shift
        holds = np.ones(candidates, dtype=bool)
        for column in rest:
            holds &= extended[column[positions]]
        result = np.zeros(len(self), dtype=bool)
        result[order[positions[holds]]] = True
        return result

    def subset(self, marginal_ids: np.ndarray) -> Workload:
        """The workload restricted to the given marginals (in the given, ascending order)."""
        marginal_ids = np.asarray(sorted(set(int(m) for m in marginal_ids)), dtype=np.int64)
        starts = self.marginal_starts
        pieces = [np.arange(starts[m], starts[m + 1]) for m in marginal_ids]
        rows = np.concatenate(pieces)
        remap = np.full(self.n_marginals, -1, dtype=np.int64)
        remap[marginal_ids] = np.arange(len(marginal_ids))
        return Workload(
            domain=self.domain,
            marginals=self.marginals[marginal_ids],
            query_marginal=remap[self.query_marginal[rows]],
            query_values=self.query_values[rows],
            description=f"{self.description} (subset of {len(marginal_ids)} marginals)",
        )


# ---------------------------------------------------------------------- builders
def _value_ranges(domain: Domain, attrs: tuple[int, ...]) -> list[np.ndarray]:
    return [np.array([1]) if domain.is_binary[a] else np.arange(domain.sizes[a]) for a in attrs]


def _check_way(domain: Domain, k: int) -> None:
    if not 1 <= k <= MAX_WAY:
        raise WorkloadError(f"k ({k}) must be in 1..{MAX_WAY}")
    if k > len(domain):
        raise WorkloadError(f"k ({k}) exceeds the number of attributes ({len(domain)})")


def marginal_queries(
    domain: Domain,
    marginals: list[tuple[int, ...]] | list[tuple[str, ...]],
    *,
    max_queries: int = DEFAULT_MAX_QUERIES,
    description: str | None = None,
) -> Workload:
    """All queries of the given marginals (every value combination of each attribute set).

    Args:
        domain: Public domain.
        marginals: Attribute sets given as indices or names; each must have 1..5 distinct attributes.
        max_queries: Refuse to build more queries than this (memory guard).
        description: Public description stored on the workload.

    Raises:
        WorkloadError: On an empty list, repeated attributes, a duplicate marginal or too many queries.
    """
    if not marginals:
        raise WorkloadError("give at least one marginal")
    sets: list[tuple[int, ...]] = []
    for marginal in marginals:
        attrs = tuple(sorted(domain.index(a) if isinstance(a, str) else int(a) for a in marginal))
        if len(set(attrs)) != len(attrs):
            raise WorkloadError(f"marginal {marginal!r} repeats an attribute; a query fixes each attribute once")
        if not 1 <= len(attrs) <= MAX_WAY:
            raise WorkloadError(f"marginal {marginal!r} must have between 1 and {MAX_WAY} attributes")
        if any(a < 0 or a >= len(domain) for a in attrs):
            raise WorkloadError(f"marginal {marginal!r} refers to an attribute outside the domain")
        sets.append(attrs)
    if len(set(sets)) != len(sets):
        raise WorkloadError("a marginal appears twice in the list; give each attribute set once")
    sets.sort(key=lambda s: (len(s), s))
    total = sum(math.prod(len(r) for r in _value_ranges(domain, s)) for s in sets)
    if total > max_queries:
        raise WorkloadError(
            f"these marginals have {total:,} queries, more than max_queries={max_queries:,}; "
            "use random_queries or fewer marginals"
        )
    kmax = max(len(s) for s in sets)
    marginal_rows = np.full((len(sets), kmax), -1, dtype=np.int64)
    query_marginal = np.empty(total, dtype=np.int64)
    query_values = np.full((total, kmax), -1, dtype=np.int64)
    position = 0
    for j, attrs in enumerate(sets):
        marginal_rows[j, : len(attrs)] = attrs
        grids = np.meshgrid(*_value_ranges(domain, attrs), indexing="ij")
        values = np.stack([g.ravel() for g in grids], axis=1)
        query_marginal[position : position + len(values)] = j
        query_values[position : position + len(values), : len(attrs)] = values
        position += len(values)
    text = description or f"all queries of {len(sets)} marginals"
    return Workload(domain, marginal_rows, query_marginal, query_values, text)


def downward_closure_sets(workload: Workload) -> list[tuple[int, ...]]:
    """The attribute sets of the workload's marginals and of every marginal inside one, ordered by (k, attributes).

    AIM's candidates (McKenna, Mullins, Sheldon & Miklau 2022): a 3-way marginal brings its three 2-way and three
    1-way marginals. Public: the workload's shape only.
    """
    sets = {
        subset
        for row in workload.marginals
        for attrs in [tuple(int(a) for a in row if a >= 0)]
        for k in range(1, len(attrs) + 1)
        for subset in itertools.combinations(attrs, k)
    }
    return sorted(sets, key=lambda s: (len(s), s))


def all_kway_marginals(domain: Domain, k: int, *, max_queries: int = DEFAULT_MAX_QUERIES) -> Workload:
    """Every query of every k-way marginal of the domain."""
    _check_way(domain, k)
    sets = list(itertools.combinations(range(len(domain)), k))
    return marginal_queries(domain, sets, max_queries=max_queries, description=f"all {k}-way marginals")


def _random_attribute_sets(m: int, k: int, count: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """``count`` distinct k-subsets of ``range(m)``, each drawn uniformly (rejecting repeats), sorted."""
    chosen: set[tuple[int, ...]] = set()
    while len(chosen) < count:
        chosen.add(tuple(sorted(int(a) for a in rng.choice(m, size=k, replace=False))))
    return sorted(chosen)


def random_marginals(
    domain: Domain, k: int, count: int, rng: np.random.Generator, *, max_queries: int = DEFAULT_MAX_QUERIES
) -> Workload:
    """All queries of ``count`` distinct k-way attribute sets drawn uniformly (public, seeded generator).

    This is the workload of the FEM/RAP experiments ("64 random 3-way marginals").
    """
    _check_way(domain, k)
    available = math.comb(len(domain), k)
    if not 1 <= count <= available:
        raise WorkloadError(f"count ({count}) must be in 1..{available} (the number of {k}-way attribute sets)")
    return marginal_queries(
        domain,
        _random_attribute_sets(len(domain), k, count, rng),
        max_queries=max_queries,
        description=f"{count} random {k}-way marginals",
    )


def kway_attribute_sets(
    n_attributes: int, k: int, *, rng: np.random.Generator, limit: int = MAX_KWAY_MARGINALS
) -> tuple[list[tuple[int, ...]], int]:
    """Every k-subset of the attributes, or a public sample of ``limit`` of them when there are more.

    The rule shared by the workload builder (``all_kway`` parts) and the fidelity evaluation
    (:mod:`dq_engine.evaluation.fidelity`), so that "all 2-way marginals" stays bounded on wide schemas:

    * ``k = 1``: always all ``m`` attributes (linear in the schema, never sampled);
    * ``k >= 2``: all ``C(m, k)`` sets when there are at most ``limit``, else ``limit`` distinct sets drawn
      uniformly with ``rng``, which must be a *public* generator (seeded from a public seed, never from the
      data); the sets depend on the schema's width and the seed only.

    Args:
        n_attributes: Number of attributes ``m``.
        k: Attributes per set (1..5).
        rng: Public generator (used only when sampling).
        limit: Largest number of sets enumerated in full (>= 1).

    Returns:
        The sets (ascending tuples, sorted) and the number ``C(m, k)`` of all k-way sets.
    """
    if not 1 <= k <= min(MAX_WAY, n_attributes):
        raise WorkloadError(f"k ({k}) must be in 1..{min(MAX_WAY, n_attributes)} for {n_attributes} attributes")
    if limit < 1:
        raise WorkloadError(f"limit ({limit}) must be >= 1")
    available = math.comb(n_attributes, k)
    if k == 1 or available <= limit:
        return list(itertools.combinations(range(n_attributes), k)), available
    return _random_attribute_sets(n_attributes, k, limit, rng), available


def kway_marginals(
    domain: Domain,
    k: int,
    *,
    rng: np.random.Generator,
    max_marginals: int = MAX_KWAY_MARGINALS,
    max_queries: int = DEFAULT_MAX_QUERIES,
) -> Workload:
    """Every query of every k-way marginal, or of a public sample of ``max_marginals`` of them on wide schemas.

    The sets follow :func:`kway_attribute_sets`; the description says which (e.g. ``"all 2-way marginals"``
    or ``"2,000 of the 123,256 2-way marginals (public sample)"``).
    """
    _check_way(domain, k)
    sets, available = kway_attribute_sets(len(domain), k, rng=rng, limit=max_marginals)
    if len(sets) == available:
        description = f"all {k}-way marginals"
    else:
        description = f"{len(sets):,} of the {available:,} {k}-way marginals (public sample)"
    return marginal_queries(domain, sets, max_queries=max_queries, description=description)


def _sort_rows(rows: np.ndarray) -> np.ndarray:
    """``np.sort(rows, axis=1)`` for integer rows; widths 1-3 by min/max networks (no per-row sort call)."""
    width = rows.shape[1]
    if width <= 1:
        return rows.copy()
    if width == 2:
        return np.stack([np.minimum(rows[:, 0], rows[:, 1]), np.maximum(rows[:, 0], rows[:, 1])], axis=1)
    if width == 3:
        low, high = np.minimum(rows[:, 0], rows[:, 1]), np.maximum(rows[:, 0], rows[:, 1])
        middle, top = np.minimum(high, rows[:, 2]), np.maximum(high, rows[:, 2])
        return np.stack([np.minimum(low, middle), np.maximum(low, middle), top], axis=1)
    return np.sort(rows, axis=1)


def _distinct_attribute_draws(m: int, k: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` uniformly random k-subsets of ``range(m)`` as sorted rows (vectorised)."""
    picks = np.empty((size, k), dtype=np.int64)
    for j in range(k):
        draw = rng.integers(0, m - j, size=size)
        previous = _sort_rows(picks[:, :j])
        for column in range(j):  # shift past already-chosen attributes, in ascending order
            draw += draw >= previous[:, column]
        picks[:, j] = draw
    return _sort_rows(picks)


def random_queries(domain: Domain, k: int, count: int, rng: np.random.Generator) -> Workload:
    """``count`` distinct random "sensible" k-way queries (DualQuery paper §6.4).

    Each query draws ``k`` distinct attributes uniformly, then a value of each attribute uniformly (value 1
    for a binary attribute), so no query ever asks one attribute for two values. Duplicates are removed and
    drawing continues until ``count`` distinct queries exist.

    Raises:
        WorkloadError: If ``count`` exceeds the number of sensible k-way queries of the domain.
    """
    _check_way(domain, k)
    sizes = np.where(domain.is_binary, 1, domain.sizes).astype(float)
    # number of sensible queries = e_k(sizes), the k-th elementary symmetric polynomial
    elementary = np.zeros(k + 1)
    elementary[0] = 1.0
    for size in sizes:
        elementary[1:] = elementary[1:] + size * elementary[:-1]
    if count < 1 or count > elementary[k]:
        raise WorkloadError(f"count ({count}) must be in 1..{int(elementary[k]):,} (sensible {k}-way queries)")
    m = len(domain)
    # rows (attributes..., values...) are deduplicated through packed keys (dq_engine.data.rows): same distinct
    # rows in the same lexicographic order as numpy.unique(axis=0), without its slow structured sort
    radices = np.array([m] * k + [max(2, int(domain.sizes.max()))] * k, dtype=np.int64)
    collected = np.empty((0, 2 * k), dtype=np.int64)
    while collected.shape[0] < count:
        batch = max(1024, int(1.2 * (count - collected.shape[0])))
        attrs = _distinct_attribute_draws(m, k, batch, rng)
        upper = np.where(domain.is_binary[attrs], 1, domain.sizes[attrs])
        values = (rng.random(attrs.shape) * upper).astype(np.int64)
        values = np.where(domain.is_binary[attrs], 1, values)
        collected = unique_rows(np.concatenate([collected, np.hstack([attrs, values])]), radices)
    if collected.shape[0] > count:  # keep a uniformly random subset of the distinct draws
        keep = np.sort(rng.choice(collected.shape[0], size=count, replace=False))
        collected = collected[keep]
    attrs, values = collected[:, :k], collected[:, k:]
    marginal_rows, query_marginal = unique_rows(attrs, radices[:k], return_inverse=True)
    order = np.argsort(query_marginal, kind="stable")
    return Workload(
        domain,
        marginal_rows.astype(np.int64),
        query_marginal.ravel()[order].astype(np.int64),
        values[order].astype(np.int64),
        f"{count} random {k}-way queries",
    )


def concatenate_workloads(parts: list[Workload], *, description: str | None = None) -> Workload:
    """One workload holding every query of ``parts``, each query once.

    Marginals are identified by their attribute set: the queries of a marginal that appears in several parts
    (e.g. the same 3-way set drawn by two random parts) are merged, and a query in several parts is kept
    once, so no query is weighted twice by a mechanism. Marginals with different attribute sets stay
    separate even when one contains the other (a 1-way marginal is its own marginal beside every 2-way
    marginal that contains its column). The result is ordered like :func:`marginal_queries`: marginals by
    ``(k, attributes)``, queries of a marginal by cell (C order), so complete marginals keep the fast paths
    of :class:`~dq_engine.data.marginal_tables.MarginalIndex`. ``parts`` of the result records where each part's
    queries went, so each part's answers are ``answers[part.positions]``.

    Args:
        parts: Workloads over the same domain (at least one).
        description: Public description; default: the parts' descriptions with their sizes.

    Raises:
        WorkloadError: On no parts or parts over different domains.
    """
    if not parts:
        raise WorkloadError("give at least one workload part")
    domain = parts[0].domain
    if any(part.domain != domain for part in parts[1:]):
        raise WorkloadError("workload parts must be over the same domain")
    kmax = max(part.marginals.shape[1] for part in parts)
    m = len(domain)
    rows = []
    for part in parts:
        attrs = np.full((len(part), kmax), -1, dtype=np.int64)
        values = np.full((len(part), kmax), -1, dtype=np.int64)
        width = part.marginals.shape[1]
        attrs[:, :width] = part.marginals[part.query_marginal]
        values[:, :width] = part.query_values
        ways = (attrs >= 0).sum(axis=1, keepdims=True)
        # key (k, attributes + 1, values + 1): padding -1 becomes 0, so keys sort by k, then attribute set, then cell
        rows.append(np.hstack([ways, attrs + 1, values + 1]))
    keys = np.concatenate(rows)
    radices = np.array([kmax + 1] + [m + 1] * kmax + [int(domain.sizes.max()) + 1] * kmax, dtype=np.int64)
    distinct, inverse = unique_rows(keys, radices, return_inverse=True)
    marginal_rows, query_marginal = unique_rows(distinct[:, : 1 + kmax], radices[: 1 + kmax], return_inverse=True)
    ends = np.cumsum([len(part) for part in parts])
    records = tuple(
        WorkloadPart(
            description=part.description, positions=inverse[end - len(part) : end], n_marginals=part.n_marginals
        )
        for part, end in zip(parts, ends, strict=True)
    )
    if description is None:
        description = " + ".join(
            f"{part.description} ({part.n_marginals:,} marginals, {len(part):,} queries)" for part in parts
        )
    return Workload(
        domain,
        marginal_rows[:, 1:] - 1,
        query_marginal.astype(np.int64),
        distinct[:, 1 + kmax :] - 1,
        description,
        records,
    )
