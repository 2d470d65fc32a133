"""dq_engine: the pure algorithm library of dqrelease.

DualQuery and DQRS (and the papers' other mechanisms) over public domains of one-hot / binary attributes,
k-way marginal workloads, a CP-SAT best-response oracle and exact privacy accounting. Only numpy, pandas,
scipy, ortools, opendp and randomgen (the ChaCha20 bit generator) are used here: no Prefect, DuckDB or Great
Expectations (a test enforces it).
"""

from dq_engine.data.answers import answer_records, answer_workload, error_summary, per_marginal_max_error
from dq_engine.data.constraints import Constraints
from dq_engine.data.dataset import Dataset
from dq_engine.data.domain import Attribute, Domain
from dq_engine.data.workload import (
    Workload,
    all_kway_marginals,
    marginal_queries,
    random_marginals,
    random_queries,
)
from dq_engine.fit.mwem import MWEMConfig, calibrate_mwem, mwem
from dq_engine.mechanisms.dqrs import DQRSConfig, dqrs
from dq_engine.mechanisms.dualquery import DualQueryConfig, dualquery
from dq_engine.mechanisms.fem import FEMConfig, calibrate_fem, fem
from dq_engine.mechanisms.parity import (
    ParityConfig,
    ParityWorkload,
    all_parities,
    answer_parities,
    dualquery_parity,
    parity_best_response,
    random_parities,
)
from dq_engine.mechanisms.randomized_response import RandomizedResponseConfig, estimate_answers, randomized_response
from dq_engine.mechanisms.sepfem import SepFEMConfig, sepfem
from dq_engine.oracle import OracleConfig
from dq_engine.privacy.accounting import (
    ComposedCost,
    ExponentialMechanismEvent,
    PrivacyEvent,
    PureDpEvent,
    ZCDPEvent,
    compose,
)
from dq_engine.privacy.calibration import calibrate_rounds, mechanism_cost
from dq_engine.privacy.rng import make_rng
from dq_engine.results import RoundDiagnostics, SynthesisResult

__all__ = [
    "Attribute",
    "ComposedCost",
    "Constraints",
    "DQRSConfig",
    "Dataset",
    "Domain",
    "DualQueryConfig",
    "ExponentialMechanismEvent",
    "FEMConfig",
    "MWEMConfig",
    "OracleConfig",
    "ParityConfig",
    "ParityWorkload",
    "PrivacyEvent",
    "PureDpEvent",
    "RandomizedResponseConfig",
    "RoundDiagnostics",
    "SepFEMConfig",
    "SynthesisResult",
    "Workload",
    "ZCDPEvent",
    "all_kway_marginals",
    "all_parities",
    "answer_parities",
    "answer_records",
    "answer_workload",
    "calibrate_fem",
    "calibrate_mwem",
    "calibrate_rounds",
    "compose",
    "dqrs",
    "dualquery",
    "dualquery_parity",
    "error_summary",
    "estimate_answers",
    "fem",
    "make_rng",
    "marginal_queries",
    "mechanism_cost",
    "mwem",
    "parity_best_response",
    "per_marginal_max_error",
    "random_marginals",
    "random_parities",
    "random_queries",
    "randomized_response",
    "sepfem",
]
