"""Bench data: Adult (private-pgm codes) and KDD Cup 99 (DualQuery authors' encoding, public bucketing).

The files are read from the shared data directory (DQRELEASE_DATA or ../shared/data; ``dqrelease.inputs.data_home``).

KDD99 discretisation (fixed, public, never fitted to the data; bench only):

* symbolic columns keep their schema value lists (protocol_type 3, service 66, flag 11, attack 23) and the
  0/1 columns ``land``, ``logged_in``, ``is_host_login``, ``is_guest_login`` are categorical of size 2;
* the 15 ``rate`` columns (declared range [0, 1]) get 10 equal-width buckets;
* ``count``/``srv_count`` (declared range 0..511, a 2-second window capped at 511) and
  ``dst_host_count``/``dst_host_srv_count`` (declared range 0..255, last 256 connections) get 10 equal-width
  buckets over [0, 512) and [0, 256);
* ``duration``, ``src_bytes``, ``dst_bytes`` get 10 decimal-log buckets: 0, [1, 10), [10, 100), ...,
  [10^8, ∞);
* the remaining 12 small counters (``wrong_fragment`` ... ``num_outbound_cmds``) get 6 binary-log buckets:
  0, 1, 2-3, 4-7, 8-15, ≥16.

That is 42 attributes and 403 one-hot bits (the paper's own binarisation had 396).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scale_common import benchmark_grant

from dq_engine.data.dataset import Dataset
from dq_engine.data.domain import Attribute, Domain
from dq_engine.data.workload import Workload, random_marginals, random_queries
from dq_engine.mechanisms.dualquery import DualQueryConfig, RoundLoop
from dq_engine.oracle import BestResponseProblem, OracleConfig, problem_from_samples
from dq_engine.privacy.rng import make_rng
from dqrelease.inputs.data_home import require_shared_data_dir

ADULT_CSV = "adult_pgm/adult.csv"
ADULT_DOMAIN = "adult_pgm/adult-domain.json"
KDD_CLEAN = "kddcup99_dualquery/kdd99.clean.gz"
KDD_SCHEMA = "kddcup99_dualquery/kdd99.schema"
BMS_WEBVIEW2 = "bms_webview/BMS-WebView-2.dat"
"""Files of the shared data directory."""

RATE_BUCKETS = 10
LOG10_BUCKETS = 10
LOG2_BUCKETS = 6
WINDOW_RANGES = {"count": 512, "srv_count": 512, "dst_host_count": 256, "dst_host_srv_count": 256}
LOG10_COLUMNS = ("duration", "src_bytes", "dst_bytes")


def shared_file(relative: str) -> Path:
    """A file of the shared data directory; FileNotFoundError saying how to provide it when there is none."""
    return require_shared_data_dir() / relative


def load_adult() -> Dataset:
    """Adult as integer codes (48,842 rows, 14 attributes, 588 bits)."""
    sizes = json.loads(shared_file(ADULT_DOMAIN).read_text())
    domain = Domain.categorical(sizes)
    frame = pd.read_csv(shared_file(ADULT_CSV))
    return Dataset.from_codes(domain, frame[list(sizes)].to_numpy())


def _kdd_schema() -> list[tuple[str, list[str] | None]]:
    columns = []
    for line in shared_file(KDD_SCHEMA).read_text().splitlines():
        if not line.strip():
            continue
        head, _, tail = line.partition(":")
        name = head.split(" (")[0].strip()
        tail = tail.strip().rstrip(".")
        columns.append((name, None if tail == "continuous" else tail.split(",")))
    return columns


def _bucket(name: str, values: np.ndarray) -> tuple[np.ndarray, int]:
    if name in LOG10_COLUMNS:
        positive = np.maximum(values, 1.0)
        codes = np.where(values < 1, 0, 1 + np.floor(np.log10(positive)).astype(np.int64))
        return np.minimum(codes, LOG10_BUCKETS - 1), LOG10_BUCKETS
    if name in WINDOW_RANGES:
        width = WINDOW_RANGES[name] / RATE_BUCKETS
        return np.clip(np.floor(values / width).astype(np.int64), 0, RATE_BUCKETS - 1), RATE_BUCKETS
    if name.endswith("_rate"):
        return np.clip(np.floor(values * RATE_BUCKETS).astype(np.int64), 0, RATE_BUCKETS - 1), RATE_BUCKETS
    positive = np.maximum(values, 1.0)
    codes = np.where(values < 1, 0, 1 + np.floor(np.log2(positive)).astype(np.int64))
    return np.minimum(codes, LOG2_BUCKETS - 1), LOG2_BUCKETS


def load_kdd99(rows: int | None = None) -> Dataset:
    """KDD Cup 99 10% (494,021 rows), discretised with the public bucketing of the module docstring."""
    schema = _kdd_schema()
    frame = pd.read_csv(shared_file(KDD_CLEAN), header=None, skipinitialspace=True, nrows=rows)
    last = frame.columns[-1]
    frame[last] = pd.to_numeric(frame[last].astype(str).str.rstrip(".")).astype(np.int64)
    attributes, codes = [], []
    for (name, values), column in zip(schema, frame.columns, strict=True):
        raw = frame[column].to_numpy()
        if values is not None:
            attributes.append(Attribute(name=name, size=len(values)))
            codes.append(raw.astype(np.int64))
        else:
            bucketed, size = _bucket(name, raw.astype(np.float64))
            attributes.append(Attribute(name=name, size=size))
            codes.append(bucketed)
    return Dataset.from_codes(Domain(tuple(attributes)), np.stack(codes, axis=1))


# ---------------------------------------------------------------------- workloads and oracle instances
WORKLOAD_SEED = 20_240_601
INSTANCES = Path(__file__).parent / "results" / "instances"

DATASETS = {"adult": load_adult, "kdd99": load_kdd99}


def build_workload(dataset: Dataset, kind: str, *, seed: int = WORKLOAD_SEED) -> Workload:
    """The bench workloads: ``marginals64`` (64 random 3-way marginals) or ``queries<N>`` (N random 3-way)."""
    rng = make_rng(seed)
    if kind == "marginals64":
        return random_marginals(dataset.domain, 3, 64, rng)
    if kind.startswith("queries"):
        return random_queries(dataset.domain, 3, int(kind.removeprefix("queries")), rng)
    raise ValueError(f"unknown workload kind {kind!r}; use 'marginals64' or 'queries<N>'")


@dataclass(frozen=True, kw_only=True)
class Instance:
    """One captured best-response problem and where it came from."""

    name: str
    dataset: str
    workload: str
    samples: int
    round: int
    rounds: int
    eta: float
    problem: BestResponseProblem
    previous: np.ndarray | None

    @property
    def clauses_per_variable(self) -> float:
        """Distinct sampled clauses per touched bit (density of the instance)."""
        domain = self.problem.domain
        touched = self.problem.touched_attributes
        bits = sum(domain.attributes[a].n_bits for a in touched)
        return self.problem.n_clauses / max(1, bits)


def capture_rounds(rounds: int) -> list[int]:
    """Rounds captured per run: an early one (2), half-way and the last."""
    return sorted({min(2, rounds), max(1, rounds // 2), rounds})


def capture_instances(
    dataset_name: str, workload_kind: str, samples: int, *, eta: float, rounds: int, seed: int,
    oracle: OracleConfig, out: Path = INSTANCES, dataset: Dataset | None = None, workload: Workload | None = None,
) -> list[Path]:
    """Run DualQuery's round loop and save the best-response problem of the captured rounds.

    The oracle used while capturing (``oracle``) decides the records that shape later distributions; the
    bench uses a short local search so that capturing stays cheap.
    """
    dataset = dataset if dataset is not None else DATASETS[dataset_name]()
    workload = workload if workload is not None else build_workload(dataset, workload_kind)
    config = DualQueryConfig(eta=eta, samples=samples, rounds=rounds, oracle=oracle, track_error=False,
                             free_policy="zero")
    rng = make_rng(seed)
    loop = RoundLoop(dataset, workload, config, rng, grant=benchmark_grant(), mechanism="dualquery")
    wanted = set(capture_rounds(rounds))
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for t in range(1, rounds + 1):
        drawn = loop.distribution.sample(samples, rng)
        if t in wanted:
            problem = problem_from_samples(workload, drawn)
            name = f"{dataset_name}-{workload_kind}-s{samples}-t{t:03d}"
            path = out / f"{name}.npz"
            previous = loop.records[-1] if loop.records else np.full(len(dataset.domain), -1)
            np.savez_compressed(
                path, clause_bits=problem.clause_bits.astype(np.int32), clause_negated=problem.clause_negated,
                clause_weight=problem.clause_weight, previous=previous,
                meta=np.array(json.dumps({"name": name, "dataset": dataset_name, "workload": workload_kind,
                                          "samples": samples, "round": t, "rounds": rounds, "eta": eta})),
            )
            paths.append(path)
        loop.play(t, drawn)
    return paths


def load_instance(path: Path, domains: dict[str, Domain]) -> Instance:
    """Read an instance saved by :func:`capture_instances` (``domains`` maps dataset name to its domain)."""
    with np.load(path) as stored:
        meta = json.loads(str(stored["meta"]))
        problem = BestResponseProblem(
            domain=domains[meta["dataset"]],
            clause_bits=stored["clause_bits"].astype(np.int64),
            clause_negated=stored["clause_negated"],
            clause_weight=stored["clause_weight"],
        )
        previous = stored["previous"]
    return Instance(
        name=meta["name"], dataset=meta["dataset"], workload=meta["workload"], samples=meta["samples"],
        round=meta["round"], rounds=meta["rounds"], eta=meta["eta"], problem=problem,
        previous=None if previous.min() < 0 else previous.astype(np.int64),
    )


def load_bms_webview2() -> Dataset:
    """BMS-WebView-2 click-stream sessions as 3,340 natively binary items (77,512 rows, sparse storage).

    Items become attributes in ascending id order; the item list is read from the file (bench only; a real
    release would take it from a public catalogue).
    """
    import scipy.sparse as sp

    rows, items = [], []
    for row, line in enumerate(shared_file(BMS_WEBVIEW2).read_text().splitlines()):
        for item in line.split():
            rows.append(row)
            items.append(int(item))
    ids, columns = np.unique(np.asarray(items), return_inverse=True)
    matrix = sp.csc_array((np.ones(len(rows), dtype=bool), (np.asarray(rows), columns)),
                          shape=(max(rows) + 1, len(ids)))
    return Dataset.from_sparse(Domain.binary([f"item{i}" for i in ids]), matrix)


DATASETS["bms2"] = load_bms_webview2
