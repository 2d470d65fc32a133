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

    Attributes:
        kind: ``"portfolio"`` (local search, then CP-SAT warm-started with its answer as a complete
            hint; the better record is kept), ``"cpsat"`` (CP-SAT alone) or ``"local"`` (local search alone).
        time_limit: CP-SAT wall-clock limit per call, seconds (ignored when ``deterministic``).
        num_workers: CP-SAT workers. CP-SAT's default is the core count; on 2 cores sparse instances
            proved optimal only with >= 3 workers, so the default is 8.
        deterministic: Reproducible solves: CP-SAT stops on ``deterministic_time_limit`` (not seconds) and
            uses ``interleave_search`` when ``num_workers > 1``; local search stops on its step budget.
        deterministic_time_limit: CP-SAT ``max_deterministic_time`` when ``deterministic``.
        max_presolve_iterations: CP-SAT ``max_presolve_iterations`` (None = solver default); 1 keeps
            presolve from eating the time limit on instances with ~20,000 sampled clauses.
        local_time_limit: Wall-clock cap of the local search, seconds.
        local_restarts: Perturbation restarts of the local search.
        fallback: What to return when CP-SAT finds no solution and no local-search record exists:
            ``"previous"`` (previous round's record) or ``"random"``.
    """

    kind: OracleKind = "portfolio"
    time_limit: float = 2.0
    num_workers: int = 8
    deterministic: bool = False
    deterministic_time_limit: float = 1.0
    max_presolve_iterations: int | None = 1
    local_time_limit: float = 0.5
    local_restarts: int = 20
    fallback: Literal["previous", "random"] = "previous"

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
