"""Releases on a local 2-worker Dask cluster (prefect-dask) give the same bytes as on one machine."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest
from distributed import get_task_stream

import dqrelease.outputs.published_rows
import dqrelease.runtime.chunks as chunks_module
import dqrelease.tasks.outputs
import dqrelease.tasks.prepare
from dqrelease.errors import ConfigInvalidError
from dqrelease.flows.release import release, release_many, run_release
from dqrelease.ledger import Ledger
from dqrelease.runtime.cluster import DaskAccess, dask_scheduler, local_worker_count
from tests.adult_slice import release_config, write_slice

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    write_slice(tmp_path)
    (tmp_path / "release.toml").write_text(release_config(rounds="rounds = 6"))
    return tmp_path


def test_dask_release_reproduces_the_single_machine_bytes(workspace: Path, monkeypatch):
    """Validation and discretization (1,500 rows: 6 chunks) and publishing (400 rows, uniform numbers: 7 chunks) run
    by chunk on both workers (where each chunk ran is read from Dask's task stream); the bytes are the local run's."""
    monkeypatch.setattr(chunks_module, "READ_CHUNK_ROWS", 256)
    monkeypatch.setattr(dqrelease.outputs.published_rows, "PUBLISH_CHUNK_ROWS", 64)
    streams: list[list[dict]] = []
    opened = chunks_module.cluster_chunks

    @contextmanager
    def recorded(address: str | None):
        with opened(address) as workers:
            if workers is None:
                yield None
                return
            with get_task_stream(client=workers.client) as stream:
                yield workers
            streams.append(stream.data)

    for module in (dqrelease.tasks.prepare, dqrelease.tasks.outputs):
        monkeypatch.setattr(module, "cluster_chunks", recorded)
    config = str(workspace / "release.toml")
    # the same seed twice on one dataset is refused by the ledger: the second run charges a ledger of its own
    (workspace / "dask.toml").write_text(release_config(rounds="rounds = 6", ledger="ledger-dask.duckdb"))
    alone = release(config, output_directory=str(workspace / "alone"), seeded_test_or_audit=True)
    assert streams == []  # no cluster: every chunk ran here
    on_dask = run_release(str(workspace / "dask.toml"), dask_address="local:2",
                          output_directory=str(workspace / "dask"), seeded_test_or_audit=True)
    assert on_dask["outputs"]["parquet"]["sha256"] == alone["outputs"]["parquet"]["sha256"]
    assert on_dask["outputs"]["csv"]["sha256"] == alone["outputs"]["csv"]["sha256"]
    assert on_dask["outputs"]["duckdb"]["content_sha256"] == alone["outputs"]["duckdb"]["content_sha256"]
    for ledger in ("ledger.duckdb", "ledger-dask.duckdb"):
        [entry] = Ledger(workspace / ledger).show("adult-slice")
        assert len(entry["charges"]) == 1
    functions = ["_grouped_chunk", "_coded_chunk", "_render_piece"]  # validate, discretize, publish
    ran_on = [[task["worker"] for task in stream if task["key"].startswith(function)]
              for stream, function in zip(streams, functions, strict=True)]
    assert [len(where) for where in ran_on] == [6, 6, 7]
    assert all(len(set(where)) == 2 for where in ran_on)


def test_release_many_fans_out_one_ledger_entry_per_release(workspace: Path):
    configs = []
    for name in ("men", "women"):
        text = release_config(rounds="rounds = 5")
        text = text.replace('dataset_id = "adult-slice"', f'dataset_id = "{name}"')
        text = text.replace('name = "adult-test"', f'name = "adult-{name}"')
        path = workspace / f"{name}.toml"
        path.write_text(text)
        configs.append(str(path))
    with dask_scheduler(DaskAccess(address="local:2")) as scheduler:
        summaries = release_many.with_options(task_runner=scheduler.task_runner())(
            configs, dask_address=scheduler.address, seeded_test_or_audit=True
        )
    assert [s["run_id"].split("-2")[0] for s in summaries] == ["adult-men", "adult-women"]
    ledger = Ledger(workspace / "ledger.duckdb")
    for name in ("men", "women"):
        [entry] = ledger.show(name)
        assert len(entry["charges"]) == 1
    for summary in summaries:
        assert (Path(summary["release"]) / "synthetic.parquet").exists()


@pytest.mark.parametrize(
    ("address", "message"),
    [("local:0", "local:N with N >= 1"), ("scheduler:8786", "must be 'local', 'local:N' or a URL")],
)
def test_bad_dask_address_is_a_config_error(address: str, message: str):
    with pytest.raises(ConfigInvalidError, match=message):
        local_worker_count(address)
