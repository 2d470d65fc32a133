"""Public constraints on records: edit rules and structural zeros as forbidden combinations of values.

A census bureau publishes with *edit rules* ("a person under 15 is never married") and *structural zeros* ("no
record has both a capital gain and a capital loss"). Both are public facts about the domain, so a mechanism may
use them at no privacy cost. Every such rule is a set of **forbidden combinations**: a record is *infeasible*
when, for some combination, every attribute listed takes one of the listed codes.

A combination is ``(rule name, ((attribute index, allowed codes), ...))``: each pair is a *literal*, true when
the record's value of that attribute is one of the codes. An implication ``age < 15 → marital = Never-married``
becomes one combination: ``age ∈ {buckets below 15} ∧ marital ∈ {every other value}``. A rule may have several
combinations (a recode has one per source value); they share the rule's name. The translation from the schema
file's syntax lives in :mod:`dqrelease.inputs.rules`; this module only knows codes.

Invariants (checked on construction): attribute indices and codes lie in the domain; each literal has at least
one code (a literal no value satisfies would make the combination vacuous: drop it instead); each combination
has at least one literal, and its attributes are distinct. A literal may list every value of its attribute (it
is then always true). ``witness``, when given, is a feasible record: the one the oracle, the local search and
the free-attribute filler fall back to (found once per run by CP-SAT:
:func:`dq_engine.oracle.feasible.with_witness`).

Everything is vectorised over records of value codes, shape ``(r, m)``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from dq_engine.data.domain import Domain
from dq_engine.errors import ConfigError, InfeasibleConstraintsError

__all__ = ["Combination", "Constraints", "Literal"]

_MAX_GROUP_CELLS = 1 << 20
"""Largest joint table (cells) :meth:`Constraints.feasible` builds for one attribute set."""

Literal = tuple[int, tuple[int, ...]]
"""``(attribute index, codes that make the literal true)``."""

Combination = tuple[str, tuple[Literal, ...]]
"""``(rule name, literals)``: a record satisfying every literal is infeasible."""


@dataclass(frozen=True, kw_only=True)
class Constraints:
    """Forbidden combinations of values over a public domain (see the module docstring).

    Attributes:
        domain: The public domain the codes refer to.
        combinations: The forbidden combinations, each ``(rule name, ((attribute, codes), ...))``. Normalised on
            construction: codes sorted and distinct, literals sorted by attribute.
        witness: A known feasible record (value codes, one per attribute), or None.
    """

    domain: Domain
    combinations: tuple[Combination, ...]
    witness: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        m = len(self.domain)
        normalised: list[Combination] = []
        for combination in self.combinations:
            name, literals = combination
            if not isinstance(name, str) or not name:
                raise ConfigError("every forbidden combination needs a non-empty rule name")
            if len(literals) == 0:
                raise ConfigError(f"rule {name!r}: a combination without literals would forbid every record")
            clean: list[Literal] = []
            for attribute, codes in literals:
                attribute = int(attribute)
                if not 0 <= attribute < m:
                    raise ConfigError(f"rule {name!r}: attribute index {attribute} is outside 0..{m - 1}")
                size = int(self.domain.sizes[attribute])
                codes = tuple(sorted({int(c) for c in codes}))
                label = self.domain.attributes[attribute].name
                if not codes:
                    raise ConfigError(f"rule {name!r}: the literal on {label!r} lists no value, so it never holds")
                if codes[0] < 0 or codes[-1] >= size:
                    raise ConfigError(f"rule {name!r}: a code of {label!r} is outside 0..{size - 1}")
                clean.append((attribute, codes))
            attributes = [a for a, _ in clean]
            if len(set(attributes)) != len(attributes):
                raise ConfigError(f"rule {name!r}: a combination names an attribute twice; merge its values")
            normalised.append((name, tuple(sorted(clean))))
        object.__setattr__(self, "combinations", tuple(normalised))
        if self.witness is not None:
            witness = tuple(int(v) for v in self.witness)
            if len(witness) != m or not bool(self.feasible(np.array(witness))):
                raise InfeasibleConstraintsError("the witness given is not a feasible record of these constraints")
            object.__setattr__(self, "witness", witness)

    # ------------------------------------------------------------------ structure
    def __len__(self) -> int:
        """Number of forbidden combinations ``K``."""
        return len(self.combinations)

    @property
    def rule_names(self) -> tuple[str, ...]:
        """The distinct rule names, in order of first appearance."""
        return tuple(dict.fromkeys(name for name, _ in self.combinations))

    @cached_property
    def attributes(self) -> np.ndarray:
        """Sorted indices of the attributes that appear in some combination."""
        return np.array(sorted({a for _, literals in self.combinations for a, _ in literals}), dtype=np.int64)

    @cached_property
    def _tables(self) -> tuple[tuple[tuple[int, np.ndarray], ...], ...]:
        """Per combination, per literal: ``(attribute, truth table over the attribute's codes)``."""
        tables = []
        for _, literals in self.combinations:
            row = []
            for attribute, codes in literals:
                table = np.zeros(int(self.domain.sizes[attribute]), dtype=bool)
                table[list(codes)] = True
                row.append((attribute, table))
            tables.append(tuple(row))
        return tuple(tables)

    @cached_property
    def _groups(self) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """Combinations merged by attribute set: ``(attributes, forbidden table over their joint codes)``.

        A recode's many two-literal combinations over the same two attributes become one table lookup, so
        :meth:`feasible` costs one gather per distinct attribute set instead of one per combination. Attribute
        sets whose joint table would exceed :data:`_MAX_GROUP_CELLS` cells stay per combination.
        """
        tables: dict[tuple[int, ...], np.ndarray] = {}
        for literals in self._tables:
            attributes = tuple(a for a, _ in literals)
            shape = tuple(len(table) for _, table in literals)
            cells = np.prod(shape, dtype=np.float64)
            forbidden = np.ones((), dtype=bool)
            if cells > _MAX_GROUP_CELLS:
                continue  # checked literal by literal (see _large)
            for _, table in literals:
                forbidden = np.logical_and.outer(forbidden, table)
            if attributes in tables:
                tables[attributes] |= forbidden
            else:
                tables[attributes] = forbidden
        return tuple((np.array(a, dtype=np.int64), t) for a, t in tables.items())

    def combination_attributes(self, k: int) -> np.ndarray:
        """Attributes of combination ``k``."""
        return np.array([a for a, _ in self.combinations[k][1]], dtype=np.int64)

    def involving(self, attributes: np.ndarray) -> np.ndarray:
        """Indices of the combinations with at least one attribute in ``attributes``."""
        chosen = np.zeros(len(self.domain), dtype=bool)
        chosen[np.asarray(attributes, dtype=np.int64)] = True
        return np.array(
            [k for k, (_, literals) in enumerate(self.combinations) if any(chosen[a] for a, _ in literals)],
            dtype=np.int64,
        )

    def closure(self, attributes: np.ndarray) -> np.ndarray:
        """``attributes`` plus every attribute linked to them through a chain of combinations (sorted).

        Every combination is then either inside the result (all its attributes) or disjoint from it. The CP-SAT
        best response makes the closure of the touched attributes its variables: a rule whose attributes are all
        variables is a model constraint, any other rule involves only attributes fixed at a feasible record's
        values, so it holds too.
        """
        inside = np.zeros(len(self.domain), dtype=bool)
        inside[np.asarray(attributes, dtype=np.int64)] = True
        members = [self.combination_attributes(k) for k in range(len(self))]
        changed = True
        while changed:
            changed = False
            for attrs in members:
                if inside[attrs].any() and not inside[attrs].all():
                    inside[attrs] = True
                    changed = True
        return np.flatnonzero(inside)

    @cached_property
    def components(self) -> tuple[np.ndarray, ...]:
        """The rule attributes split into groups no combination links (connected components, sorted).

        Feasibility factorises over them: a record is feasible exactly when each component's values are, so a
        sampler may redraw only the components a record breaks.
        """
        seen = np.zeros(len(self.domain), dtype=bool)
        out = []
        for attribute in self.attributes:
            if not seen[attribute]:
                component = self.closure(np.array([attribute]))
                seen[component] = True
                out.append(component)
        return tuple(out)

    def broken_components(self, codes: np.ndarray) -> np.ndarray:
        """``(r, C)`` bool: record ``i`` breaks a combination inside component ``c`` of :attr:`components`."""
        violated = self.violated(codes)
        component_of = np.zeros(len(self.domain), dtype=np.int64)
        for c, attributes in enumerate(self.components):
            component_of[attributes] = c
        owner = np.array([component_of[literals[0][0]] for _, literals in self.combinations], dtype=np.int64)
        out = np.zeros((violated.shape[0], len(self.components)), dtype=bool)
        for c in range(len(self.components)):
            out[:, c] = violated[:, owner == c].any(axis=1)
        return out

    def component_records(self, c: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Every joint value of component ``c``'s attributes and whether it keeps the rules, or None if too many.

        Returns:
            ``(values, feasible)``: values ``(J, |component|)`` in C order over the component's attributes, and a
            bool ``(J,)``; None when ``J`` exceeds :data:`_MAX_GROUP_CELLS` (sample by rejection instead).
        """
        attributes = self.components[c]
        sizes = [int(self.domain.sizes[a]) for a in attributes]
        if np.prod(sizes, dtype=np.float64) > _MAX_GROUP_CELLS:
            return None
        values = np.stack([g.ravel() for g in np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij")], axis=1)
        records = np.zeros((len(values), len(self.domain)), dtype=np.int64)
        records[:, attributes] = values
        # the combinations involving a component lie inside it: the other attributes' values do not matter
        return values, self.restrict(self.involving(attributes)).feasible(records)

    def restrict(self, combinations: np.ndarray) -> Constraints:
        """The constraints made of the combinations with the given indices (same domain and witness)."""
        chosen = tuple(self.combinations[int(k)] for k in np.asarray(combinations, dtype=np.int64))
        return Constraints(domain=self.domain, combinations=chosen, witness=self.witness)

    def with_witness(self, record: np.ndarray) -> Constraints:
        """A copy whose witness is ``record`` (checked to be feasible)."""
        return replace(self, witness=tuple(int(v) for v in np.asarray(record).ravel()))

    @property
    def witness_codes(self) -> np.ndarray:
        """The witness as an ``int64`` array ``(m,)``.

        Raises:
            InfeasibleConstraintsError: No witness was set (find one with
                :func:`dq_engine.oracle.feasible.with_witness`).
        """
        if self.witness is None:
            raise InfeasibleConstraintsError(
                "these constraints carry no feasible record; find one first with dq_engine.oracle.feasible.with_witness"
            )
        return np.array(self.witness, dtype=np.int64)

    # ------------------------------------------------------------------ evaluation
    @cached_property
    def _sets(self) -> tuple[tuple[tuple[int, frozenset[int]], ...], ...]:
        """Per combination, ``(attribute, codes)`` pairs as Python sets: one record is checked faster in Python."""
        return tuple(tuple((a, frozenset(codes)) for a, codes in literals) for _, literals in self.combinations)

    def _violated_one(self, record: list[int]) -> list[int]:
        """Indices of the combinations one record (a list of codes) violates."""
        return [k for k, literals in enumerate(self._sets) if all(record[a] in codes for a, codes in literals)]

    def violated(self, codes: np.ndarray) -> np.ndarray:
        """``(r, K)`` bool: record ``i`` satisfies every literal of combination ``k``.

        One gather of every literal's truth and one sum per combination (literals are stored combination by
        combination), whatever ``K`` is.
        """
        codes = self._records(codes)
        if len(self) == 0:
            return np.zeros((codes.shape[0], 0), dtype=bool)
        flat = self._flat
        truth = flat["table"][flat["table_start"] + codes[:, flat["attribute"]]]
        first = np.concatenate([[0], np.cumsum(flat["size"])[:-1]])
        return np.add.reduceat(truth.astype(np.int32), first, axis=1) == flat["size"]

    def feasible(self, codes: np.ndarray, *, attributes: np.ndarray | None = None) -> np.ndarray:
        """``(r,)`` bool: the record breaks no combination (a bool for a single record ``(m,)``).

        Args:
            codes: Records ``(r, m)`` or one record ``(m,)``.
            attributes: Check only the combinations involving these attributes (for records known to keep the
                others, e.g. after changing only these attributes of feasible records).
        """
        single = np.ndim(codes) == 1
        if single and attributes is None:  # one record (the oracle, the filler): Python sets beat numpy calls
            record = self._records(codes)[0].tolist()
            return not any(all(record[a] in c for a, c in literals) for literals in self._sets)
        records = self._records(codes)
        result = np.ones(records.shape[0], dtype=bool)
        chosen = None
        if attributes is not None:
            chosen = np.zeros(len(self.domain), dtype=bool)
            chosen[np.asarray(attributes, dtype=np.int64)] = True
        for group_attributes, table in self._groups:
            if chosen is not None and not chosen[group_attributes].any():
                continue
            result &= ~table[tuple(records[:, a] for a in group_attributes)]
        for k in self._large:
            if chosen is not None and not chosen[self.combination_attributes(k)].any():
                continue
            hit = np.ones(records.shape[0], dtype=bool)
            for a, table in self._tables[k]:
                hit &= table[records[:, a]]
            result &= ~hit
        return bool(result[0]) if single else result

    @cached_property
    def _large(self) -> tuple[int, ...]:
        """Combinations too large for a joint table (checked literal by literal)."""
        return tuple(
            k for k, literals in enumerate(self._tables)
            if np.prod([len(t) for _, t in literals], dtype=np.float64) > _MAX_GROUP_CELLS
        )

    def forbidden_mask(self) -> np.ndarray:
        """Bool tensor of shape ``domain.sizes``: True on every infeasible record of the universe (small domains)."""
        shape = tuple(int(s) for s in self.domain.sizes)
        mask = np.zeros(shape, dtype=bool)
        for literals in self._tables:
            hit = np.ones((1,) * len(shape), dtype=bool)
            for a, table in literals:
                view = [1] * len(shape)
                view[a] = len(table)
                hit = hit & table.reshape(view)
            mask |= hit
        return mask

    def violations_by_rule(self, codes: np.ndarray) -> dict[str, int]:
        """Number of records breaking each rule (at least one of its combinations); every rule listed."""
        violated = self.violated(codes)
        names = np.array([name for name, _ in self.combinations], dtype=object)
        return {rule: int(violated[:, names == rule].any(axis=1).sum()) for rule in self.rule_names}

    @cached_property
    def _flat(self) -> dict[str, np.ndarray]:
        """Every literal in flat arrays, combination by combination (for the vectorised :meth:`violated`).

        ``attribute``: each literal's attribute; ``table``/``table_start``: the truth tables concatenated;
        ``size``: literals per combination.
        """
        attribute, tables = [], []
        for literals in self._tables:
            for a, table in literals:
                attribute.append(a)
                tables.append(table)
        lengths = np.array([len(t) for t in tables], dtype=np.int64)
        return {
            "attribute": np.array(attribute, dtype=np.int64),
            "table": np.concatenate(tables) if tables else np.zeros(0, dtype=bool),
            "table_start": np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64),
            "size": np.array([len(literals) for literals in self._tables], dtype=np.int64),
        }

    # ------------------------------------------------------------------ repair
    def repair(self, codes: np.ndarray, reference: np.ndarray, free: np.ndarray) -> np.ndarray:
        """Make records feasible by resetting free attributes of violated combinations to ``reference``'s values.

        Repeats until no combination is violated: for every violated combination of a record, each of the
        combination's attributes that is *free* takes the reference's value.

        Why it terminates with feasible records, when ``reference`` is feasible and every record agrees with it
        on the attributes that are not free: take a record ``x`` and a combination it violates. The reference
        ``y`` does not violate it, so some literal of the combination holds on ``x`` and fails on ``y``; its
        attribute has ``x_a ≠ y_a``, so it is free (``x`` agrees with ``y`` elsewhere) and is reset to ``y_a``.
        Each pass over a still-infeasible record therefore enlarges the set of attributes on which it agrees with
        ``y`` (values only ever move to ``y``'s), so after at most ``|free|`` passes it is feasible; in the worst
        case it has become ``y`` itself, which is feasible.

        Args:
            codes: Records ``(r, m)`` (or one record ``(m,)``); not modified.
            reference: A feasible record ``(m,)``, or one per record ``(r, m)``.
            free: Indices of the attributes the repair may change (or a bool mask ``(m,)``).

        Returns:
            Feasible records of the same shape as ``codes``.

        Raises:
            InfeasibleConstraintsError: A violated combination has no free attribute differing from the reference
                (the preconditions above do not hold).
        """
        single = np.ndim(codes) == 1
        out = self._records(codes).copy()
        reference = np.broadcast_to(np.asarray(reference, dtype=out.dtype), out.shape)
        free_mask = np.zeros(len(self.domain), dtype=bool)
        free_mask[np.asarray(free)] = True
        if single:
            return self._repair_one(out[0], reference[0], free_mask)
        if self.feasible(out).all():  # the common case, one gather per attribute set
            return out[0] if single else out
        members = [self.combination_attributes(k) for k in range(len(self))]
        movable = [attrs[free_mask[attrs]] for attrs in members]
        for _ in range(int(free_mask.sum()) + 1):
            violated = self.violated(out)
            rows = violated.any(axis=1)
            if not rows.any():
                return out[0] if single else out
            before = out[rows].copy()
            for k in np.flatnonzero(violated.any(axis=0)):
                hit = np.flatnonzero(violated[:, k])
                out[np.ix_(hit, movable[k])] = reference[np.ix_(hit, movable[k])]
            if np.array_equal(before, out[rows]):
                break
        raise InfeasibleConstraintsError(
            "cannot repair records towards the reference: it is infeasible or differs from them on an attribute "
            "that is not free"
        )

    def _repair_one(self, codes: np.ndarray, reference: np.ndarray, free_mask: np.ndarray) -> np.ndarray:
        """:meth:`repair` of one record, in Python (the local search repairs one record per restart)."""
        record, target, movable = codes.tolist(), reference.tolist(), free_mask.tolist()
        for _ in range(sum(movable) + 1):
            broken = self._violated_one(record)
            if not broken:
                return np.array(record, dtype=codes.dtype)
            changed = False
            for k in broken:
                for a, _ in self._sets[k]:
                    if movable[a] and record[a] != target[a]:
                        record[a] = target[a]
                        changed = True
            if not changed:
                break
        raise InfeasibleConstraintsError(
            "cannot repair records towards the reference: it is infeasible or differs from them on an attribute "
            "that is not free"
        )

    # ------------------------------------------------------------------ helpers
    def _records(self, codes: np.ndarray) -> np.ndarray:
        codes = np.asarray(codes)
        codes = codes[None, :] if codes.ndim == 1 else codes
        if codes.ndim != 2 or codes.shape[1] != len(self.domain):
            raise ConfigError(f"records must have shape (r, {len(self.domain)}), got {codes.shape}")
        return codes
