"""What the table fit's rounds should select (the query of largest error, or AIM's marginal score) and how it fits
the history after them (issue 25).

MWEM on particles, alone (``mwem-particles``) and as DualQuery's table fit, selects in each round either

- ``select-query``: the query (one cell) of largest error, as Hardt, Ligett & McSherry (2012) do, then measures
  its whole marginal; or
- ``select-marginal``: the marginal of largest L1 error beyond the error its measurement's noise is expected to
  leave, as AIM does (McKenna, Mullins, Sheldon & Miklau 2022, "AIM: An Adaptive and Iterative Mechanism for
  Differentially Private Synthetic Data"), which favours marginals of few cells when the noise is large;
- ``select-alternate``: AIM's score in the odd rounds, the query of largest error in the even ones;
- ``marginal-closure``: AIM's score over AIM's candidates, the workload's marginals and every marginal inside one
  (on a workload of all one-way and two-way marginals plus some 3-way ones, the same as ``select-marginal``);
- ``alternate-closure``: ``select-alternate`` over AIM's candidates (the registry's rule since 2026-11-28).

and, after its last round, fits the whole history either by cyclic MW sweeps (the registry's) or by
``estimator-mirror``: mirror descent on the measurements' Gaussian log-likelihood (``final_estimator="mirror"``,
Private-PGM's estimation problem, McKenna, Sheldon & Miklau 2019, over the particles), with the registry's rule
otherwise; its reference is ``alternate-closure``, the same configuration with the sweeps.

Its prior's uniform mass (:func:`dq_engine.fit.prior.uniform_share`): ``mix-noise`` (the registry's rule since
2026-11-28, ``min(0.2, (σ · values)²)`` per attribute) and ``mix-fixed`` (20 % for every attribute, the rule
before). Rows of ``alternate-closure`` written before that day (``fit_mix.jsonl``, commit e5c9f1a) are
``mix-fixed``'s; after it, ``mix-noise``'s.

How many rounds, and whether they select (docs/benchmarks.md, "Measuring every marginal of a small workload"):
``measure-all`` (the registry's rule since 2026-11-29: a workload of 40 < M <= 100 marginals the budget can measure
whole is measured whole, no selection) against ``measure-all-off`` (always select, the rule before);
``select-share-0.1`` (10 % of the rounds' ρ to the selections instead of 30 %), ``rounds-cap-80`` (selecting
rounds capped at 80 instead of 40) and both (``share-0.1-cap-80``), the alternatives tried first.

All run on the same data, workload, (ε, δ) and seeds, with a DP table of independent columns at the same ε as the
reference of "pairs worse than independent columns by more than 0.02" (same seed). The rule is switched for the
run through the constants of ``dq_engine.mechanisms.defaults`` that :data:`RULES` names (every other key is the
registry's), so the privacy cost and the rounds are those of the registry's plan. Rows and the
table as ``bench/seed_records.py`` writes them (its ``run_grid`` and ``report``).

Usage (one timed benchmark at a time on the shared machine)::

    flock "${TMPDIR:-/tmp}"/dqrelease-bench.lock .venv/bin/python bench/fit_selection.py --settings adult adult-pgm-64
    .venv/bin/python bench/fit_selection.py --report
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fidelity import mechanism_keys  # noqa: E402
from bench.scale_common import seeded_results_main  # noqa: E402
from bench.seed_records import add_grid_arguments, report, run_grid  # noqa: E402

RESULTS = ROOT / "bench" / "results"
MECHANISMS = ("mwem-particles", "dualquery")
RULES = {
    "select-query": {"MWEM_PARTICLES_SELECT": "query", "MWEM_PARTICLES_CANDIDATES": "workload"},
    "select-marginal": {"MWEM_PARTICLES_SELECT": "marginal", "MWEM_PARTICLES_CANDIDATES": "workload"},
    "select-alternate": {"MWEM_PARTICLES_SELECT": "alternate", "MWEM_PARTICLES_CANDIDATES": "workload"},
    "marginal-closure": {"MWEM_PARTICLES_SELECT": "marginal", "MWEM_PARTICLES_CANDIDATES": "closure"},
    "alternate-closure": {"MWEM_PARTICLES_SELECT": "alternate", "MWEM_PARTICLES_CANDIDATES": "closure"},
    "estimator-mirror": {"MWEM_PARTICLES_FINAL_ESTIMATOR": "mirror"},
    "mix-noise": {"MWEM_PARTICLES_PRIOR_MIX_RULE": "noise"},
    "mix-fixed": {"MWEM_PARTICLES_PRIOR_MIX_RULE": "fixed"},
    "select-share-0.1": {"MWEM_PARTICLES_SELECT_SHARE": 0.1, "MWEM_PARTICLES_MEASURE_ALL_CAP": 0},
    "rounds-cap-80": {"MWEM_PARTICLES_ROUNDS_CAP": 80, "MWEM_PARTICLES_MEASURE_ALL_CAP": 0},
    "share-0.1-cap-80": {"MWEM_PARTICLES_SELECT_SHARE": 0.1, "MWEM_PARTICLES_ROUNDS_CAP": 80,
                         "MWEM_PARTICLES_MEASURE_ALL_CAP": 0},
    "measure-all": {"MWEM_PARTICLES_MEASURE_ALL_CAP": 100},
    "measure-all-off": {"MWEM_PARTICLES_MEASURE_ALL_CAP": 0},
}
"""Variant: the constants of ``dq_engine.mechanisms.defaults`` it sets during its runs (the rest are the registry's)."""
EPSILONS = (0.1, 1.0)
SEEDS = (0, 1, 2, 3, 4)


def runs(mechanisms: list[str]) -> list[tuple[str, str]]:
    """(mechanism, variant) in the order they run: the independent-columns reference, then each rule."""
    return [("independent", "registry"), *((name, variant) for name in mechanisms for variant in RULES)]


def _keys(name: str, variant: str, loaded: Any, *, smoke: bool) -> Any:
    return mechanism_keys(name, loaded, smoke=smoke)


@contextlib.contextmanager
def _rule(name: str, variant: str) -> Iterator[None]:
    """The variant's selection rule for the duration of one run (the registry's otherwise)."""
    from dq_engine.mechanisms import defaults

    changes = RULES.get(variant, {})
    before = {name: getattr(defaults, name) for name in changes}
    for name, value in changes.items():
        setattr(defaults, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(defaults, name, value)


def run(args: argparse.Namespace) -> None:
    run_grid(args, runs(args.mechanisms), _keys, _rule)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_grid_arguments(parser, settings=["adult", "adult-pgm-64"], example="select-marginal independent")
    parser.add_argument("--mechanisms", nargs="+", choices=list(MECHANISMS), default=list(MECHANISMS))
    return seeded_results_main(parser, argv, epsilons=EPSILONS, seeds=SEEDS, out=RESULTS / "fit_selection.jsonl",
                               run=run, report=report)


if __name__ == "__main__":
    raise SystemExit(main())
