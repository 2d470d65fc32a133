"""FEM's oracle calls on a Dask cluster: the same output as serial and process-pool runs with the same seed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from distributed import LocalCluster

from dq_engine import Dataset, Domain, FEMConfig, fem, make_rng, random_marginals
from dqrelease.flows.release import release, run_release
from dqrelease.runtime.cluster import dask_executor
from tests.adult_slice import write_slice
from tests.budgets import grant_for_tests
from tests.pipeline.test_mechanisms_pipeline import SMALL_COLUMNS, _schema_text, _write

pytestmark = pytest.mark.slow


def test_fem_output_is_identical_serial_in_a_process_pool_and_on_a_dask_cluster():
    domain = Domain.categorical({"a": 6, "b": 5, "c": 2, "d": 2, "e": 4})
    data = Dataset.from_codes(domain, make_rng(1).integers(0, domain.sizes, size=(300, len(domain))))
    workload = random_marginals(domain, 2, 4, make_rng(2))
    config = FEMConfig(epsilon_0=0.1, noise_scale=1.0, samples=4, rounds=3, delta=1e-6, track_error=False)

    serial = fem(data, workload, config, grant=grant_for_tests(), rng=make_rng(11))
    pooled = fem(data, workload, replace(config, workers=2), grant=grant_for_tests(), rng=make_rng(11))
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        dask_executor(cluster.scheduler_address) as executor,
    ):
        on_dask = fem(data, workload, config, grant=grant_for_tests(), rng=make_rng(11), executor=executor)

    assert [r.parameters["oracle_pool"] for r in (serial, pooled, on_dask)] == ["serial", "processes", "executor"]
    np.testing.assert_array_equal(serial.records, pooled.records)
    np.testing.assert_array_equal(serial.records, on_dask.records)


@pytest.mark.usefixtures("prefect_harness")
def test_fem_release_on_dask_runs_its_oracle_calls_there_and_reproduces_the_bytes(tmp_path: Path):
    write_slice(tmp_path)
    (tmp_path / "schema.toml").write_text(_schema_text(SMALL_COLUMNS))
    config = _write(tmp_path, "fem")
    # the same seed twice on one dataset is refused by the ledger: the second run charges a ledger of its own
    on_own_ledger = tmp_path / "fem-dask.toml"
    on_own_ledger.write_text(config.read_text().replace('path = "ledger.duckdb"', 'path = "ledger-dask.duckdb"'))

    alone = release(str(config), output_directory=str(tmp_path / "alone"), seeded_test_or_audit=True)
    on_dask = run_release(str(on_own_ledger), dask_address="local:2", output_directory=str(tmp_path / "dask"),
                          seeded_test_or_audit=True)

    assert on_dask["outputs"]["parquet"]["sha256"] == alone["outputs"]["parquet"]["sha256"]
    assert on_dask["outputs"]["csv"]["sha256"] == alone["outputs"]["csv"]["sha256"]
    pools = [json.loads((Path(s["internal"]) / "error_report.json").read_text())["parameters"]["oracle_pool"]
             for s in (alone, on_dask)]
    assert pools == ["serial", "executor"]
