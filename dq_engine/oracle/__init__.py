"""Best-response oracles for the data player (CP-SAT, numpy local search, portfolio).

Names are imported lazily (PEP 562): the CP-SAT model (and OR-Tools) loads on first use.
"""

from __future__ import annotations

from dq_engine.lazy import lazy_exports

_EXPORTS = {
    "BestResponse": "dq_engine.oracle.oracle",
    "BestResponseProblem": "dq_engine.oracle.problem",
    "FreeAttributeFiller": "dq_engine.oracle.free_attributes",
    "FreeNoise": "dq_engine.oracle.free_attributes",
    "FreePolicy": "dq_engine.oracle.free_attributes",
    "FreeScope": "dq_engine.oracle.free_attributes",
    "OracleConfig": "dq_engine.oracle.config",
    "best_response": "dq_engine.oracle.oracle",
    "brute_force_best": "dq_engine.oracle.brute_force",
    "check_free_settings": "dq_engine.oracle.free_attributes",
    "feasible_record": "dq_engine.oracle.feasible",
    "infeasible_rules": "dq_engine.oracle.feasible",
    "with_witness": "dq_engine.oracle.feasible",
    "gaussian_one_way_marginals": "dq_engine.oracle.free_attributes",
    "noisy_one_way_marginals": "dq_engine.oracle.free_attributes",
    "problem_from_samples": "dq_engine.oracle.problem",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
