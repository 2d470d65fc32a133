"""Tables sampled from the bnlearn Bayesian networks: known structure, where most pairs of columns are independent.

The shared data folder's ``bnlearn/`` holds gzipped BIF files of five networks of the bnlearn repository (M. Scutari;
ALARM, Beinlich et al. 1989; CHILD, Spiegelhalter et al. 1993; HAILFINDER, Abramson et al. 1996; HEPAR II, Onisko
2003; INSURANCE, Binder et al. 1997). A table of ``rows`` records is drawn from a network by forward sampling (each
variable after its parents, from its conditional probability table) with a fixed public seed; the benchmarks then
treat it as the private table. A synthesizer that invents dependence between columns the network keeps apart
shows it at once against a table of independent columns.

Only the part of BIF these files use is read: ``variable`` blocks with ``type discrete [ k ] { ... }`` and
``probability`` blocks with a ``table`` line (no parents) or one line per parent configuration.
"""

from __future__ import annotations

import dataclasses
import gzip
import re
from pathlib import Path

import numpy as np

SAMPLE_SEED = 20_261_126
"""The public seed of every table drawn here (the tables are public test data, not a release)."""

_VARIABLE = re.compile(r"variable\s+(\S+)\s*\{\s*type\s+discrete\s*\[\s*(\d+)\s*\]\s*\{([^}]*)\}\s*;\s*\}", re.S)
_PROBABILITY = re.compile(r"probability\s*\(\s*([^|)]+?)\s*(?:\|\s*([^)]*))?\)\s*\{([^}]*)\}", re.S)
_ROW = re.compile(r"\(([^)]*)\)\s*([^;]*);")


class BifError(ValueError):
    """A BIF file this reader cannot use (the message names the variable and what is wrong)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Variable:
    """One discrete variable: its states and its conditional probability table.

    Attributes:
        name: The variable's name.
        states: Its states, in the file's order (code ``i`` is ``states[i]``).
        parents: The parents' names, in the table's order.
        table: Shape ``(prod(parent sizes), len(states))``: row ``r`` is the distribution given the parents'
            codes whose mixed-radix number (first parent most significant) is ``r``.
    """

    name: str
    states: tuple[str, ...]
    parents: tuple[str, ...]
    table: np.ndarray


@dataclasses.dataclass(frozen=True, kw_only=True)
class Network:
    """A Bayesian network: variables in the file's order, and an order in which every parent precedes its child."""

    variables: tuple[Variable, ...]
    order: tuple[int, ...]

    @property
    def sizes(self) -> dict[str, int]:
        """``{name: number of states}`` in the file's order (the column order of sampled tables)."""
        return {v.name: len(v.states) for v in self.variables}


def read_bif(path: Path) -> Network:
    """Read a (gzipped or plain) BIF file.

    Raises:
        BifError: A variable without a probability block, a parent that is not a variable, a row of the wrong
            length, probabilities that do not sum to 1 (to 1e-6 after the file's rounding), or a cycle.
    """
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")
    states: dict[str, tuple[str, ...]] = {}
    for name, size, values in _VARIABLE.findall(text):
        names = tuple(s.strip() for s in values.split(",") if s.strip())
        if len(names) != int(size):
            raise BifError(f"variable {name} declares {size} states and lists {len(names)}")
        states[name] = names
    tables: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}
    for child, given, body in _PROBABILITY.findall(text):
        child = child.strip()
        parents = tuple(p.strip() for p in given.split(",") if p.strip()) if given else ()
        if child not in states or any(p not in states for p in parents):
            raise BifError(f"probability block of {child} names an undeclared variable")
        tables[child] = (parents, _table(child, parents, body, states))
    missing = [name for name in states if name not in tables]
    if missing:
        raise BifError(f"variables without a probability block: {', '.join(missing)}")
    variables = tuple(
        Variable(name=name, states=states[name], parents=tables[name][0], table=tables[name][1]) for name in states
    )
    return Network(variables=variables, order=_topological_order(variables))


def _table(child: str, parents: tuple[str, ...], body: str, states: dict[str, tuple[str, ...]]) -> np.ndarray:
    size = len(states[child])
    if not parents:
        match = re.search(r"table\s+([^;]*);", body)
        if match is None:
            raise BifError(f"probability block of {child} has no table line")
        table = np.array([[float(x) for x in match.group(1).split(",")]])
    else:
        radix = [len(states[p]) for p in parents]
        table = np.full((int(np.prod(radix)), size), np.nan)
        for labels, values in _ROW.findall(body):
            codes = [states[p].index(label.strip()) for p, label in zip(parents, labels.split(","), strict=True)]
            table[int(np.ravel_multi_index(codes, radix))] = [float(x) for x in values.split(",")]
        if np.isnan(table).any():
            raise BifError(f"probability block of {child} misses some parent configurations")
    if table.shape[1] != size or not np.allclose(table.sum(axis=1), 1.0, atol=1e-6):
        raise BifError(f"probability rows of {child} are not distributions over its {size} states")
    return table / table.sum(axis=1, keepdims=True)


def _topological_order(variables: tuple[Variable, ...]) -> tuple[int, ...]:
    index = {v.name: i for i, v in enumerate(variables)}
    order: list[int] = []
    placed: set[int] = set()
    while len(order) < len(variables):
        ready = [i for i, v in enumerate(variables)
                 if i not in placed and all(index[p] in placed for p in v.parents)]
        if not ready:
            raise BifError("the network has a cycle")
        order.extend(ready)
        placed.update(ready)
    return tuple(order)


def forward_sample(network: Network, rows: int, rng: np.random.Generator) -> np.ndarray:
    """``rows`` independent records of the network, as codes of shape ``(rows, len(network.variables))``."""
    index = {v.name: i for i, v in enumerate(network.variables)}
    codes = np.zeros((rows, len(network.variables)), dtype=np.int64)
    for column in network.order:
        variable = network.variables[column]
        if variable.parents:
            radix = [len(network.variables[index[p]].states) for p in variable.parents]
            parent_codes = tuple(codes[:, index[p]] for p in variable.parents)
            row = np.ravel_multi_index(parent_codes, radix)
        else:
            row = np.zeros(rows, dtype=np.int64)
        cumulative = np.cumsum(variable.table, axis=1)[row]
        drawn = (rng.random(rows)[:, None] >= cumulative).sum(axis=1)
        codes[:, column] = np.minimum(drawn, len(variable.states) - 1)  # u above a row's rounded total
    return codes


def independent_pairs(network: Network) -> set[tuple[int, int]]:
    """Column pairs ``(i, j)``, ``i < j``, that the network makes independent (d-separated given nothing).

    Two variables are marginally independent exactly when they share no ancestor (a variable is its own ancestor):
    without conditioning, every open path between them runs through a common ancestor.
    """
    index = {v.name: i for i, v in enumerate(network.variables)}
    ancestors: dict[int, set[int]] = {}
    for column in network.order:  # parents first
        own = {column}
        for parent in network.variables[column].parents:
            own |= ancestors[index[parent]]
        ancestors[column] = own
    k = len(network.variables)
    return {(i, j) for i in range(k) for j in range(i + 1, k) if not ancestors[i] & ancestors[j]}
