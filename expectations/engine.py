"""Run a schema suite on one chunk of a table through Great Expectations.

:mod:`expectations.validate` streams a table out of DuckDB and sends each chunk here, in this process or in the
side process (:mod:`dqrelease.runtime.side_process`). What comes back is plain data (:class:`Outcome`), never a GX
object, so the caller needs no GX import and nothing but the three public things of a result (the
expectation, the schema column and a count) crosses the process boundary.

Invariants:

* One ephemeral GX context per process (cached), progress bars off, analytics off (see ``expectations``).
* Results are requested with ``partial_unexpected_count = 0``: no value of the table is in an :class:`Outcome`.
* Suites are built here from a :class:`SuiteSpec` (public schema and suite kind), once per process and spec.
* Importing this module does not import GX (the first call does): the caller's process uses its types and names
  its functions without paying GX's import when the side process does the work.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd
import pyarrow as pa

from dqrelease.inputs.schema import Schema

if TYPE_CHECKING:
    import great_expectations as gx

__all__ = ["COLUMN_SET", "Outcome", "SuiteShape", "SuiteSpec", "check_chunk", "suite_shape", "warm_up"]

COLUMN_SET = "expect_table_columns_to_match_set"

_RESULT_FORMAT = {"result_format": "BASIC", "partial_unexpected_count": 0, "include_unexpected_rows": False}


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

    def key(self) -> str:
        """A string that identifies the suite (the schema is not hashable)."""
        return (f"{self.kind}|{self.layout}|{self.numeric_values}|{self.single_value_numbers}|"
                f"{self.schema.model_dump_json()}")


@dataclass(frozen=True, kw_only=True)
class SuiteShape:
    """What the caller needs to know of a suite before streaming: public, from the schema.

    Attributes:
        numbers: Numeric columns whose derived ``"<name> (as number)"`` column some expectation reads.
        rules: The public rules the suite counts broken rows of, in the suite's order.
    """

    numbers: tuple[str, ...]
    rules: tuple[str, ...]


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


def suite_shape(spec: SuiteSpec) -> SuiteShape:
    """The derived number columns and the rules of the spec's suite."""
    suite = _suite(spec)
    numbers: list[str] = []
    rules: list[str] = []
    for expectation in suite.expectations:
        meta = expectation.meta or {}
        numbers += [meta["number_of"]] if "number_of" in meta else []
        numbers += list(meta.get("numbers_of") or [])
        rules += [meta["rule"]] if "rule" in meta else []
    return SuiteShape(numbers=tuple(dict.fromkeys(numbers)), rules=tuple(rules))


def check_chunk(
    chunk: pa.RecordBatch | None, *, spec: SuiteSpec, columns: list[str], numbers: list[str]
) -> list[Outcome]:
    """Validate one chunk (``None``: an empty table with ``columns``) with the spec's suite.

    ``numbers`` are the numeric columns (present in the table) to add a derived ``DOUBLE`` column for.
    """
    if chunk is None:
        frame = pd.DataFrame({name: pd.Series([], dtype=object) for name in columns})
    else:
        frame = chunk.to_pandas()
    from dqrelease.expectations.frame import number_column

    for name in numbers:  # NaN where the value is not a number
        frame[number_column(name)] = pd.to_numeric(frame[name], errors="coerce").astype("float64")
    batch = _batch_definition().get_batch(batch_parameters={"dataframe": frame})
    results = batch.validate(_suite(spec), result_format=_RESULT_FORMAT).results
    return [_outcome(result) for result in results]


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

    key = spec.key()
    if key not in _SUITES:
        if spec.kind == "raw":
            _SUITES[key] = build_suite(spec.schema, layout=spec.layout)
        else:
            _SUITES[key] = build_published_suite(spec.schema, numeric_values=spec.numeric_values,
                                                 single_value_numbers=spec.single_value_numbers)
    return _SUITES[key]


def _outcome(result: Any) -> Outcome:
    config = result.expectation_config
    meta = config.meta or {}
    details = result.result or {}
    mismatched = (details.get("details") or {}).get("mismatched") or {} if config.type == COLUMN_SET else {}
    return Outcome(
        expectation=config.type,
        column=str(meta.get("schema_column") or config.kwargs.get("column") or "(table)"),
        rule=meta.get("rule"),
        success=bool(result.success),
        unexpected_count=int(details.get("unexpected_count") or 0),
        observed_value=int(details.get("observed_value") or 0) if meta.get("rule") is not None else 0,
        raised=_raised(result.exception_info),
        missing=_schema_names(mismatched.get("missing") or []),
        undeclared=tuple(str(name) for name in mismatched.get("unexpected") or []),
    )


def _schema_names(names: list[Any]) -> tuple[str, ...]:
    """Map derived ``"<name> (as number)"`` columns back to their schema column, keeping order, once."""
    from dqrelease.expectations.frame import NUMBER_SUFFIX

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
