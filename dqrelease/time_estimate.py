"""A rough wall-time range for a release, from public quantities only (``dqrelease plan`` prints it).

The estimate adds four parts, each a low and a high rate measured on this project's 2-core benchmark machine
(docs/benchmarks.md; the section of each rate is named beside it):

* the pipeline's overhead (Prefect, imports, report, publish);
* reading, validating and discretizing the table: ``n x columns`` cells;
* the mechanism's oracle rounds, bounded by the oracle's own public time limits (local search, then CP-SAT);
* its multiplicative-weights updates (``rounds x queries``) and its particle rounds (MWEM on particles, the table
  fit: ``rounds x particles``).

It reads no data and no private count (a noisy ``n`` has no estimate before its count). Rates are upper-biased by the
machine's load when measured, and the oracle's time limits dominate the range, so the range is wide on purpose: it
says whether a release takes a minute or an hour, not which second it ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dqrelease.mechanisms import ReleasePlan

__all__ = ["TimeEstimate", "estimate_release_time"]

OVERHEAD_SECONDS = (7.0, 18.0)
"""Everything but the mechanism on the Adult example: 7.4 s with the Prefect server running, 17.4 s on a fresh
Prefect home that starts it (docs/benchmarks.md, "Operator overhead")."""

SECONDS_PER_CELL = (0.5e-6, 5e-6)
"""Ingest, validation and discretization per raw cell: Adult 1.7 s for 48,842 x 15 cells ("Operator overhead"),
KDD99 about 11 s to load 494,021 x 42 ("KDD99 pipeline"); widened for files read from slower disks."""

SECONDS_PER_MW_QUERY_ROUND = (11e-9, 44e-9)
"""A multiplicative-weights round per workload query: 44.1 ms for 2 M queries ("Exact sampling"), its half to
twice its value."""

SECONDS_PER_PARTICLE_ROUND = (0.3 / 200_000, 1.5 / 200_000)
"""A round of MWEM on particles per particle: 25 s for MWEM on particles' 40 rounds on 200,000 particles on Adult
(0.6 s a round, "Fidelity of the published tables"), half to 2.5 times that for wider workloads."""

CPSAT_CALL_SECONDS = (0.01, 0.1)
"""A CP-SAT-only oracle call (FEM's and sepFEM's per-sample problems): about 0.02 s on Adult (FEM 55 s and sepFEM
59 s for 1,440 calls and the table fit, "Fidelity of the published tables"); never above the call's time limit."""


@dataclass(frozen=True, kw_only=True)
class TimeEstimate:
    """A wall-time range in seconds and what it rests on.

    Attributes:
        low: Seconds on an idle machine with the Prefect server already running.
        high: Seconds when the oracle uses its full time limits and the server has to start.
        basis: The public quantities and rates behind the range, in words.
    """

    low: float
    high: float
    basis: str

    def shown(self) -> str:
        """``about 40 s to 2.4 min``: the range in the units a person reads."""
        return f"about {_duration(self.low)} to {_duration(self.high)}"


def estimate_release_time(plan: ReleasePlan, *, n: int, columns: int, queries: int) -> TimeEstimate:
    """A rough wall-time range of ``dqrelease run`` for ``plan`` (see the module docstring for the model).

    Args:
        plan: The release plan (its public parameters: rounds, oracle limits, particles).
        n: The public number of records.
        columns: Columns of the schema.
        queries: Queries of the workload.
    """
    parameters = plan.parameters
    rounds = int(parameters.get("rounds", 0) or 0)
    oracle = parameters.get("oracle")
    low, high = OVERHEAD_SECONDS
    cells = n * columns
    low, high = low + cells * SECONDS_PER_CELL[0], high + cells * SECONDS_PER_CELL[1]
    parts = [f"{n:,} rows x {columns} columns", f"{queries:,} queries"]
    particle_rounds = 0
    if isinstance(oracle, dict):
        calls = rounds * int(parameters.get("samples", 1) if plan.mechanism in {"fem", "sepfem"} else 1)
        call_low, call_high = _oracle_call_seconds(oracle)
        low, high = low + calls * call_low, high + calls * call_high
        low += rounds * queries * SECONDS_PER_MW_QUERY_ROUND[0]
        high += rounds * queries * SECONDS_PER_MW_QUERY_ROUND[1]
        parts.append(f"{calls:,} oracle calls of {call_low:.3g} to {call_high:.3g} s")
    elif "support_size" in parameters:  # MWEM on particles
        particle_rounds = rounds * int(parameters["support_size"])
        parts.append(f"{rounds} rounds on {int(parameters['support_size']):,} particles")
    elif rounds:
        low += rounds * queries * SECONDS_PER_MW_QUERY_ROUND[0]
        high += rounds * queries * SECONDS_PER_MW_QUERY_ROUND[1]
        parts.append(f"{rounds} rounds")
    fit = parameters.get("fit")
    if isinstance(fit, dict):
        particle_rounds += int(fit["rounds"]) * int(fit["particles"])
        parts.append(f"a table fit of {fit['rounds']} rounds on {int(fit['particles']):,} particles")
    low += particle_rounds * SECONDS_PER_PARTICLE_ROUND[0]
    high += particle_rounds * SECONDS_PER_PARTICLE_ROUND[1]
    basis = (
        f"{', '.join(parts)}; rates measured on the 2-core benchmark machine (docs/benchmarks.md); a rough estimate: "
        "other load on the machine makes it slower"
    )
    return TimeEstimate(low=low, high=high, basis=basis)


def _oracle_call_seconds(oracle: dict) -> tuple[float, float]:
    """The least and most seconds of one oracle call under its public time limits."""
    local = float(oracle.get("local_time_limit") or 0.0)
    cpsat = float(oracle.get("time_limit") or 0.0)
    kind = oracle.get("kind")
    if kind == "local":
        return local, local
    if kind == "cpsat":
        return min(CPSAT_CALL_SECONDS[0], cpsat), min(CPSAT_CALL_SECONDS[1], cpsat)
    return local, local + cpsat  # portfolio: the local search, then CP-SAT up to its limit


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
