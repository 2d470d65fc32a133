"""Fidelity of every mechanism of the registry, side by side with OpenDP's MST and AIM, on the same tables.

What runs (one row of ``bench/results/fidelity.csv`` per setting, mechanism, ε and seed):

* **settings** (data + workload), in this order:

  - ``adult``: Adult as shipped, the README's main job (``examples/adult/release.toml`` and its schema, with its
    public rules; 48,842 rows, 15 columns), the config's workload (all 1-way, all 2-way and 64 random 3-way
    marginals, seed 0);
  - ``adult-pgm``: ADULT as preprocessed by private-pgm (``adult_pgm`` in the shared data directory, loaded as
    ``bench/mechanisms.py`` does; 14 columns, no rules), the default workload (``dqrelease.inputs.config.
    default_workload``: all 1-way, all 2-way, 64 random 3-way);
  - ``adult-pgm-64``: the same data with the *old* workload, 64 random 3-way marginals
    (``random_marginals(domain, 3, 64, make_rng(0))``, as ``bench/mechanisms.py``), for issue 10's "ADULT-64"
    targets and the README's older claims: DualQuery, DQRS, MWEM on particles, MST and AIM only (MST reads no
    workload: its rows are those of the ``adult-pgm`` run with the same ε and seed, scored on this workload);
  - ``kdd99``: KDD Cup 99 10 % (``examples/kdd99/release.toml`` and its schema with its rules, data through
    ``DQRELEASE_DATA``; 494,021 rows, 42 columns), the config's workload;
  - ``adult-64`` and ``kdd99-64``: Adult as shipped and KDD99, each with 64 random 3-way marginals of its own
    columns (``random_marginals(domain, 3, 64, make_rng(0))``) instead of the config's workload: the held-out
    tables of the rule that measures every marginal of a small workload (chosen on ``adult-pgm-64``). Ours and
    independent columns only, with MST's rows of ``adult`` / ``kdd99`` scored on this workload;

* **mechanisms**: every entry of :data:`dqrelease.mechanisms.MECHANISMS`, planned and run by the pipeline's own
  :func:`~dqrelease.mechanisms.plan_mechanism` / :func:`~dqrelease.mechanisms.run_mechanism` with its default
  keys (DualQuery: the release config's keys where the setting has a config), which includes the default table
  fit of DualQuery, DQRS, FEM and sepFEM. Tight accounting, seeded (deterministic) oracles, target (ε, δ) of the
  row. A mechanism the plan refuses (MWEM above its universe limit, randomized response with rules or with
  estimates that would be noise) is a ``refused`` row with the plan's reason;
* **peers**: OpenDP 0.16's MST and AIM (``opendp.extras.mbi``) in the separate venv ``.venv-peers`` (see
  "Peers" below), at ρ = :func:`dq_engine.privacy.public.largest_rho` (ε, δ) (so at the same (ε, δ) as ours), on the
  same integer codes; AIM gets the setting's workload marginals as its queries, MST selects its own 2-way
  marginals. Each peer run is capped at ``--cap-minutes`` (default 30) of wall time; a run over the cap is
  killed and recorded as ``capped``;
* ε ∈ {0.1, 1}, δ = 1e-9, seeds 0-4 (the mechanism's generator is ``make_rng(seed)``, the published rows are
  drawn with ``make_rng(10_000 + seed)``; the peers seed numpy's generator with ``seed`` for their sampling,
  while OpenDP's noise comes from OS randomness and cannot be seeded).

**Published rows.** ``result.sample_rows(n, rng)``, exactly what the pipeline publishes (``tasks/outputs.py``);
the peers synthesize n rows (``method="sample"``). Every figure is computed on those rows with
:func:`dq_engine.evaluation.fidelity.evaluate_rows` against
:func:`dq_engine.evaluation.fidelity.fidelity_reference` of the data:
worst 1-way cell, mean and max 1-way TVD, mean and max 2-way TVD (every pair), the workload's max, mean and RMSE
error, distinct rows, the largest multiplicity, published rows breaking a rule of the schema. MST can return
null keys (rows outside the declared domain): they are counted (``out_of_domain_rows``), are not checked
against the rules, and count as error: every marginal gets one extra cell, true share 0, holding their share,
so the TVDs and the worst cells include it and the workload answers lose that mass.

**Time.** ``seconds`` is the wall time of ``run_mechanism`` (ours; the plan's own time is ``plan_seconds``), or of
the peer's fit and synthesis inside its process (``process_seconds`` is the whole subprocess, with the
interpreter start and the jax/OpenDP imports). The machine is a shared 2-core one: every row records the
1-minute load average at its start.

**Peers.** ``pip install -e ".[peers]"`` into a venv of its own, which this script uses when it exists::

    python3 -m venv .venv-peers && .venv-peers/bin/pip install -e ".[peers]"

(``--install-peers`` does exactly that). The extra pulls ``opendp[mbi]`` (jax, polars) and pandas (mbi's
synthesis needs it). The peers never run in the main venv: jax is a heavy dependency dqrelease does not need.

Commands (hours: run it in the background; the CSV is appended and flushed row by row, and a rerun skips the
rows already there, so it resumes where it stopped)::

    nohup .venv/bin/python bench/fidelity.py > bench/results/tmp/fidelity.log 2>&1 &
    .venv/bin/python bench/fidelity.py --report       # only the JSON, Markdown table and figure from the CSV

``--smoke`` runs a 2,000-row slice of the shipped Adult, ε = 1, one seed, tiny mechanism sizes, peers only with
``--peers-python`` pointing at a venv (tests/bench/test_fidelity_smoke.py).

Outputs: ``bench/results/fidelity.csv`` (every run), ``fidelity.json`` (environment, the cap, medians and ranges
per setting, mechanism and ε, and the checks of issue 10's targets), ``fidelity.md`` (the tables quoted in
docs/benchmarks.md) and ``fidelity.png``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import fcntl
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scale_common import machine, study_grant  # noqa: E402
from dq_engine import Dataset, Domain, make_rng, random_marginals  # noqa: E402
from dq_engine.data.answers import error_summary  # noqa: E402
from dq_engine.data.workload import Workload  # noqa: E402
from dq_engine.evaluation.fidelity import FidelityReference, evaluate_rows, fidelity_reference  # noqa: E402
from dq_engine.privacy.accounting import approx_dp_from_zcdp  # noqa: E402
from dq_engine.privacy.public import PublicQuantities, largest_rho  # noqa: E402

RESULTS = ROOT / "bench" / "results"
TMP = RESULTS / "tmp"
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
PEERS = ("mst", "aim")
SELECTORS = ("auto",)
"""Registry entries that choose another mechanism: not run under their own name (the chosen one is; the JSON says
which one each setting's plan chooses)."""
EPSILONS = (0.1, 1.0)
DELTA = 1e-9
SEEDS = (0, 1, 2, 3, 4)
CAP_MINUTES = 30.0
PUBLISH_SEED_OFFSET = 10_000
SMOKE_ROWS = 2_000
FIGURES = (
    "worst_one_way_cell", "mean_one_way_tvd", "max_one_way_tvd", "mean_two_way_tvd", "max_two_way_tvd",
    "workload_max_error", "workload_mean_error", "workload_rmse",
)
FIELDS = (
    "setting", "mechanism", "kind", "epsilon", "delta", "seed", "status", "note", *FIGURES,
    "published_rows", "distinct_rows", "max_multiplicity", "violating_rows", "out_of_domain_rows",
    "seconds", "plan_seconds", "process_seconds", "charged_epsilon", "rho", "load_1min", "parameters", "finished",
)
"""Columns of fidelity.csv."""


# ---------------------------------------------------------------------- settings (data + workload)
@dataclasses.dataclass(frozen=True, kw_only=True)
class Loaded:
    """One setting, loaded: the data, the workload, the schema's rules and the release config's mechanism keys."""

    data: Dataset
    workload: Workload
    constraints: Any
    config_keys: Any
    description: str
    independent_pairs: frozenset[tuple[int, int]] | None = None
    """Column pairs ``(i, j)``, ``i < j``, that the data's generator keeps independent, when it is known (bnlearn)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Setting:
    """A data set with a workload, and the mechanisms run on it (None: every registry mechanism and peer)."""

    name: str
    load: Callable[[bool], Loaded]
    mechanisms: tuple[str, ...] | None = None
    peer_rows_from: dict[str, str] = dataclasses.field(default_factory=dict)
    """Peers that read no workload (MST), by name: the setting (same data) whose run's rows they are scored on."""


def _release_dataset(config_path: Path, *, smoke: bool) -> Loaded:
    """A release config's data through ``dqrelease.inputs.ingest`` and ``discretize``, cached in bench/results/tmp.

    The cache is keyed by the SHA-256 of the config, the schema and every source file, so an edit to any of them
    reloads. Smoke runs read the first :data:`SMOKE_ROWS` lines of the first source file (not cached).
    """
    from dqrelease.inputs.config import file_sha256, load_config
    from dqrelease.inputs.discretize import discretize
    from dqrelease.inputs.encoding import domain_from_columns
    from dqrelease.inputs.ingest import ingest_source
    from dqrelease.inputs.schema import load_schema, schema_constraints
    from dqrelease.plan import build_workload
    from dqrelease.warehouse import connect

    config = load_config(config_path)
    schema = load_schema(config.schema_file)
    domain = domain_from_columns(schema.columns)
    source = config.source
    files = [config_path, config.schema_file, *map(Path, source.paths)]
    key = "-".join(file_sha256(Path(f))[:16] for f in files)
    cache = TMP / f"{config.name}{'-smoke' if smoke else ''}.npz"
    data = None
    if cache.exists():
        with np.load(cache) as archive:
            if str(archive["key"]) == key:
                data = Dataset(domain=domain, n=int(archive["counts"].sum()), codes=archive["codes"],
                               counts=archive["counts"])
    if data is None:
        if smoke:
            lines = Path(source.paths[0]).read_text().splitlines()[:SMOKE_ROWS]
            TMP.mkdir(parents=True, exist_ok=True)
            sliced = TMP / f"{config.name}-smoke-{os.getpid()}.csv"
            sliced.write_text("\n".join(lines) + "\n")
            source = source.model_copy(update={"paths": [sliced]})
        with connect(None) as con:
            ingest_source(con, source, schema, table="raw")
            data = discretize(con, "raw", schema)
        if smoke:
            sliced.unlink()
        TMP.mkdir(parents=True, exist_ok=True)
        np.savez(cache, codes=data.codes, counts=data.counts, key=np.array(key))
    return Loaded(
        data=data, workload=build_workload(config.workload, domain), constraints=schema_constraints(schema),
        config_keys=config.mechanism, description=f"{config_path.relative_to(ROOT)} ({config.name})",
    )


def _adult_pgm(workload: str) -> Callable[[bool], Loaded]:
    def load(smoke: bool) -> Loaded:
        from bench.mechanisms import WORKLOAD_SEED, load_adult
        from dqrelease.inputs.config import default_workload
        from dqrelease.plan import build_workload

        data = load_adult()
        if workload == "default":
            built = build_workload(default_workload(), data.domain)
        else:
            built = random_marginals(data.domain, 3, 64, make_rng(WORKLOAD_SEED))
        return Loaded(data=data, workload=built, constraints=None, config_keys=None,
                      description="adult_pgm (private-pgm's ADULT encoding), shared data directory")

    return load


def _random_triples(load: Callable[[bool], Loaded]) -> Callable[[bool], Loaded]:
    """``load``'s data and rules with 64 random 3-way marginals of its columns as the workload (public seed)."""

    def with_triples(smoke: bool) -> Loaded:
        from bench.mechanisms import WORKLOAD_SEED

        loaded = load(smoke)
        workload = random_marginals(loaded.data.domain, 3, 64, make_rng(WORKLOAD_SEED))
        return dataclasses.replace(loaded, workload=workload)

    return with_triples


def bnlearn_setting(network: str, rows: int) -> Callable[[bool], Loaded]:
    """``rows`` records forward-sampled from a bnlearn network (public seed), with the default workload."""

    def load(smoke: bool) -> Loaded:
        from bench.bnlearn import SAMPLE_SEED, forward_sample, independent_pairs, read_bif
        from dqrelease.inputs.config import default_workload
        from dqrelease.inputs.data_home import DATA_FIX, shared_data_file
        from dqrelease.plan import build_workload

        relative = f"bnlearn/{network}.bif.gz"
        path = shared_data_file(relative)
        if path is None:
            raise SystemExit(f"shared data file {relative} not found; {DATA_FIX}")
        bif = read_bif(path)
        count = SMOKE_ROWS if smoke else rows
        domain = Domain.categorical(bif.sizes)
        data = Dataset.from_codes(domain, forward_sample(bif, count, make_rng(SAMPLE_SEED)))
        described = f"{network.upper()} (bnlearn), {count:,} records forward-sampled (seed {SAMPLE_SEED})"
        return Loaded(data=data, workload=build_workload(default_workload(), domain), constraints=None,
                      config_keys=None, description=described, independent_pairs=frozenset(independent_pairs(bif)))

    return load


SETTINGS: dict[str, Setting] = {
    "adult": Setting(name="adult", load=lambda smoke: _release_dataset(ROOT / "examples/adult/release.toml",
                                                                        smoke=smoke)),
    "adult-pgm": Setting(name="adult-pgm", load=_adult_pgm("default")),
    "adult-pgm-64": Setting(name="adult-pgm-64", load=_adult_pgm("64"),
                            mechanisms=("independent", "dualquery", "dqrs", "mwem-particles", "mst", "aim"),
                            peer_rows_from={"mst": "adult-pgm"}),
    "kdd99": Setting(name="kdd99", load=lambda smoke: _release_dataset(ROOT / "examples/kdd99/release.toml",
                                                                        smoke=smoke)),
    "hailfinder": Setting(name="hailfinder", load=bnlearn_setting("hailfinder", 50_000),
                          mechanisms=("independent", "dualquery", "mwem-particles", "mst", "aim")),
    "adult-64": Setting(name="adult-64", load=_random_triples(lambda smoke: _release_dataset(
        ROOT / "examples/adult/release.toml", smoke=smoke)), mechanisms=("independent", "dualquery", "mwem-particles",
                                                                          "mst"), peer_rows_from={"mst": "adult"}),
    "kdd99-64": Setting(name="kdd99-64", load=_random_triples(lambda smoke: _release_dataset(
        ROOT / "examples/kdd99/release.toml", smoke=smoke)), mechanisms=("independent", "dualquery", "mwem-particles",
                                                                          "mst"), peer_rows_from={"mst": "kdd99"}),
}
"""Every setting, in the order they run."""

WORKLOAD_LABELS = {
    "adult": "the config's: all 1-way + all 2-way + 64 random 3-way marginals (seed 0)",
    "adult-pgm": "default: all 1-way + all 2-way + 64 random 3-way marginals (seed 0)",
    "adult-pgm-64": "64 random 3-way marginals (random_marginals, seed 0; the old ADULT-64 workload)",
    "kdd99": "the config's: all 1-way + all 2-way + 64 random 3-way marginals (seed 0)",
    "hailfinder": "default: all 1-way + all 2-way + 64 random 3-way marginals (seed 0)",
    "adult-64": "64 random 3-way marginals of its columns (random_marginals, seed 0)",
    "kdd99-64": "64 random 3-way marginals of its columns (random_marginals, seed 0)",
}


# ---------------------------------------------------------------------- figures of published rows
def published_figures(reference: FidelityReference, codes: np.ndarray, constraints: Any) -> dict[str, Any]:
    """Every figure of published rows; rows with a negative code are outside the domain (a peer's null keys).

    Rows outside the domain are one extra cell of every marginal, whose true share is 0: the in-domain tables
    are scaled by the in-domain share ``1 - f`` and the extra cell adds ``f`` to each table's L1 error (so
    ``f / 2`` to each TVD) and is a cell of error ``f`` for the worst 1-way cell; the workload answers are the
    in-domain answers scaled by ``1 - f``. With no such row every figure is :func:`evaluate_rows`'s.
    ``pair_tvd`` is the two-way TVD of every evaluated pair (``reference.marginals.pairs``), in that order.
    """
    codes = np.asarray(codes)
    inside = (codes >= 0).all(axis=1)
    outside = int((~inside).sum())
    if not inside.any():
        raise ValueError("every published row is outside the domain")
    fidelity = evaluate_rows(reference, codes[inside], label="published rows", constraints=constraints)
    figures = fidelity.figures()
    pair_tvd = [float(t) for t in fidelity.two_way_tvd] if fidelity.two_way_tvd is not None else []
    if outside:
        f = outside / len(codes)
        m = reference.marginals.n_columns
        tvd, worst = [], []
        for i, (truth, table) in enumerate(zip(reference.tables, fidelity.tables, strict=True)):
            error = np.abs(truth - (1.0 - f) * table)
            tvd.append(0.5 * (error.sum() + f))
            if i < m:
                worst.append(max(float(error.max()), f))
        one, two = np.array(tvd[:m]), np.array(tvd[m:])
        figures.update(worst_one_way_cell=max(worst), mean_one_way_tvd=float(one.mean()),
                       max_one_way_tvd=float(one.max()))
        if len(two):
            figures.update(mean_two_way_tvd=float(two.mean()), max_two_way_tvd=float(two.max()))
            pair_tvd = [float(t) for t in two]
        if reference.workload is not None:
            summary = error_summary(reference.answers, (1.0 - f) * fidelity.answers)
            figures.update(workload_max_error=summary["max_error"], workload_mean_error=summary["mean_error"],
                           workload_rmse=summary["rmse"])
    return {
        **figures,
        "published_rows": len(codes),
        "distinct_rows": fidelity.distinct_rows,
        "max_multiplicity": fidelity.max_multiplicity,
        "violating_rows": fidelity.constraint_violations,
        "out_of_domain_rows": outside,
        "pair_tvd": pair_tvd,
    }


# ---------------------------------------------------------------------- one run
def _public(loaded: Loaded, epsilon: float) -> PublicQuantities:
    return PublicQuantities(
        n=loaded.data.n, epsilon=epsilon, delta=DELTA, domain=loaded.data.domain, n_queries=len(loaded.workload),
        n_marginals=loaded.workload.n_marginals,
    )


def mechanism_keys(name: str, loaded: Loaded, *, smoke: bool) -> Any:
    """The pipeline's keys: the release config's for the mechanism it names, the registry defaults otherwise.

    Smoke runs shrink the sizes (rounds, samples, the fit's particles and rounds) so the whole run takes seconds.
    """
    from dqrelease.mechanisms import MECHANISMS

    model = MECHANISMS[name].keys
    given = {"name": name}
    if loaded.config_keys is not None and loaded.config_keys.name == name:
        given.update(loaded.config_keys.model_dump(exclude={"name"}, exclude_unset=True))
    if smoke:
        fit = {"particles": 1_000, "rounds": 2}
        given.update({
            "dualquery": {"samples": 20, "rounds": 3, "fit": fit},
            "dqrs": {"samples": 20, "rounds": 3, "fit": fit},
            "fem": {"samples": 3, "rounds": 3, "fit": fit},
            "sepfem": {"samples": 3, "rounds": 3, "fit": fit},
            "mwem": {"rounds": 3},
            "mwem-particles": {"rounds": 3},
        }.get(name, {}))
    return model.model_validate(given)


def run_ours(name: str, loaded: Loaded, reference: FidelityReference, epsilon: float, seed: int,
             *, smoke: bool, keys: Any = None) -> dict[str, Any]:
    """Plan and run one registry mechanism as the pipeline does; figures of the rows it would publish.

    ``keys``: the mechanism's keys (default :func:`mechanism_keys`), for benchmarks that vary one of them.
    """
    from dq_engine.errors import DQEngineError
    from dqrelease.errors import ConfigInvalidError
    from dqrelease.mechanisms import PlanInputs, RunInputs, plan_mechanism, run_mechanism

    began = time.perf_counter()
    inputs = PlanInputs(public=_public(loaded, epsilon), mode="tight", deterministic=True,
                        constraints=loaded.constraints)
    try:
        plan = plan_mechanism(keys if keys is not None else mechanism_keys(name, loaded, smoke=smoke), inputs)
    except (DQEngineError, ConfigInvalidError) as refusal:
        return {"status": "refused", "note": f"{type(refusal).__name__}: {refusal}",
                "plan_seconds": time.perf_counter() - began}
    grant = study_grant(plan)
    planned = time.perf_counter()
    result = run_mechanism(grant, RunInputs(data=loaded.data, workload=loaded.workload, rng=make_rng(seed),
                                           true_answers=reference.answers))
    seconds = time.perf_counter() - planned
    published = result.sample_rows(loaded.data.n, make_rng(PUBLISH_SEED_OFFSET + seed))
    parameters = {k: v for k, v in plan.parameters.items() if k != "oracle"}
    return {
        "status": "ok", **published_figures(reference, published, loaded.constraints), "seconds": seconds,
        "plan_seconds": planned - began, "charged_epsilon": plan.costs["tight"].epsilon,
        "parameters": json.dumps(parameters, default=str, sort_keys=True),
    }


def peers_data(setting: str, loaded: Loaded, *, smoke: bool) -> Path:
    """The setting's codes as the peers' ``.npz`` (one row per record) under bench/results/tmp.

    Written again whenever the codes kept there are not these (a cut of other rows, a changed source), so a
    peer never reads another table than the one it is scored against.
    """
    path = TMP / f"peers-{setting}{'-smoke' if smoke else ''}.npz"
    data = loaded.data
    codes = np.repeat(data.codes, data.counts, axis=0)
    kept = False
    if path.exists():
        with np.load(path) as archive:
            kept = np.array_equal(archive["codes"], codes) and archive["sizes"].tolist() == list(data.domain.sizes)
    if not kept:
        TMP.mkdir(parents=True, exist_ok=True)
        np.savez(path, codes=codes, names=np.array(data.domain.names), sizes=np.array(data.domain.sizes))
    return path


def run_peer(name: str, setting: str, loaded: Loaded, reference: FidelityReference, epsilon: float, seed: int,
             *, python: Path, cap_seconds: float, smoke: bool) -> dict[str, Any]:
    """One OpenDP synthesizer in the peers venv (a subprocess killed at the cap); figures of its n rows."""
    rho = largest_rho(epsilon, DELTA)
    common = {"rho": rho, "charged_epsilon": approx_dp_from_zcdp(rho, DELTA)}
    if not python.exists():
        return {"status": "unavailable", "note": f"no peers interpreter at {python} (--install-peers)",
                **common}
    names = loaded.data.domain.names
    queries = [[names[int(a)] for a in attributes if a >= 0] for attributes in loaded.workload.marginals]
    TMP.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=TMP) as work:
        out = Path(work) / "synthetic.npz"
        spec = {"data": str(peers_data(setting, loaded, smoke=smoke)), "algorithm": name, "rho": rho, "seed": seed,
                "rows": loaded.data.n, "queries": queries if name == "aim" else [], "out": str(out)}
        spec_path = Path(work) / "spec.json"
        spec_path.write_text(json.dumps(spec))
        began = time.perf_counter()
        process = subprocess.Popen([str(python), str(ROOT / "bench" / "peers_worker.py"), str(spec_path)],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)
        try:
            output, _ = process.communicate(timeout=cap_seconds)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the worker's own process group (it was started in a session)
            process.communicate()
            return {"status": "capped", "note": f"killed at the cap of {cap_seconds / 60:g} min",
                    "process_seconds": time.perf_counter() - began, **common}
        process_seconds = time.perf_counter() - began
        if process.returncode != 0:
            last = [line for line in output.strip().splitlines() if line.strip()][-1:] or ["(no output)"]
            return {"status": "failed", "note": f"exit {process.returncode}: {last[0][:300]}",
                    "process_seconds": process_seconds, **common}
        timings = json.loads(out.with_suffix(".json").read_text())
        with np.load(out) as archive:
            codes = archive["codes"]
    kept = peer_rows_path(setting, name, epsilon, seed, smoke=smoke)
    kept.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(kept, codes=codes.astype(np.int32))
    return {
        "status": "ok", **published_figures(reference, codes, loaded.constraints), "seconds": timings["seconds"],
        "process_seconds": process_seconds, **common,
        "parameters": json.dumps({"opendp": timings["opendp"], "packages": timings.get("packages"),
                                  "rho_asked": timings["rho_asked"],
                                  "fit_seconds": timings["fit_seconds"], "sample_seconds": timings["sample_seconds"],
                                  "queries": len(queries) if name == "aim" else "own 2-way selection"}),
    }


