"""How a run reaches its Dask cluster: TLS to another machine, plain TCP only on this one or when the operator opts in,
and a missing ``dask`` extra named with its install command (:class:`dqrelease.runtime.cluster.DaskAccess`).

Every refusal comes before anything is read or charged: the ``ingest_calls`` spy (``tests/conftest.py``) sees no
ingest and the ledger file is never created. A real TLS cluster (a ``LocalCluster`` with ``protocol="tls"`` and one
worker, its certificate authority, certificate and key written as PEM files) checks that the configured files reach
it and that other files do not.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from distributed import Client, LocalCluster
from distributed.security import Security
from typer.testing import CliRunner

import dqrelease.cli.release as cli_release
import dqrelease.runtime.cluster as cluster
from dqrelease.cli import app
from dqrelease.errors import ConfigInvalidError, ExitCode
from dqrelease.flows.release import run_release
from dqrelease.inputs.config import load_config
from dqrelease.runtime.cluster import DASK_EXTRA, DaskAccess, dask_scheduler
from tests.adult_slice import release_config, write_slice

REMOTE = "tcp://192.0.2.1:8786"
"""A plain-TCP scheduler on another machine (TEST-NET-1: documentation addresses, never routed)."""

SECURE = 'seed_mode = "secure"'


@dataclass(frozen=True)
class Pems:
    """PEM files as ``[run.dask_tls]`` names them."""

    ca_file: Path
    cert_file: Path
    key_file: Path | None


def _workspace(tmp_path: Path, run: str = SECURE) -> Path:
    write_slice(tmp_path)
    config = tmp_path / "release.toml"
    config.write_text(release_config(run=run))
    return config


def _cli(*args: str):
    return CliRunner().invoke(app, ["run", *args])


def _write_pems(security: Security, folder: Path) -> Pems:
    """The certificate authority, certificate and key of ``security`` (held in memory) as three PEM files."""
    folder.mkdir()
    files = Pems(ca_file=folder / "ca.pem", cert_file=folder / "cert.pem", key_file=folder / "key.pem")
    files.ca_file.write_text(security.tls_ca_file)
    files.cert_file.write_text(security.tls_client_cert)
    files.key_file.write_text(security.tls_client_key)
    return files


@pytest.mark.parametrize("where", ["flag", "config"])
def test_a_plain_tcp_scheduler_on_another_machine_is_refused_before_anything_is_read(
    tmp_path: Path, ingest_calls: list[str], where: str
):
    if where == "flag":
        result = _cli(str(_workspace(tmp_path)), "--dask", REMOTE)
    else:
        result = _cli(str(_workspace(tmp_path, f'{SECURE}\ndask_address = "{REMOTE}"')))

    assert result.exit_code == ExitCode.INVALID_CONFIG, result.output
    [line] = result.output.splitlines()
    assert line.startswith(f"error: Dask scheduler {REMOTE} is on another machine over plain tcp://")
    assert "use a tls:// address with certificate files in [run.dask_tls]" in line
    assert "or opt in with --dask-insecure (run.dask_insecure = true)" in line
    assert line.endswith("nothing was read or charged")
    assert ingest_calls == []
    assert not (tmp_path / "ledger.duckdb").exists()


@pytest.mark.parametrize(
    "address",
    ["tcp://10.1.2.3:8786", "tcp://scheduler.example.org:8786", "tcp://[2001:db8::1]:8786", "tcp://0.0.0.0:8786",
     "tcp://127.0.0.1.example.org:8786", "ws://10.1.2.3:8786"],
)
def test_plain_addresses_off_this_machine_need_the_opt_in(address: str):
    with pytest.raises(ConfigInvalidError, match=r"is on another machine over plain .*--dask-insecure"):
        DaskAccess(address=address).check()
    DaskAccess(address=address, insecure=True).check()


@pytest.mark.parametrize(
    "address",
    ["local", "local:3", "tcp://127.0.0.1:8786", "tcp://127.9.8.7:1", "tcp://[::1]:8786", "tcp://localhost:8786",
     "tcp://LocalHost:8786"],
)
def test_local_clusters_and_loopback_addresses_need_no_opt_in(address: str):
    DaskAccess(address=address).check()


def test_the_cli_flag_lets_a_plain_address_past_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    calls = []

    def run_release(config: Path, **options: object) -> dict:
        calls.append(options)
        raise ConfigInvalidError("stopped where the run would start Prefect")

    monkeypatch.setattr(cli_release, "_run_release", run_release)

    result = _cli(str(_workspace(tmp_path)), "--dask", REMOTE, "--dask-insecure")

    assert result.output.splitlines()[-1] == "error: stopped where the run would start Prefect"
    assert [(c["dask"], c["dask_insecure"]) for c in calls] == [(REMOTE, True)]


@pytest.mark.parametrize("where", ["argument", "config"])
def test_with_the_opt_in_an_unreachable_scheduler_fails_on_its_own_line(
    tmp_path: Path, ingest_calls: list[str], monkeypatch: pytest.MonkeyPatch, where: str
):
    # the real reachability check, with a shorter wait than the run's 5 s
    monkeypatch.setattr(cluster, "check_scheduler", functools.partial(cluster.check_scheduler, timeout=0.5))
    if where == "argument":
        config, options = _workspace(tmp_path), {"dask_address": REMOTE, "dask_insecure": True}
    else:
        config, options = _workspace(tmp_path, f'{SECURE}\ndask_address = "{REMOTE}"\ndask_insecure = true'), {}

    with pytest.raises(ConfigInvalidError) as refusal:
        run_release(str(config), **options)

    assert str(refusal.value).startswith(f"Dask scheduler {REMOTE} did not answer within 0.5 s")
    assert "\n" not in str(refusal.value)
    assert ingest_calls == []
    assert not (tmp_path / "ledger.duckdb").exists()


def test_dask_without_the_extra_is_one_line_naming_the_install_command(
    tmp_path: Path, ingest_calls: list[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setitem(sys.modules, "prefect_dask", None)  # as if the dask extra were not installed

    result = _cli(str(_workspace(tmp_path)), "--dask", "local:2")

    assert result.exit_code == ExitCode.INVALID_CONFIG, result.output
    [line] = result.output.splitlines()
    assert line.startswith("error: a Dask run needs the dask extra (prefect_dask is not installed)")
    assert DASK_EXTRA in line
    assert DASK_EXTRA == 'pip install -e ".[dask]"'
    assert ingest_calls == []
    assert not (tmp_path / "ledger.duckdb").exists()


def test_a_missing_certificate_file_is_refused_before_anything_is_read(tmp_path: Path, ingest_calls: list[str]):
    run = f'{SECURE}\ndask_address = "tls://192.0.2.1:8786"\n[run.dask_tls]\nca_file = "tls/ca.pem"\n'
    run += 'cert_file = "x.pem"'
    (tmp_path / "x.pem").write_text("not read before the ca file is found\n")

    result = _cli(str(_workspace(tmp_path, run)))

    assert result.exit_code == ExitCode.INVALID_CONFIG, result.output
    [line] = result.output.splitlines()
    assert line.startswith(f"error: run.dask_tls.ca_file {tmp_path / 'tls' / 'ca.pem'} does not exist")
    assert ingest_calls == []
    assert not (tmp_path / "ledger.duckdb").exists()


def test_tls_needs_its_files_and_the_files_need_tls(tmp_path: Path):
    files = _write_pems(Security.temporary(), tmp_path / "tls")
    with pytest.raises(ConfigInvalidError, match=r"is a TLS address but the config has no \[run\.dask_tls\]"):
        DaskAccess(address="tls://192.0.2.1:8786").check()
    with pytest.raises(ConfigInvalidError, match=r"\[run\.dask_tls\] is set but .* is not a tls:// address"):
        DaskAccess(address="tcp://127.0.0.1:8786", tls=files).check()
    assert DaskAccess(address="local:2", tls=files).security() is None  # a local cluster never leaves the machine
    files.key_file.write_text("not a key\n")
    with pytest.raises(ConfigInvalidError, match=r"the files of \[run\.dask_tls\] cannot be used for TLS"):
        DaskAccess(address="tls://192.0.2.1:8786", tls=files).security()


def test_tls_files_are_relative_to_the_config(tmp_path: Path):
    run = f'{SECURE}\n[run.dask_tls]\nca_file = "tls/ca.pem"\ncert_file = "tls/both.pem"'
    access = load_config(_workspace(tmp_path, run)).run.dask_access("tls://192.0.2.1:8786")

    assert access.tls.ca_file == tmp_path / "tls" / "ca.pem"
    assert access.tls.cert_file == tmp_path / "tls" / "both.pem"
    assert access.tls.key_file is None  # the key is in the certificate file


def test_a_tls_cluster_is_reached_with_the_configured_files_and_refuses_others(tmp_path: Path):
    cluster_security = Security.temporary()
    files = _write_pems(cluster_security, tmp_path / "tls")
    strangers = _write_pems(Security.temporary(), tmp_path / "other-authority")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tls",
                      security=cluster_security, dashboard_address=":0") as tls_cluster:
        address = tls_cluster.scheduler_address
        assert address.startswith("tls://127.0.0.1:")

        with dask_scheduler(DaskAccess(address=address, tls=files)) as scheduler:
            assert scheduler.security.require_encryption
            assert scheduler.security.tls_ca_file == str(files.ca_file)
            runner = scheduler.task_runner()
            assert runner.address == address
            assert runner.client_kwargs["security"] is scheduler.security
            with Client(address, set_as_default=False, **scheduler.client_kwargs()) as client:
                assert client.submit(sum, [1, 2]).result() == 3

        with (pytest.raises(ConfigInvalidError, match=r"and the certificates of .* do not trust each other"),
              dask_scheduler(DaskAccess(address=address, tls=strangers))):
            pass
        with (pytest.raises(ConfigInvalidError, match=r"no \[run\.dask_tls\]"),
              dask_scheduler(DaskAccess(address=address))):
            pass
