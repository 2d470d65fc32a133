"""No uncharged door: every public entry point that runs a mechanism on private data needs a grant that pays for it.

The engine's entry points are found by walking every module of ``dq_engine`` for public functions and classes whose
return annotation (or ``result`` method) is a ``SynthesisResult``; each must take a keyword-only ``grant`` and refuse a
missing, too small or already spent one *before* it reads the data. The pipeline's entry points are the registry's
``run`` of every mechanism, the table fit (``run_fit``) and ``run_mechanism``: the first two refuse a run without the
engine grant a :class:`~dqrelease.mechanisms.base.MechanismGrant` carries, and ``run_mechanism`` refuses anything but a
``MechanismGrant``, which only :mod:`dqrelease.ledger.grants` makes (after a ledger charge or for a checked replay).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil

import numpy as np
import pytest

import dq_engine
from dq_engine import (
    Dataset,
    Domain,
    DQRSConfig,
    DualQueryConfig,
    FEMConfig,
    IndependentConfig,
    MWEMConfig,
    OracleConfig,
    PrivacyGrant,
    RandomizedResponseConfig,
    SepFEMConfig,
    all_kway_marginals,
    dqrs,
    dualquery,
    fem,
    independent_columns,
    make_rng,
    mwem,
    randomized_response,
    sepfem,
)
from dq_engine.errors import BudgetExceededError, ConfigError
from dq_engine.fit.table_fit import fit_table
from dq_engine.mechanisms.dualquery import RoundLoop
from dq_engine.mechanisms.parity import ParityConfig, dualquery_parity, random_parities
from dq_engine.privacy.public import PublicQuantities
from dqrelease.errors import UnchargedRunError
from dqrelease.mechanisms import MECHANISMS, PlanInputs, RunInputs, plan_mechanism, run_mechanism
from dqrelease.mechanisms.base import GRANT_ISSUER, MechanismGrant
from dqrelease.mechanisms.fit import run_fit
from tests.budgets import grant_for_tests, study_grant

ORACLE = OracleConfig(kind="cpsat", deterministic=True, num_workers=1, deterministic_time_limit=0.2)


class _Untouchable(Dataset):
    """A dataset whose private content must not be read: any access to its records fails the test."""

    def __getattribute__(self, name: str):
        if name in ("codes", "counts", "bits", "to_codes", "packed"):
            raise AssertionError(f"the private data was read ({name}) before the grant was checked")
        return super().__getattribute__(name)


@pytest.fixture(scope="module")
def table() -> Dataset:
    domain = Domain.categorical({"a": 3, "b": 2, "c": 4})
    codes = make_rng(0).integers(0, domain.sizes, size=(400, 3))
    return Dataset.from_codes(domain, codes)


def _untouchable(data: Dataset) -> Dataset:
    clone = object.__new__(_Untouchable)
    clone.__dict__.update(data.__dict__)
    return clone


ENGINE_RUNS = ["dualquery", "dqrs", "fem", "sepfem", "mwem", "mwem-particles", "randomized_response",
               "dualquery_parity", "fit_table", "independent"]


def _runs(data: Dataset):
    """Every engine mechanism with a small config, as ``run(data, grant) -> result``."""
    workload = all_kway_marginals(data.domain, 2)
    parities = random_parities(Domain.binary(6), 2, 10, make_rng(1))
    bits = Dataset.from_codes(Domain.binary(6), make_rng(2).integers(0, 2, size=(200, 6)))
    mwem_config = MWEMConfig(rounds=3, select_epsilon=0.1, measure_epsilon=0.1)
    particles = MWEMConfig(rounds=3, select_epsilon=0.1, measure_rho=0.01, measure_noise="gaussian", support="sampled",
                           support_size=500, support_budget=0.01, support_moves=1, measure="marginal")
    return {
        "dualquery": lambda d, g: dualquery(d, workload, DualQueryConfig(eta=0.5, samples=10, rounds=3, oracle=ORACLE),
                                            grant=g, rng=make_rng(3)),
        "dqrs": lambda d, g: dqrs(d, workload, DQRSConfig(eta=0.5, samples=10, rounds=3, oracle=ORACLE), grant=g,
                                  rng=make_rng(3)),
        "fem": lambda d, g: fem(d, workload, FEMConfig(epsilon_0=0.05, noise_scale=1.0, samples=2, rounds=2,
                                                       oracle=ORACLE), grant=g, rng=make_rng(3)),
        "sepfem": lambda d, g: sepfem(d, workload, SepFEMConfig(epsilon_0=0.05, noise_scale=0.5, samples=2, rounds=2,
                                                                 oracle=ORACLE), grant=g, rng=make_rng(3)),
        "mwem": lambda d, g: mwem(d, workload, mwem_config, grant=g, rng=make_rng(3)),
        "mwem-particles": lambda d, g: mwem(d, workload, particles, grant=g, rng=make_rng(3)),
        "randomized_response": lambda d, g: randomized_response(d, RandomizedResponseConfig(epsilon=1.0), grant=g,
                                                                rng=make_rng(3)),
        "dualquery_parity": lambda d, g: dualquery_parity(
            _untouchable(bits) if isinstance(d, _Untouchable) else bits, parities,
            ParityConfig(eta=0.5, samples=10, rounds=2), grant=g, rng=make_rng(3)),
        "independent": lambda d, g: independent_columns(d, IndependentConfig(rho=0.05, rows=300), grant=g,
                                                        rng=make_rng(3)),
        "fit_table": lambda d, g: fit_table(
            d, workload, _result(data, workload), dataclasses.replace(particles, seed_fraction=0.5), grant=g,
            rng=make_rng(3)),
    }


def _result(data, workload):
    return dualquery(data, workload, DualQueryConfig(eta=0.5, samples=10, rounds=2, oracle=ORACLE),
                     grant=grant_for_tests(), rng=make_rng(4))


# ---------------------------------------------------------------------- the engine
def _returns_result(function) -> bool:
    return "SynthesisResult" in str(inspect.signature(function).return_annotation)


def _engine_entry_points() -> list[tuple[str, object]]:
    """Public functions and classes of every dq_engine module that produce a SynthesisResult."""
    found = {}
    for info in pkgutil.walk_packages(dq_engine.__path__, "dq_engine."):
        module = importlib.import_module(info.name)
        for name, member in vars(module).items():
            if name.startswith("_") or getattr(member, "__module__", None) != module.__name__:
                continue
            function = inspect.isfunction(member) and _returns_result(member)
            loop = inspect.isclass(member) and hasattr(member, "result") and _returns_result(member.result)
            if function or loop:
                found[f"{module.__name__}.{name}"] = member
    return sorted(found.items())


def test_the_walk_finds_every_known_engine_mechanism():
    names = {name.rsplit(".", 1)[1] for name, _ in _engine_entry_points()}
    assert {"dualquery", "dqrs", "fem", "sepfem", "mwem", "randomized_response", "dualquery_parity", "fit_table",
            "run_primal_game", "RoundLoop", "independent_columns"} <= names


@pytest.mark.parametrize(
    "name, entry", [pytest.param(name, entry, id=name) for name, entry in _engine_entry_points()]
)  # ids from names only: a function's repr holds its address, which differs between pytest-xdist workers
def test_every_engine_entry_point_requires_a_keyword_only_grant(name, entry):
    parameter = inspect.signature(entry).parameters.get("grant")
    assert parameter is not None, f"{name} runs a mechanism but takes no grant"
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is inspect.Parameter.empty


@pytest.mark.parametrize("mechanism", ENGINE_RUNS)
@pytest.mark.parametrize("grant", [None, "a plan", 1.0], ids=["missing", "a-string", "a-number"])
def test_no_engine_mechanism_runs_without_a_privacy_grant(table, mechanism, grant):
    with pytest.raises(BudgetExceededError, match="only with a PrivacyGrant"):
        _runs(table)[mechanism](_untouchable(table), grant)


@pytest.mark.parametrize("mechanism", ENGINE_RUNS)
def test_a_grant_too_small_refuses_before_the_data_is_read(table, mechanism):
    tiny = PrivacyGrant(epsilon=1e-6, delta=1e-12, purpose="too small")
    with pytest.raises(BudgetExceededError, match=r"more than its grant \(too small"):
        _runs(table)[mechanism](_untouchable(table), tiny)
    assert tiny.spent == ()


@pytest.mark.parametrize("mechanism", ["dualquery", "fem", "mwem", "randomized_response", "independent"])
def test_a_grant_pays_for_one_run_not_two(table, mechanism):
    run = _runs(table)[mechanism]
    probe = grant_for_tests()
    run(table, probe)  # what one run costs, spent on a large budget
    epsilon, delta = probe.cost(probe.spent)
    exact = PrivacyGrant(epsilon=epsilon, delta=max(delta, 1e-3), purpose="one run")
    run(table, exact)
    with pytest.raises(BudgetExceededError, match="with what was spent before"):
        run(_untouchable(table), exact)


def test_a_grant_composes_what_is_spent_on_it_rather_than_adding_it():
    grant = PrivacyGrant(epsilon=1.0, delta=1e-6, purpose="composition")
    from dq_engine import ZCDPEvent

    grant.spend([ZCDPEvent(rho=0.01, count=1)], mechanism="first")
    grant.spend([ZCDPEvent(rho=0.01, count=1)], mechanism="second")
    alone, _ = grant.cost([ZCDPEvent(rho=0.01, count=1)])
    together, _ = grant.cost(grant.spent)
    assert together < 2 * alone  # zCDP composes ρ, and the (ε, δ) conversion is concave in ρ


@pytest.mark.parametrize(
    "arguments, message",
    [({"epsilon": 0.0, "delta": 1e-6, "purpose": "x"}, "epsilon (0.0) must be > 0"),
     ({"epsilon": 1.0, "delta": 1.0, "purpose": "x"}, "delta (1.0) must be in [0, 1)"),
     ({"epsilon": 1.0, "delta": 1e-6, "mode": "loose", "purpose": "x"}, "must be 'tight' or 'paper'"),
     ({"epsilon": 1.0, "delta": 1e-6, "purpose": ""}, "needs a purpose")],
)
def test_grant_arguments_are_checked(arguments, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        PrivacyGrant(**arguments)


def test_a_pure_budget_takes_only_pure_runs(table):
    pure = PrivacyGrant(epsilon=5.0, delta=0.0, purpose="pure budget")
    randomized_response(table, RandomizedResponseConfig(epsilon=1.0), grant=pure, rng=make_rng(1))
    gaussian = MWEMConfig(rounds=2, select_epsilon=0.1, measure_rho=0.01, measure_noise="gaussian")
    with pytest.raises(BudgetExceededError):
        mwem(_untouchable(table), all_kway_marginals(table.domain, 1), gaussian, grant=pure, rng=make_rng(2))


def test_round_loop_spends_its_own_events(table):
    tiny = PrivacyGrant(epsilon=1e-6, delta=1e-12, purpose="too small")
    config = DualQueryConfig(eta=0.5, samples=10, rounds=3, oracle=ORACLE)
    with pytest.raises(BudgetExceededError):
        RoundLoop(_untouchable(table), all_kway_marginals(table.domain, 1), config, make_rng(0), grant=tiny,
                  mechanism="dualquery")


# ---------------------------------------------------------------------- the pipeline
def _plan(table, name: str, **keys):
    workload = all_kway_marginals(table.domain, 2)
    public = PublicQuantities(n=table.n, epsilon=1.0, delta=1e-9, domain=table.domain, n_queries=len(workload),
                              n_marginals=workload.n_marginals)
    plan = plan_mechanism(MECHANISMS[name].keys(**keys), PlanInputs(public=public, mode="tight", deterministic=True))
    return plan, RunInputs(data=table, workload=workload, rng=make_rng(5))


REGISTRY_RUNS = [name for name in MECHANISMS if name not in ("auto", "mwem")]


@pytest.mark.parametrize("name", REGISTRY_RUNS)
def test_no_registry_run_works_without_the_engine_grant_of_a_ledger_charge(table, name):
    plan, inputs = _plan(table, name)
    with pytest.raises(BudgetExceededError, match="only with a PrivacyGrant"):
        MECHANISMS[plan.mechanism].run(plan, dataclasses.replace(inputs, data=_untouchable(table)))


def test_the_table_fit_does_not_run_without_a_grant(table):
    plan, inputs = _plan(table, "dualquery", samples=10, fit={"particles": 1000, "rounds": 2})
    raw = _result(table, inputs.workload)
    with pytest.raises(BudgetExceededError, match="only with a PrivacyGrant"):
        run_fit(plan, dataclasses.replace(inputs, data=_untouchable(table)), raw)


@pytest.mark.parametrize("bare", ["plan", None, "string"])
def test_run_mechanism_takes_only_a_mechanism_grant(table, bare):
    plan, inputs = _plan(table, "mwem-particles")
    given = {"plan": plan, None: None, "string": "dualquery"}[bare]
    with pytest.raises(UnchargedRunError, match="only with a MechanismGrant"):
        run_mechanism(given, dataclasses.replace(inputs, data=_untouchable(table)))


def test_a_mechanism_grant_is_made_only_by_the_ledger(table):
    plan, _ = _plan(table, "mwem-particles")
    with pytest.raises(UnchargedRunError, match=r"issued only by dqrelease\.ledger\.grants"):
        MechanismGrant(plan=plan, run_id="forged", basis="ledger charge", reference="x#1",
                       privacy=grant_for_tests(), _issuer=object())
    assert GRANT_ISSUER is not None


def test_a_ledger_grant_pays_for_one_run_of_its_plan(table, tmp_path):
    plan, inputs = _plan(table, "mwem-particles")
    grant = study_grant(plan, tmp_path)
    assert grant.basis == "ledger charge" and grant.privacy.epsilon >= plan.charged.epsilon
    run_mechanism(grant, inputs)
    with pytest.raises(BudgetExceededError, match="with what was spent before"):
        run_mechanism(grant, dataclasses.replace(inputs, data=_untouchable(table), rng=make_rng(6)))


def test_a_ledger_grant_of_a_fitted_plan_covers_the_mechanism_and_its_fit(table, tmp_path):
    plan, inputs = _plan(table, "dualquery", samples=10, fit={"particles": 1000, "rounds": 2})
    result = run_mechanism(study_grant(plan, tmp_path), inputs)
    assert np.isclose(result.weights.sum(), 1.0) if result.weights is not None else len(result.records)


def test_a_grant_travels_to_another_process_with_what_was_spent():
    import pickle

    from dq_engine import ZCDPEvent

    grant = PrivacyGrant(epsilon=1.0, delta=1e-6, purpose="pickled")
    grant.spend([ZCDPEvent(rho=0.01, count=1, label="x")], mechanism="first")
    copy = pickle.loads(pickle.dumps(grant))  # a Dask worker gets its inputs this way
    assert copy.spent == grant.spent and (copy.epsilon, copy.delta, copy.purpose) == (1.0, 1e-6, "pickled")
    copy.spend([ZCDPEvent(rho=0.01, count=1, label="y")], mechanism="second")  # the copy has its own lock
    with pytest.raises(BudgetExceededError):
        copy.spend([ZCDPEvent(rho=10.0, count=1, label="z")], mechanism="third")
