"""Abuse corpus, ``dqrelease verify``: tampered outputs, tampered manifests, changed data, config, schema and seed.

One seeded release of the standard table is made per module; each case breaks one file, runs ``verify`` and
restores the file. A published file that differs from its manifest exits 5; a replay whose inputs differ from
the manifest is refused before the data is read (exit 6); an unseeded release is checked by its files and ledger
charges (exit 0).
Every case leaves the ledger and the files under ``out/`` exactly as they were, and leaks no canary.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.budgets import describe_another_release
from tests.robustness.abuse_harness import (
    Workspace,
    base_config,
    expect_refusal,
    ledger_state,
    make_workspace,
    run_cli,
    toml_text,
)

pytestmark = pytest.mark.usefixtures("prefect_harness")


@dataclass
class Published:
    ws: Workspace
    release: Path
    manifest: Path


def _publish(root: Path, *, seeded: bool = True) -> Published:
    ws = make_workspace(root)
    if not seeded:
        config = base_config()
        config["run"] = {"seed_mode": "secure"}
        ws.config.write_text(toml_text(config))
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    assert outcome.exit_code == 0, outcome.stderr
    [release] = ws.releases()
    return Published(ws=ws, release=release, manifest=ws.out / "internal" / release.name / "manifest.json")


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory, prefect_harness) -> Published:
    return _publish(tmp_path_factory.mktemp("verify") / "ws")


@pytest.fixture()
def pristine(published: Published) -> Iterator[Published]:
    """The release; every file of the workspace is restored after the case."""
    backup = published.ws.root.parent / "backup"
    shutil.copytree(published.ws.root, backup, symlinks=True)
    try:
        yield published
    finally:
        shutil.rmtree(published.ws.root)
        shutil.move(backup, published.ws.root)


Tamper = Callable[[Published], None]


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _edit_manifest(change: Callable[[dict], None]) -> Tamper:
    def tamper(p: Published) -> None:
        record = json.loads(p.manifest.read_text())
        change(record)
        p.manifest.write_text(json.dumps(record, indent=2))

    return tamper


def _output_hash(record: dict) -> None:
    record["outputs"]["csv"]["sha256"] = "0" * 64


def _config_hash(record: dict) -> None:
    record["config_sha256"] = "f" * 64


def _packages(record: dict) -> None:
    record["packages"] = {**record["packages"], "numpy": "0.0.1"}


def _change_data(p: Published) -> None:
    lines = p.ws.data.read_text().splitlines()
    lines[3] = lines[3].replace("north", "south").replace("east", "north")
    p.ws.data.write_text("\n".join(lines) + "\n")


def _change_config(p: Published) -> None:
    p.ws.config.write_text(p.ws.config.read_text().replace('"rounds" = 3', '"rounds" = 4'))


def _change_schema(p: Published) -> None:
    p.ws.schema.write_text(p.ws.schema.read_text().replace('"east"', '"west"'))


def _remove_seed(p: Published) -> None:
    (p.manifest.parent / "seed").unlink()


def _describe_epsilon_8(p: Published) -> None:
    """The manifest rewritten to describe an ε = 8 release: a new config file, its hash and its plan together."""
    edited = p.ws.root / "release-eps8.toml"
    edited.write_text(p.ws.config.read_text().replace('"epsilon" = 1.0', '"epsilon" = 8.0'))
    describe_another_release(p.manifest, edited)


def _delete_output(p: Published) -> None:
    (p.release / "synthetic.parquet").unlink()


VERIFY_CASES = [
    pytest.param(lambda p: _flip_byte(p.release / "synthetic.csv"), 5, r"csv", r"does not match|restore|re-?publish",
                 id="tampered-output-byte"),
    pytest.param(_delete_output, 5, r"parquet", r"does not match|missing|restore", id="deleted-output"),
    pytest.param(_edit_manifest(_output_hash), 5, r"csv", r"does not match", id="tampered-manifest-output-hash"),
    pytest.param(_edit_manifest(_config_hash), 6, r"config", r"differ|changed|restore",
                 id="tampered-manifest-config-hash"),
    pytest.param(_edit_manifest(_packages), 6, r"numpy", r"differ|install|version", id="tampered-manifest-packages"),
    pytest.param(lambda p: p.manifest.write_text("{ not json"), 6, r"not a JSON manifest", r"give|internal/",
                 id="manifest-not-json"),
    pytest.param(_change_data, 6, r"data\.csv", r"differ|changed|restore", id="changed-data"),
    pytest.param(_change_config, 6, r"config", r"differ|changed|restore", id="changed-config"),
    pytest.param(_change_schema, 6, r"schema", r"differ|changed|restore", id="changed-schema"),
    pytest.param(_remove_seed, 6, r"seed file", r"restore|restricted|check", id="seed-file-removed"),
    pytest.param(_describe_epsilon_8, 6, r"ledger .*ledger\.duckdb holds no charge of run .*mwem at epsilon=[78]",
                 r"unedited manifest", id="manifest-rewritten-to-epsilon-8"),
]


@pytest.mark.parametrize(("tamper", "code", "problem", "fix"), VERIFY_CASES)
def test_verify_refuses_what_does_not_match(pristine: Published, tamper: Tamper, code: int, problem: str, fix: str):
    ws = pristine.ws
    tamper(pristine)
    before = ledger_state(ws.ledger)
    outputs = ws.output_files()
    outcome = run_cli(ws, "verify", str(pristine.manifest))
    expect_refusal(ws, outcome, code=code, problem=problem, fix=fix, ledger_before=before, outputs_before=outputs)


def test_verify_of_the_public_release_json_is_refused(pristine: Published):
    ws = pristine.ws
    before, outputs = ledger_state(ws.ledger), ws.output_files()
    outcome = run_cli(ws, "verify", str(pristine.release / "release.json"))
    expect_refusal(ws, outcome, code=6, problem=r"release\.json", fix=r"manifest\.json|internal/",
                   ledger_before=before, outputs_before=outputs)


def test_verify_of_an_untouched_release_reproduces_it_uncharged(pristine: Published):
    ws = pristine.ws
    before, outputs = ledger_state(ws.ledger), ws.output_files()
    outcome = run_cli(ws, "verify", str(pristine.manifest))
    assert outcome.exit_code == 0, outcome.stderr
    assert "verified" in outcome.stdout
    assert ledger_state(ws.ledger) == before
    assert ws.output_files() == outputs
    from tests.robustness.abuse_harness import assert_no_leaks

    assert_no_leaks(ws, outcome)


def test_verify_of_an_unseeded_release_checks_its_files_and_charges_and_exits_0(tmp_path: Path):
    unseeded = _publish(tmp_path / "ws", seeded=False)
    ws = unseeded.ws
    before, outputs = ledger_state(ws.ledger), ws.output_files()
    outcome = run_cli(ws, "verify", str(unseeded.manifest))
    assert outcome.exit_code == 0, outcome.stderr
    assert "hashes and provenance were checked" in outcome.stdout
    assert "a byte-for-byte replay needs a seeded release" in outcome.stdout
    assert ledger_state(ws.ledger) == before
    assert ws.output_files() == outputs
