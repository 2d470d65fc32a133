"""The particles' Metropolis-Hastings moves by shard on a 2-worker Dask cluster: the local moves, on both workers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import pytest

import dq_engine.fit.particles as particles_module
from dq_engine import Dataset, Domain, make_rng, marginal_queries
from dq_engine.data.constraints import Constraints
from dq_engine.fit.mwem import mwem
from dq_engine.mechanisms.defaults import mwem_particles_config
from dq_engine.privacy.public import PublicQuantities
from tests.budgets import grant_for_tests

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.slow

SHARD = 1_000
"""Particles per shard in these tests (8,000 particles: 8 shards a sweep)."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[distributed.LocalCluster]:
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as local:
        yield local


def _table() -> tuple[Dataset, Constraints]:
    domain = Domain.categorical({"a": 4, "b": 4, "c": 3, "d": 2})
    rng = make_rng(5)
    n = 3_000
    a = rng.choice(4, size=n, p=[0.5, 0.3, 0.15, 0.05])
    b = np.where(rng.random(n) < 0.8, a, rng.integers(0, 4, size=n))
    c = rng.integers(0, 3, size=n)
    d = (a == 0).astype(np.int64)
    codes = np.stack([a, b, c, d], axis=1)
    rule = Constraints(domain=domain, combinations=(("a=0 implies d=1", ((0, (0,)), (3, (0,)))),))
    keep = rule.feasible(codes)
    return Dataset.from_codes(domain, codes[keep]), rule


def test_moves_by_shard_on_two_workers_are_the_local_moves(cluster, monkeypatch):
    """MWEM on particles (8,000 particles, a public rule every move must keep) with and without a cluster executor,
    the same seed: the same records and weights to the last bit, and every sweep's 8 shards ran on the workers,
    on both of them (read from Dask's task stream)."""
    monkeypatch.setattr(particles_module, "MOVE_SHARD_PARTICLES", SHARD)
    data, rule = _table()
    workload = marginal_queries(data.domain, [(j,) for j in range(4)] + list(itertools.combinations(range(4), 2)))
    public = PublicQuantities(n=data.n, epsilon=1.0, delta=1e-9, domain=data.domain, n_queries=len(workload),
                              n_marginals=workload.n_marginals)
    config = mwem_particles_config(public, support_size=8 * SHARD)
    assert config.support_moves == 1
    local = mwem(data, workload, config, grant=grant_for_tests(), rng=make_rng(3), constraints=rule)
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client, \
            distributed.get_task_stream(client=client) as stream:
        remote = mwem(data, workload, config, grant=grant_for_tests(), rng=make_rng(3), constraints=rule,
                      executor=client.get_executor(pure=False))
        workers = set(client.scheduler_info()["workers"])
    assert np.array_equal(local.records, remote.records)
    assert np.array_equal(local.weights, remote.weights)
    assert rule.feasible(remote.records).all()
    ran_on = [task["worker"] for task in stream.data if task["key"].startswith("move_shard")]
    assert len(ran_on) == 8 * config.rounds
    assert set(ran_on) == workers and len(workers) == 2
