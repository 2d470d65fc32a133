"""Run a schema suite on one collapsed frame of a table through Great Expectations.

:mod:`expectations.validate` collapses a table in DuckDB to distinct values with their numbers of rows
(:class:`Collapsed`, the validation frames of :mod:`expectations.frame`) and sends each frame here, in this process
or in the side process (:mod:`dqrelease.runtime.side_process`). Each frame is checked with its part of the suite: a
table frame with the table expectations (column set, row count), a column frame with its column's expectations, a
rule frame with its rules'. A column expectation's unexpected count is the sum of
:data:`~expectations.frame.ROWS_COLUMN` at the positions GX lists as unexpected (``unexpected_index_list``); a rule
expectation's observed value (that sum under the rule's condition) is the number of rows breaking the rule. What
comes back is plain data (:class:`Outcome`), never a GX object, so the caller needs no GX import and nothing but the
three public things of a result (the expectation, the schema column and a count) crosses the process boundary.

Columns whose checks are the same up to the column's name, and check each value on its own (in a set, not null, a
pattern, a range: :data:`_VALUE_BY_VALUE`), are listed in :attr:`SuiteShape.stacks`: their column frames may be sent
*stacked*, one under the other in one frame (:attr:`Collapsed.members`), and checked by one column's expectations
at once. What Great Expectations costs is about 20 ms per expectation it evaluates, whatever the frame's length, so
a 10,000-column binary table cost 10,000 frames × 2 expectations a pass; stacked, it costs two. The unexpected
positions are given back to the members by the frame rows each holds, so the outcomes are those of the frames one
by one.

Invariants:

* One ephemeral GX context per process (cached), progress bars off, analytics off (see ``expectations``).
* Results are requested complete (row positions) but with ``partial_unexpected_count = 0``; only counts are read
  from them: no value of the table is in an :class:`Outcome`.
* Suites are built here from a :class:`SuiteSpec` (public schema and suite kind), once per process and spec, and
  split once per part. The spec crosses the process boundary once: :func:`suite_shape` keeps it in the process
  that checks the frames, under its digest (:attr:`SuiteShape.suite`), and :func:`check_chunk` is given the digest.
  Sent with every frame, a 10,000-column schema cost 0.16 s of pickling a frame, one frame per column.
* Importing this module does not import GX (the first call does): the caller's process uses its types and names
  its functions without paying GX's import when the side process does the work.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from dqrelease.expectations.frame import NUMBER_SUFFIX, ROWS_COLUMN, number_column
from dqrelease.inputs.schema import Schema

if TYPE_CHECKING:
    import great_expectations as gx

__all__ = ["COLUMN_SET", "Collapsed", "Outcome", "SuiteShape", "SuiteSpec", "check_chunk", "suite_shape", "warm_up"]

COLUMN_SET = "expect_table_columns_to_match_set"

_VALUE_BY_VALUE = frozenset({
    "expect_column_values_to_be_in_set",
    "expect_column_values_to_not_be_null",
    "expect_column_values_to_match_regex",
    "expect_column_values_to_be_between",
})
"""Column expectations that judge each value alone (no ``mostly``): a stacked frame's verdict is its members'."""

_RESULT_FORMAT = {"result_format": "COMPLETE", "partial_unexpected_count": 0, "include_unexpected_rows": False,
                  "return_unexpected_index_query": False}


@dataclass(frozen=True, kw_only=True)
class SuiteSpec:
    """Which suite to build (:mod:`expectations.suite`): public inputs only.

    Attributes:
        schema: The public schema.
        kind: ``"raw"`` (:func:`~expectations.suite.build_suite`) or ``"published"``
            (:func:`~expectations.suite.build_published_suite`).
        layout: For ``"raw"``: ``"wide"`` or ``"baskets"``.
        numeric_values: For ``"published"``: how the decoded numbers look.
        single_value_numbers: For ``"published"`` with bucket labels: one-value integer buckets are numbers.
    """

    schema: Schema
    kind: Literal["raw", "published"]
    layout: Literal["wide", "baskets"] = "wide"
    numeric_values: Literal["bucket_label", "uniform"] = "bucket_label"
    single_value_numbers: bool = True

    @cached_property
    def digest(self) -> str:
        """SHA-256 of everything that decides the suite (the schema is not hashable); computed once per object."""
        text = (f"{self.kind}|{self.layout}|{self.numeric_values}|{self.single_value_numbers}|"
                f"{self.schema.model_dump_json()}")
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, kw_only=True)
class SuiteShape:
    """What the caller needs to know of a suite before streaming: public, from the schema.

    Attributes:
        numbers: Numeric columns whose derived ``"<name> (as number)"`` column some expectation reads.
        rules: The public rules the suite counts broken rows of, in the suite's order.
        rule_columns: For each rule (same order): the schema columns it names (its rule frame's columns).
        order: ``(expectation, column)`` of every expectation, in the suite's order (that of the failures).
        suite: The spec's digest (:attr:`SuiteSpec.digest`), which :func:`check_chunk` takes.
        stacks: Sets of two or more columns whose column frames may be stacked (see the module docstring), in
            schema order.
    """

    numbers: tuple[str, ...]
    rules: tuple[str, ...]
    rule_columns: tuple[tuple[str, ...], ...] = ()
    order: tuple[tuple[str, str], ...] = ()
    suite: str = ""
    stacks: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Collapsed:
    """One frame of a table collapsed to distinct values (:mod:`expectations.frame`), and what checks it.

    Attributes:
        values: Text columns. Table frame: every column of the table, one row of NULLs (none when the table is
            empty). Column frame: distinct values of ``column``; rule frame: distinct combinations of the rules'
            columns; both with their numbers of rows in :data:`~expectations.frame.ROWS_COLUMN`.
        column: A column frame's column (its expectations check it), or None.
        rules: A rule frame's rules (all on the same columns), or empty.
        numbers: The numeric columns of ``values`` to add a derived ``DOUBLE`` column for.
        members: For column frames of one of :attr:`SuiteShape.stacks` stacked into one: each member column and
            the number of frame rows it holds, in frame order (``column`` is the first member's, and its column of
            ``values`` holds every member's values); empty for a frame of one column.
    """

    values: pd.DataFrame
    column: str | None = None
    rules: tuple[str, ...] = ()
    numbers: tuple[str, ...] = ()
    members: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """One expectation's result on one chunk, reduced to what may leave the validation.

    Attributes:
        expectation: The GX expectation type.
        column: The schema column it checks (``"(table)"`` for a table-level expectation).
        rule: The public rule it counts the broken rows of, or None.
        success: Whether the chunk met it.
        unexpected_count: Rows of the chunk that did not (0 when GX gives none).
        observed_value: A rule expectation's count of rows under the rule's condition.
        raised: GX raised while evaluating it (its text is dropped: it may quote data).
        missing: For the column-set expectation: schema columns the table lacks (names, public).
        undeclared: For the column-set expectation: table columns the schema does not declare.
    """

    expectation: str
    column: str
    rule: str | None
    success: bool
    unexpected_count: int
    observed_value: int
    raised: bool
    missing: tuple[str, ...] = ()
    undeclared: tuple[str, ...] = ()


def warm_up() -> None:
    """Build the process's GX context (what the validation process does while the run starts)."""
    _batch_definition()


_SPECS: dict[str, SuiteSpec] = {}


def suite_shape(spec: SuiteSpec) -> SuiteShape:
    """The derived number columns, the rules and the order of the spec's suite; keeps the spec for :func:`check_chunk`.

    Call it in the process that will check the frames (the side process, or this one without it) before them.
    """
    _SPECS.setdefault(spec.digest, spec)
    suite = _suite(spec)
    numbers: list[str] = []
    rules: list[str] = []
    rule_columns: list[tuple[str, ...]] = []
    for expectation in suite.expectations:
        meta = expectation.meta or {}
        numbers += [meta["number_of"]] if "number_of" in meta else []
        numbers += list(meta.get("numbers_of") or [])
        if "rule" in meta:
            rules.append(meta["rule"])
            rule_columns.append(tuple(meta["columns"]))
    order = tuple(_key(expectation.configuration) for expectation in suite.expectations)
    numbers = list(dict.fromkeys(numbers))
    return SuiteShape(numbers=tuple(numbers), rules=tuple(rules), rule_columns=tuple(rule_columns),
                      order=order, suite=spec.digest, stacks=_stacks(spec, set(numbers)))


def check_chunk(chunk: Collapsed, *, suite: str) -> list[Outcome]:
    """Validate one collapsed frame of a table with its part of a suite (see :class:`Collapsed`).

    Args:
        chunk: The frame.
        suite: The suite's :attr:`SuiteShape.suite`, from :func:`suite_shape` called in this process.

    Raises:
        LookupError: If :func:`suite_shape` was not called in this process for that suite.
    """
    spec = _SPECS.get(suite)
    if spec is None:
        raise LookupError(f"suite {suite[:12]} is not known in this process: call suite_shape with its spec first")

    frame = chunk.values.copy()
    for name in chunk.numbers:  # NaN where the value is not a number
        frame[number_column(name)] = pd.to_numeric(frame[name], errors="coerce").astype("float64")
    batch = _batch_definition().get_batch(batch_parameters={"dataframe": frame})
    results = batch.validate(_suite_part(spec, chunk.column, chunk.rules), result_format=_RESULT_FORMAT).results
    rows = frame[ROWS_COLUMN].to_numpy() if ROWS_COLUMN in frame else None
    if not chunk.members:
        return [_outcome(result, rows) for result in results]
    names = [name for name, _ in chunk.members]
    owner = np.repeat(np.arange(len(names)), [size for _, size in chunk.members])
    return [outcome for result in results for outcome in _member_outcomes(result, rows, owner, names)]


# ---------------------------------------------------------------------- GX
@cache
def _batch_definition() -> Any:
    """The process's one GX context, pandas datasource and whole-frame batch definition."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    asset = context.data_sources.add_pandas("dqrelease").add_dataframe_asset("validation_frame")
    return asset.add_batch_definition_whole_dataframe("chunk")


_SUITES: dict[str, Any] = {}


def _suite(spec: SuiteSpec) -> gx.ExpectationSuite:
    """The spec's suite, built once per process and spec."""
    from dqrelease.expectations.suite import build_published_suite, build_suite

    key = spec.digest
    if key not in _SUITES:
        if spec.kind == "raw":
            _SUITES[key] = build_suite(spec.schema, layout=spec.layout)
        else:
            _SUITES[key] = build_published_suite(spec.schema, numeric_values=spec.numeric_values,
                                                 single_value_numbers=spec.single_value_numbers)
    return _SUITES[key]


def _suite_part(spec: SuiteSpec, column: str | None, rules: tuple[str, ...]) -> gx.ExpectationSuite:
    """The expectations of one frame's kind (see :class:`Collapsed`), in the suite's order; built once each."""
    import great_expectations as gx

    key = f"{spec.digest}|part|{column!r}|{list(rules)}"
    if key not in _SUITES:
        suite = _suite(spec)
        by_rule, by_column = _suite_index(spec)
        if rules:
            chosen = [expectation for rule, expectation in by_rule if rule in rules]
        else:
            chosen = by_column.get(column if column is not None else "(table)", [])
        _SUITES[key] = gx.ExpectationSuite(name=f"{suite.name}-part", expectations=chosen)
    return _SUITES[key]


_INDEXES: dict[str, tuple[list[tuple[str, Any]], dict[str, list[Any]]]] = {}


def _suite_index(spec: SuiteSpec) -> tuple[list[tuple[str, Any]], dict[str, list[Any]]]:
    """The spec's rule expectations with their rules, and its other expectations by schema column, in suite order.

    Built once per spec: reading every expectation's configuration (GX builds it anew each time) for each frame's
    part made validating a table of ``m`` columns cost time in proportion to ``m``² (about 6 minutes at 2,000).
    """
    if spec.digest in _INDEXES:
        return _INDEXES[spec.digest]
    by_rule: list[tuple[str, Any]] = []
    by_column: dict[str, list[Any]] = {}
    for expectation in _suite(spec).expectations:
        meta = expectation.meta or {}
        if "rule" in meta:
            by_rule.append((meta["rule"], expectation))
        else:
            by_column.setdefault(_key(expectation.configuration)[1], []).append(expectation)
    _INDEXES[spec.digest] = (by_rule, by_column)
    return by_rule, by_column


def _stacks(spec: SuiteSpec, numbers: set[str]) -> tuple[tuple[str, ...], ...]:
    """The columns whose expectations are the same value-by-value checks up to the column's name, by sets of 2+."""
    _, by_column = _suite_index(spec)
    sets: dict[str, list[str]] = {}
    for name, expectations in by_column.items():
        if name == "(table)":
            continue
        signature = _signature(name, expectations, number=name in numbers)
        if signature is not None:
            sets.setdefault(signature, []).append(name)
    return tuple(tuple(names) for names in sets.values() if len(names) > 1)


def _signature(name: str, expectations: list[Any], *, number: bool) -> str | None:
    """What a column's expectations check, without its name; None when one of them is not value by value."""
    parts: list[Any] = [number]
    for expectation in expectations:
        config = expectation.configuration
        kwargs = dict(config.kwargs)
        target = kwargs.pop("column", None)
        on = {name: "values", number_column(name): "numbers"}.get(target)
        if config.type not in _VALUE_BY_VALUE or on is None or "mostly" in kwargs:
            return None
        parts.append([config.type, on, kwargs])
    return json.dumps(parts, sort_keys=True, default=str)


def _key(config: Any) -> tuple[str, str]:
    """``(expectation, schema column)`` of an expectation's configuration (``"(table)"``: table-level)."""
    meta = config.meta or {}
    return config.type, str(meta.get("schema_column") or config.kwargs.get("column") or "(table)")


def _outcome(result: Any, rows: Any) -> Outcome:
    """The result reduced to counts; a column expectation's ``rows`` are summed over its unexpected positions."""
    config = result.expectation_config
    meta = config.meta or {}
    details = result.result or {}
    mismatched = (details.get("details") or {}).get("mismatched") or {} if config.type == COLUMN_SET else {}
    unexpected = int(details.get("unexpected_count") or 0)
    if rows is not None and "unexpected_index_list" in details:  # positions of distinct values: count their rows
        unexpected = int(rows[list(details["unexpected_index_list"] or [])].sum())
    expectation, column = _key(config)
    return Outcome(
        expectation=expectation,
        column=column,
        rule=meta.get("rule"),
        success=bool(result.success),
        unexpected_count=unexpected,
        observed_value=int(details.get("observed_value") or 0) if meta.get("rule") is not None else 0,
        raised=_raised(result.exception_info),
        missing=_schema_names(mismatched.get("missing") or []),
        undeclared=tuple(str(name) for name in mismatched.get("unexpected") or []),
    )


def _member_outcomes(result: Any, rows: Any, owner: np.ndarray, names: list[str]) -> list[Outcome]:
    """A stacked frame's result as each member's: its rows at the unexpected positions among its own."""
    details = result.result or {}
    positions = np.asarray(details.get("unexpected_index_list") or [], dtype=np.int64)
    counts = np.bincount(owner[positions], weights=rows[positions], minlength=len(names))
    expectation, _ = _key(result.expectation_config)
    raised = _raised(result.exception_info)
    return [
        Outcome(expectation=expectation, column=name, rule=None, success=not raised and count == 0,
                unexpected_count=int(count), observed_value=0, raised=raised)
        for name, count in zip(names, counts, strict=True)
    ]


def _schema_names(names: list[Any]) -> tuple[str, ...]:
    """Map derived ``"<name> (as number)"`` columns back to their schema column, keeping order, once."""
    out: list[str] = []
    for name in names:
        base = str(name).removesuffix(NUMBER_SUFFIX)
        if base not in out:
            out.append(base)
    return tuple(out)


def _raised(info: Any) -> bool:
    """True if a GX exception_info (flat, or keyed by metric) reports a raised exception."""
    if not isinstance(info, dict):
        return False
    if info.get("raised_exception"):
        return True
    return any(isinstance(v, dict) and v.get("raised_exception") for v in info.values())
