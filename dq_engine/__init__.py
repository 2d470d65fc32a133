"""dq_engine: the pure algorithm library of dqrelease.

DualQuery and DQRS (and the papers' other mechanisms) over public domains of one-hot / binary attributes,
k-way marginal workloads, a CP-SAT best-response oracle and exact privacy accounting. Only numpy, pandas,
scipy, ortools, opendp and randomgen (the ChaCha20 bit generator) are used here: no Prefect, DuckDB or Great
Expectations (a test enforces it).

Names are imported lazily (PEP 562): ``import dq_engine`` (or ``dq_engine.errors``) does not load numpy, scipy
or OR-Tools; ``from dq_engine import dualquery`` loads DualQuery's module on first use.
"""

from __future__ import annotations

from dq_engine.lazy import lazy_exports

_EXPORTS = {
    "all_kway_marginals": "dq_engine.data.workload",
    "all_parities": "dq_engine.mechanisms.parity",
    "answer_parities": "dq_engine.mechanisms.parity",
    "answer_records": "dq_engine.data.answers",
    "answer_workload": "dq_engine.data.answers",
    "Attribute": "dq_engine.data.domain",
    "calibrate_fem": "dq_engine.mechanisms.fem",
    "calibrate_mwem": "dq_engine.fit.mwem",
    "calibrate_rounds": "dq_engine.privacy.calibration",
    "compose": "dq_engine.privacy.accounting",
    "ComposedCost": "dq_engine.privacy.accounting",
    "Constraints": "dq_engine.data.constraints",
    "Dataset": "dq_engine.data.dataset",
    "Domain": "dq_engine.data.domain",
    "dqrs": "dq_engine.mechanisms.dqrs",
    "DQRSConfig": "dq_engine.mechanisms.dqrs",
    "dualquery": "dq_engine.mechanisms.dualquery",
    "dualquery_parity": "dq_engine.mechanisms.parity",
    "DualQueryConfig": "dq_engine.mechanisms.dualquery",
    "error_summary": "dq_engine.data.answers",
    "estimate_answers": "dq_engine.mechanisms.randomized_response",
    "ExponentialMechanismEvent": "dq_engine.privacy.accounting",
    "fem": "dq_engine.mechanisms.fem",
    "FEMConfig": "dq_engine.mechanisms.fem",
    "independent_columns": "dq_engine.mechanisms.independent",
    "IndependentConfig": "dq_engine.mechanisms.independent",
    "make_rng": "dq_engine.privacy.rng",
    "marginal_queries": "dq_engine.data.workload",
    "mechanism_cost": "dq_engine.privacy.calibration",
    "mwem": "dq_engine.fit.mwem",
    "MWEMConfig": "dq_engine.fit.mwem",
    "OracleConfig": "dq_engine.oracle",
    "parity_best_response": "dq_engine.mechanisms.parity",
    "ParityConfig": "dq_engine.mechanisms.parity",
    "ParityWorkload": "dq_engine.mechanisms.parity",
    "per_marginal_max_error": "dq_engine.data.answers",
    "PrivacyEvent": "dq_engine.privacy.accounting",
    "PrivacyGrant": "dq_engine.privacy.grant",
    "PureDpEvent": "dq_engine.privacy.accounting",
    "random_marginals": "dq_engine.data.workload",
    "random_parities": "dq_engine.mechanisms.parity",
    "random_queries": "dq_engine.data.workload",
    "randomized_response": "dq_engine.mechanisms.randomized_response",
    "RandomizedResponseConfig": "dq_engine.mechanisms.randomized_response",
    "RoundDiagnostics": "dq_engine.results",
    "sepfem": "dq_engine.mechanisms.sepfem",
    "SepFEMConfig": "dq_engine.mechanisms.sepfem",
    "SynthesisResult": "dq_engine.results",
    "Workload": "dq_engine.data.workload",
    "ZCDPEvent": "dq_engine.privacy.accounting",
}
"""Every public name of the engine and the module that defines it."""

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