def peer_rows_path(setting: str, name: str, epsilon: float, seed: int, *, smoke: bool) -> Path:
    """Where a peer run's synthetic codes are kept (bench/results/tmp, git-ignored)."""
    return TMP / "peer-rows" / f"{setting}{'-smoke' if smoke else ''}-{name}-eps{epsilon:g}-seed{seed}.npz"


def reuse_peer(name: str, source: str, loaded: Loaded, reference: FidelityReference, epsilon: float, seed: int,
               *, out: Path, smoke: bool) -> dict[str, Any]:
    """Score the rows of ``source``'s run of a peer that reads no workload (same data, ε and seed) on this workload.

    Its time and budget are that run's (it is the same run).
    """
    with np.load(peer_rows_path(source, name, epsilon, seed, smoke=smoke)) as archive:
        codes = archive["codes"]
    [origin] = [row for row in read_rows(out) if _key(row) == (source, name, round(epsilon, 9), seed)]
    return {
        "status": "ok", **published_figures(reference, codes, loaded.constraints),
        **{field: origin[field] for field in ("seconds", "process_seconds", "rho", "charged_epsilon", "load_1min",
                                              "parameters")},
        "note": f"the rows of the {source} run with this eps and seed ({name} reads no workload)",
    }


# ---------------------------------------------------------------------- the CSV (resumable, appended under a lock)
def _key(row: dict[str, Any]) -> tuple[str, str, float, int]:
    return row["setting"], row["mechanism"], round(float(row["epsilon"]), 9), int(row["seed"])


