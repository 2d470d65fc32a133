"""Configuration of the best-response oracle."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from dq_engine.errors import ConfigError

__all__ = ["OracleConfig"]

OracleKind = Literal["portfolio", "cpsat", "local"]


@dataclass(frozen=True, kw_only=True)
class OracleConfig:
    """How best responses are computed. Privacy never depends on these settings.

    Defaults come from the study in ``docs/oracle.md`` (instances captured from DualQuery runs on Adult and
    KDD99, s = 300 ... 5,000, on 2 cores): compared with the previous defaults (local 0.5 s / 20 restarts, then
    CP-SAT 2 s, 8 workers, 1 presolve iteration, no dense rule) they cut the median oracle call from 1.77 s to
    0.26 s (p95 2.11 s to 1.17 s) and the mean regret to the best known objective from 0.049 % to 0.023 %.

    Attributes:
        kind: ``"portfolio"`` (local search, then CP-SAT warm-started with its answer as a complete
            hint; the better record is kept), ``"cpsat"`` (CP-SAT alone) or ``"local"`` (local search alone).
        time_limit: CP-SAT wall-clock limit per call, seconds (ignored when ``deterministic``). 1 s: CP-SAT
            proves sparse instances optimal in ~0.1-0.2 s, and 2 s instead of 1 s changed the portfolio's
            regret by less than the run-to-run noise.
        num_workers: CP-SAT workers. CP-SAT's default is the core count (2 here); with 1 worker the mean
            regret was 2.5 % and nothing medium-sized was proven optimal, 3 workers gave the lowest regret
            and the most proofs (8 was no better on 2 cores), so the default is 3.
        deterministic: Reproducible solves: CP-SAT stops on ``deterministic_time_limit`` (not seconds) and
            uses ``interleave_search`` when ``num_workers > 1``; local search stops after ``local_restarts``
            restarts (no wall-clock cap).
        deterministic_time_limit: CP-SAT ``max_deterministic_time`` when ``deterministic``. 0.25 took a median
            0.7 s wall (max 2.1 s) with 8 workers; 1.0 took up to 15 s with 1 worker.
        max_presolve_iterations: CP-SAT ``max_presolve_iterations`` (None = solver default). 0: with 1 or
            the default, CP-SAT returned *no solution at all* in 2 s on 12-14 of 42 instances even with a
            complete hint (every dense and 20,000-clause one); with 0 it always returned at least the hint,
            at the same regret.
        local_time_limit: Wall-clock cap of the local search, seconds. 0.25 s: the improved search reaches
            a mean regret of 0.15 % alone (0.12 % at 0.5 s, 0.09 % at 2 s).
        local_restarts: Restart budget of the local search: the only budget in deterministic mode, a cap
            otherwise (small instances finish their 300 restarts in a few milliseconds).
        fallback: What to return when CP-SAT finds no solution and no local-search record exists:
            ``"previous"`` (previous round's record) or ``"random"``.
        skip_cpsat_when_dense: In the portfolio, skip CP-SAT on large dense problems (>= 1000 distinct
            clauses and >= 4 per touched bit, :func:`~dq_engine.oracle.oracle.is_large_and_dense`): there
            CP-SAT mostly found nothing in 2 s, and 0.25 s of local search beat 5 s of hinted CP-SAT.
    """

    kind: OracleKind = "portfolio"
    time_limit: float = 1.0
    num_workers: int = 3
    deterministic: bool = False
    deterministic_time_limit: float = 0.25
    max_presolve_iterations: int | None = 0
    local_time_limit: float = 0.25
    local_restarts: int = 300
    fallback: Literal["previous", "random"] = "previous"
    skip_cpsat_when_dense: bool = True

    def __post_init__(self) -> None:
        if self.kind not in ("portfolio", "cpsat", "local"):
            raise ConfigError(f"oracle kind ({self.kind!r}) must be 'portfolio', 'cpsat' or 'local'")
        if not self.time_limit > 0:
            raise ConfigError(f"time_limit ({self.time_limit}) must be > 0 seconds")
        if not 1 <= self.num_workers <= 64:
            raise ConfigError(f"num_workers ({self.num_workers}) must be in 1..64")
        if not self.deterministic_time_limit > 0:
            raise ConfigError(f"deterministic_time_limit ({self.deterministic_time_limit}) must be > 0")
        if self.local_restarts < 0:
            raise ConfigError(f"local_restarts ({self.local_restarts}) must be >= 0")
        if not self.local_time_limit > 0:
            raise ConfigError(f"local_time_limit ({self.local_time_limit}) must be > 0 seconds")
        if self.fallback not in ("previous", "random"):
            raise ConfigError(f"fallback ({self.fallback!r}) must be 'previous' or 'random'")

    @staticmethod
    def core_count() -> int:
        """Cores of this machine (recorded in run manifests)."""
        return os.cpu_count() or 1