WORSE_BY = 0.02
"""A pair counts as *worse than independent columns* when its two-way TVD exceeds theirs by more than this."""


def pairs_path(out: Path) -> Path:
    """Where each run's two-way TVD per pair goes, beside the CSV: one JSON line per run."""
    return out.with_name(f"{out.stem}_pairs.jsonl")


def append_pairs(out: Path, row: dict[str, Any]) -> None:
    """Append the run's ``pair_tvd`` (in ``reference.marginals.pairs`` order) under the CSV's key, if it has one."""
    if not row.get("pair_tvd"):
        return
    line = json.dumps({"setting": row["setting"], "mechanism": row["mechanism"], "epsilon": float(row["epsilon"]),
                       "seed": int(row["seed"]), "pair_tvd": [round(t, 6) for t in row["pair_tvd"]]})
    with pairs_path(out).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            handle.write(line + "\n")
            handle.flush()
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def count_pairs_worse(rows: list[dict[str, Any]], out: Path) -> None:
    """Set ``pairs_worse`` on each ok row: pairs whose two-way TVD exceeds the ``independent`` run's of the same
    setting, ε and seed by more than :data:`WORSE_BY` (None when either run's pairs are not on record)."""
    pairs: dict[tuple, list[float]] = {}
    if pairs_path(out).exists():
        for line in pairs_path(out).read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                pairs[_key(entry)] = entry["pair_tvd"]  # a later run of the same key replaces an earlier one
    for row in rows:
        own = pairs.get(_key(row)) if row["status"] == "ok" else None
        base = pairs.get((row["setting"], "independent", round(float(row["epsilon"]), 9), int(row["seed"])))
        row["pairs_worse"] = (None if own is None or base is None
                              else sum(a > b + WORSE_BY for a, b in zip(own, base, strict=True)))


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of the CSV with numbers parsed (empty cells are None)."""
    if not path.exists():
        return []
    rows = []
    with path.open(newline="") as handle:
        for record in csv.DictReader(handle):
            row: dict[str, Any] = dict(record)
            for field in FIELDS:
                value = row.get(field, "")
                if field in ("setting", "mechanism", "kind", "status", "note", "parameters", "finished"):
                    continue
                row[field] = None if value in ("", None) else float(value)
            row["seed"] = int(row["seed"])
            rows.append(row)
    return rows


def append_row(path: Path, row: dict[str, Any]) -> None:
    """Append one row under an exclusive lock (two processes may share the CSV), flushed to disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            writer = csv.DictWriter(handle, fieldnames=FIELDS)
            if handle.tell() == 0:
                writer.writeheader()
            writer.writerow({field: row.get(field) for field in FIELDS})
            handle.flush()
            os.fsync(handle.fileno())
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def selector_choices(loaded: Loaded, epsilons: Iterable[float]) -> dict[str, str]:
    """The mechanism each selector of :data:`SELECTORS` plans at each ε (it is run under that name)."""
    from dqrelease.mechanisms import MECHANISMS, PlanInputs, plan_mechanism

    choices = {}
    for name in SELECTORS:
        for epsilon in epsilons:
            inputs = PlanInputs(public=_public(loaded, epsilon), mode="tight", deterministic=True,
                                constraints=loaded.constraints)
            try:
                choices[f"{name} eps {epsilon:g}"] = plan_mechanism(MECHANISMS[name].keys(), inputs).mechanism
            except Exception as refusal:  # recorded, not fatal
                choices[f"{name} eps {epsilon:g}"] = f"refused: {refusal}"
    return choices


def run(args: argparse.Namespace, meta: dict[str, Any]) -> None:
    """Every missing (setting, mechanism, ε, seed) row, in order; each row is appended as soon as it finishes."""
    from dqrelease.mechanisms import MECHANISMS

    existing = read_rows(args.out)
    done = {_key(row) for row in existing if not (args.retry_failed and row["status"] == "failed")}
    capped = {_key(row)[:3]: row["seed"] for row in existing if row["status"] == "capped"}
    for setting_name in args.settings:
        setting = SETTINGS[setting_name]
        names = [m for m in (*MECHANISMS, *PEERS)
                 if m not in SELECTORS and (setting.mechanisms is None or m in setting.mechanisms)]
        names = [m for m in names if m in args.mechanisms]
        todo = [(seed, epsilon, name) for seed in args.seeds for epsilon in args.epsilons for name in names
                if (setting_name, name, round(epsilon, 9), seed) not in done]
        if not todo:
            continue
        loaded = setting.load(args.smoke)
        reference = fidelity_reference(loaded.data, workload=loaded.workload)
        meta.setdefault("selector_choices", {})[setting_name] = selector_choices(loaded, args.epsilons)
        print(f"{setting_name}: {loaded.description}; n = {loaded.data.n:,}, {len(loaded.data.domain)} columns, "
              f"{len(loaded.workload):,} queries in {loaded.workload.n_marginals} marginals; {len(todo)} runs",
              flush=True)
        for seed, epsilon, name in todo:
            load = os.getloadavg()[0]
            row: dict[str, Any] = {"setting": setting_name, "mechanism": name, "epsilon": epsilon, "delta": DELTA,
                                   "seed": seed, "kind": "peer" if name in PEERS else "dqrelease", "load_1min": load}
            try:
                source = setting.peer_rows_from.get(name)
                if source and peer_rows_path(source, name, epsilon, seed, smoke=args.smoke).exists():
                    row.update(reuse_peer(name, source, loaded, reference, epsilon, seed, out=args.out,
                                          smoke=args.smoke))
                elif (setting_name, name, round(epsilon, 9)) in capped:
                    first = capped[(setting_name, name, round(epsilon, 9))]
                    row.update(status="skipped", note=f"not run: seed {first} reached the cap at this setting and eps")
                elif name in PEERS:
                    row.update(run_peer(name, setting_name, loaded, reference, epsilon, seed, python=args.peers_python,
                                        cap_seconds=args.cap_minutes * 60, smoke=args.smoke))
                    if row["status"] == "capped":
                        capped[(setting_name, name, round(epsilon, 9))] = seed
                else:
                    row.update(run_ours(name, loaded, reference, epsilon, seed, smoke=args.smoke))
            except Exception as failure:  # a failing run is a row too; the benchmark goes on
                traceback.print_exc()
                row.update(status="failed", note=f"{type(failure).__name__}: {str(failure)[:300]}")
            row["finished"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
            append_row(args.out, row)
            append_pairs(args.out, row)
            shown = " ".join(f"{k}={row[k]:.4g}" for k in ("worst_one_way_cell", "mean_two_way_tvd",
                                                            "workload_max_error", "seconds") if row.get(k) is not None)
            print(f"{setting_name:13s} {name:19s} eps={epsilon:<4g} seed={seed} {row['status']:8s} {shown} "
                  f"distinct={row.get('distinct_rows')} load={load:.1f}", flush=True)


# ---------------------------------------------------------------------- summaries
def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": len(values)}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians and ranges per (setting, mechanism, ε) over the ok runs; statuses of the others."""
    out: dict[str, Any] = {}
    for row in rows:
        entry = out.setdefault(row["setting"], {}).setdefault(row["mechanism"], {}).setdefault(
            f"{row['epsilon']:g}", {"statuses": {}, "runs": []})
        entry["statuses"][row["status"]] = entry["statuses"].get(row["status"], 0) + 1
        entry["runs"].append(row)
    for mechanisms in out.values():
        for epsilons in mechanisms.values():
            for key, entry in epsilons.items():
                ok = [r for r in entry.pop("runs") if r["status"] == "ok"]
                epsilons[key] = {**entry, "seeds_ok": sorted(int(r["seed"]) for r in ok),
                                 "workload_max_error_by_seed": {int(r["seed"]): r["workload_max_error"] for r in ok}}
                for field in (*FIGURES, "distinct_rows", "violating_rows", "out_of_domain_rows", "seconds",
                              "load_1min", "charged_epsilon", "pairs_worse"):
                    values = [r[field] for r in ok if r.get(field) is not None]
                    if values:
                        epsilons[key][field] = _spread(values)
    return out


def _median(summary: dict, setting: str, mechanism: str, epsilon: float, field: str) -> float | None:
    try:
        return summary[setting][mechanism][f"{epsilon:g}"][field]["median"]
    except KeyError:
        return None


def target_checks(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 10's targets against the medians (None where a figure is missing)."""
    checks = []

    def check(target: str, measured: Any, met: bool | None) -> None:
        checks.append({"target": target, "measured": measured, "met": met})

    cell = _median(summary, "adult", "dualquery", 1.0, "worst_one_way_cell")
    check("DualQuery, README main job (adult), eps 1: worst 1-way cell <= 0.03", cell,
          None if cell is None else cell <= 0.03)
    distinct = _median(summary, "adult", "dualquery", 1.0, "distinct_rows")
    check("DualQuery, README main job (adult), eps 1: >= min(n, 5000) distinct published rows", distinct,
          None if distinct is None else distinct >= 5000)
    for epsilon in EPSILONS:
        ours = _median(summary, "adult-pgm-64", "dualquery", epsilon, "workload_max_error")
        mst = _median(summary, "adult-pgm-64", "mst", epsilon, "workload_max_error")
        check(f"DualQuery on ADULT-64 (adult-pgm-64), eps {epsilon:g}: max error <= MST's", [ours, mst],
              None if ours is None or mst is None else ours <= mst)
    for setting in ("adult", "adult-pgm-64"):
        for epsilon in EPSILONS:
            # paired: the medians over the seeds both mechanisms ran
            entries = [summary.get(setting, {}).get(m, {}).get(f"{epsilon:g}", {}) for m in ("dqrs", "dualquery")]
            by_seed = [entry.get("workload_max_error_by_seed", {}) for entry in entries]
            seeds = sorted(set(by_seed[0]) & set(by_seed[1]))
            dqrs, dual = ((statistics.median(values[s] for s in seeds) if seeds else None) for values in by_seed)
            check(f"DQRS no worse than DualQuery ({setting}, eps {epsilon:g}, workload max error, median over the "
                  f"seeds both ran: {', '.join(map(str, seeds)) or 'none'})", [dqrs, dual],
                  None if dqrs is None or dual is None else dqrs <= dual)
    for setting in ("adult", "kdd99"):
        worst = [
            (mechanism, entry["violating_rows"]["max"])
            for mechanism, epsilons in summary.get(setting, {}).items() if mechanism not in PEERS
            for entry in epsilons.values() if "violating_rows" in entry
        ]
        if worst:
            check(f"0 violating published rows on {setting} (rules declared), every dqrelease mechanism and run "
                  "(largest count per mechanism shown when not 0)", {m: v for m, v in worst if v},
                  all(v == 0 for _, v in worst))
    return checks


def _cell(entry: dict | None, field: str, digits: int = 3) -> str:
    if entry is None:
        return "–"
    if field not in entry:  # no run measured it: say why, or "–" when it does not apply (e.g. no rules)
        statuses = ", ".join(f"{s} {c}" for s, c in entry["statuses"].items() if s != "ok")
        return statuses or "–"
    spread = entry[field]
    whole = field in ("distinct_rows", "violating_rows", "out_of_domain_rows", "seconds", "pairs_worse")

    def fmt(value: float) -> str:
        return f"{value:,.0f}" if whole else f"{value:.{digits}f}"

    text = f"{fmt(spread['median'])} ({fmt(spread['min'])}–{fmt(spread['max'])})"
    statuses = entry["statuses"]
    total = sum(statuses.values())
    if spread["runs"] < total:
        text += f" [{spread['runs']}/{total} ok]"
    return text


def markdown(summary: dict[str, Any], checks: list[dict[str, Any]]) -> str:
    """One table per setting: median (min–max) over the seeds of every figure, by mechanism and ε."""
    from dqrelease.mechanisms import MECHANISMS

    order = [*MECHANISMS, *PEERS]
    columns = (("worst_one_way_cell", "worst 1-way cell"), ("mean_one_way_tvd", "mean 1-way TVD"),
               ("mean_two_way_tvd", "mean 2-way TVD"), ("max_two_way_tvd", "max 2-way TVD"),
               ("workload_max_error", "workload max"), ("workload_mean_error", "workload mean"),
               ("distinct_rows", "distinct rows"), ("violating_rows", "rows breaking a rule"),
               ("out_of_domain_rows", "rows outside the domain"),
               ("pairs_worse", f"pairs worse than independent by > {WORSE_BY:g}"), ("seconds", "wall s"))
    lines = []
    for setting, mechanisms in summary.items():
        lines += [f"#### {setting}: {WORKLOAD_LABELS.get(setting, '')}", "",
                  "| mechanism | ε | " + " | ".join(label for _, label in columns) + " |",
                  "|---|---|" + "---|" * len(columns)]
        for epsilon in EPSILONS:
            for mechanism in sorted(mechanisms, key=lambda m: order.index(m) if m in order else len(order)):
                entry = mechanisms[mechanism].get(f"{epsilon:g}")
                if entry is None:
                    continue
                digits = {"workload_mean_error": 5}
                cells = [_cell(entry, field, digits.get(field, 3)) for field, _ in columns]
                if not entry["seeds_ok"]:  # refused, capped, ...: say it once
                    cells = [cells[0]] + ["–"] * (len(cells) - 1)
                lines.append(f"| {mechanism} | {epsilon:g} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["#### Issue 10's targets (medians over the seeds)", "", "| target | measured | met |", "|---|---|---|"]
    for item in checks:
        met = "–" if item["met"] is None else ("yes" if item["met"] else "**no**")
        lines.append(f"| {item['target']} | {_measured(item['measured'])} | {met} |")
    return "\n".join(lines) + "\n"


def _measured(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 1000 and value == int(value) else f"{value:.4g}"
    if isinstance(value, list):
        return " vs ".join(_measured(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_measured(v)}" for k, v in value.items()) or "none"
    return "–" if value is None else str(value)


def _round(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else str(value)


def plot(summary: dict[str, Any], path: Path) -> None:
    """Median and range per mechanism: worst 1-way cell, mean 2-way TVD and workload max, one row per setting."""
    from matplotlib.figure import Figure

    from dqrelease.mechanisms import MECHANISMS

    order = [*MECHANISMS, *PEERS]
    panels = (("worst_one_way_cell", "worst 1-way cell"), ("mean_two_way_tvd", "mean 2-way TVD"),
              ("workload_max_error", "workload max error"))
    settings = list(summary)
    figure = Figure(figsize=(4.2 * len(panels), 3.0 * max(1, len(settings))))
    axes = figure.subplots(max(1, len(settings)), len(panels), squeeze=False)
    colours = {0.1: "tab:red", 1.0: "tab:blue"}
    for r, setting in enumerate(settings):
        entries = {m: summary[setting].get(m, {}) for m in order}
        names = [m for m in order if any(entry["seeds_ok"] or "capped" in entry["statuses"]
                                         for entry in entries[m].values())]
        capped = [i for i, m in enumerate(names) if not any(entry["seeds_ok"] for entry in entries[m].values())]
        for c, (field, label) in enumerate(panels):
            axis = axes[r][c]
            for i in capped:  # a peer whose every run hit the wall-clock cap: say so where its points would be
                axis.text(i, 0.5, "capped", transform=axis.get_xaxis_transform(), rotation=90, ha="center",
                          va="center", fontsize=8, color="0.35")
            for shift, epsilon in ((-0.15, 0.1), (0.15, 1.0)):
                xs, ys, lows, highs = [], [], [], []
                for i, name in enumerate(names):
                    spread = summary[setting][name].get(f"{epsilon:g}", {}).get(field)
                    if spread:
                        xs.append(i + shift)
                        ys.append(spread["median"])
                        lows.append(spread["median"] - spread["min"])
                        highs.append(spread["max"] - spread["median"])
                if xs:
                    axis.errorbar(xs, ys, yerr=[lows, highs], fmt="o", markersize=4, capsize=2,
                                  color=colours[epsilon], label=f"ε = {epsilon:g}")
            axis.set_xticks(range(len(names)))
            axis.set_xlim(-0.6, len(names) - 0.4)
            axis.set_xticklabels(names, rotation=45, ha="right", fontsize=7)
            axis.set_yscale("log")
            axis.grid(True, which="both", alpha=0.3)
            axis.set_title(f"{setting}: {label}", fontsize=9)
            if r == 0 and c == 0 and axis.get_legend_handles_labels()[0]:
                axis.legend(fontsize=7)
    figure.suptitle("Median and range over the seeds (δ = 1e-9); peers: OpenDP MST, AIM", fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def report(args: argparse.Namespace, meta: dict[str, Any] | None) -> dict[str, Any]:
    """Write fidelity.json, fidelity.md and fidelity.png beside the CSV from every row in it."""
    rows = read_rows(args.out)
    count_pairs_worse(rows, args.out)
    summary = summarise(rows)
    checks = target_checks(summary)
    json_path = args.out.with_suffix(".json")
    previous = json.loads(json_path.read_text()) if json_path.exists() else {}
    runs = previous.get("runs", [])
    if meta is not None:
        runs.append(meta)
    result = {
        "description": __doc__.split("\n\n")[0],
        "settings": {name: WORKLOAD_LABELS[name] for name in summary if name in WORKLOAD_LABELS},
        "epsilons": list(EPSILONS), "delta": DELTA, "seeds": list(SEEDS), "cap_minutes_per_peer_run": args.cap_minutes,
        "accounting": "tight (zCDP, optimal conversion); peers at rho = largest_rho(eps, delta)",
        "runs": runs, "summary": summary, "targets_issue_10": checks,
    }
    json_path.write_text(json.dumps(result, indent=1, default=_round) + "\n")
    args.out.with_suffix(".md").write_text(markdown(summary, checks))
    if summary:
        plot(summary, args.out.with_suffix(".png"))
    return result


# ---------------------------------------------------------------------- command line
def install_peers(python: Path) -> None:
    """Create the peers venv and install the ``peers`` extra into it."""
    venv = python.parent.parent
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", f"{ROOT}[peers]"], check=True)


def main(argv: Iterable[str] | None = None) -> int:
    """Command-line entry point."""
    from dqrelease.mechanisms import MECHANISMS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    runnable = [m for m in (*MECHANISMS, *PEERS) if m not in SELECTORS]
    parser.add_argument("--mechanisms", nargs="+", choices=runnable, default=runnable)
    parser.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument("--cap-minutes", type=float, default=CAP_MINUTES, help="wall-clock cap of one peer run")
    parser.add_argument("--peers-python", type=Path, default=PEERS_PYTHON)
    parser.add_argument("--install-peers", action="store_true", help="create the peers venv, then exit")
    parser.add_argument("--out", type=Path, default=RESULTS / "fidelity.csv")
    parser.add_argument("--report", action="store_true", help="only write the JSON, Markdown and figure")
    parser.add_argument("--retry-failed", action="store_true", help="run again the rows whose status is failed")
    parser.add_argument("--smoke", action="store_true",
                        help="2,000 rows of the shipped Adult, eps 1, seed 0, tiny sizes (checks the script)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.install_peers:
        install_peers(args.peers_python)
        return 0
    if args.smoke:
        args.settings, args.epsilons = ["adult"], [1.0]
        args.seeds = [0] if args.seeds == list(SEEDS) else args.seeds
    if not args.report:
        meta = {"command": " ".join([".venv/bin/python", "bench/fidelity.py", *(argv or sys.argv[1:])]),
                "smoke": args.smoke, "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "machine": machine(), "git_commit": _git_commit()}
        run(args, meta)
        meta["finished"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        meta["load_average_end"] = os.getloadavg()
    else:
        meta = None
    report(args, meta)
    return 0


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                              check=False).stdout.strip()
    except OSError:
        return ""


if __name__ == "__main__":
    sys.exit(main())
