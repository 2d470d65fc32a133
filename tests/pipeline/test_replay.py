"""The budget cannot be bypassed: no charge switch, no uncharged mechanism task, and replays that check first.

Each test tries one way around the ledger and shows it is impossible (no such parameter), refused (with its exit
code, before the ingest ever ran, with the ledger file untouched and nothing published), or, for an honest
replay, that it reproduces the release without writing to the ledger or publishing anything.

One small seeded release (300 rows, 4 columns, DualQuery with the local oracle) is made per module; tests that
tamper with its files restore them afterwards (:func:`pristine`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from typer.testing import CliRunner

from dqrelease.cli import app
from dqrelease.errors import ExitCode, ReplayRefusedError, UnchargedRunError
from dqrelease.ledger import Ledger
from tests.budgets import describe_another_release, grant_for_tests

pytestmark = pytest.mark.usefixtures("prefect_harness")

ROWS = 300
SEED = 12345
SCHEMA = """
[[columns]]
name = "colour"
type = "categorical"
values = ["red", "blue", "green"]

[[columns]]
name = "size"
type = "integer"
edges = [0, 25, 50, 75, 100]

[[columns]]
name = "flag"
type = "binary"

[[columns]]
name = "group"
type = "categorical"
values = ["a", "b"]
"""


def _config(*, seeded: bool = True, noisy: bool = False) -> str:
    privacy = 'n = "noisy"\nneighbouring = "add-remove"\nn_epsilon = 0.2' if noisy else f"n = {ROWS}"
    run = f'seed_mode = "seeded"\nseed = {SEED}' if seeded else 'seed_mode = "secure"'
    return f"""
name = "replay-test"
schema_file = "schema.toml"

[source]
format = "csv"
paths = ["people.csv"]

[privacy]
{privacy}
epsilon = 2.0
delta = 1e-6

[workload]
kind = "all_kway"
k = 2

[mechanism]
name = "dualquery"
eta = 1.0
samples = 20

[mechanism.oracle]
kind = "local"

# a test table is small: the default accuracy target (worst one-way cell 0.05) needs about 5,000 rows at epsilon 1
[accuracy]
worst_one_way_cell = 1.0

[ledger]
path = "ledger.duckdb"
dataset_id = "people"
initial_cap_epsilon = 20.0
initial_cap_delta = 1e-4

[output]
directory = "out"

[run]
{run}
"""


def _run(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def _make_release(root: Path, **options: bool) -> SimpleNamespace:
    """Write the tiny table, schema and config into ``root``, run the release, return its paths."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    lines = ["colour,size,flag,group"] + [
        f"{rng.choice(['red', 'blue', 'green'])},{rng.integers(0, 100)},{rng.integers(0, 2)},{rng.choice(['a', 'b'])}"
        for _ in range(ROWS)
    ]
    (root / "people.csv").write_text("\n".join(lines) + "\n")
    (root / "schema.toml").write_text(SCHEMA)
    (root / "release.toml").write_text(_config(**options))
    # 300 rows with a noisy n: the forecast says the table is no better than zeros; the replay is what is tested here
    accept = ["--accept-low-utility"] if options.get("noisy") else []
    result = _run("run", str(root / "release.toml"), "--quiet", "--seeded-test-or-audit", *accept)
    assert result.exit_code == ExitCode.OK, result.output
    [release] = sorted((root / "out" / "releases").iterdir())
    return SimpleNamespace(
        root=root, config=root / "release.toml", release=release,
        manifest=root / "out" / "internal" / release.name / "manifest.json",
    )


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """A seeded release with a public n."""
    return _make_release(tmp_path_factory.mktemp("seeded"))


@pytest.fixture()
def pristine(seeded: SimpleNamespace):
    """The seeded release; files the test changes, deletes or adds under its folder are restored afterwards."""
    saved = {path: (path.read_bytes(), path.stat().st_mode) for path in seeded.root.rglob("*") if path.is_file()}
    yield seeded
    for path in seeded.root.rglob("*"):
        if path.is_file() and path not in saved:
            path.unlink()
    for path, (data, mode) in saved.items():
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
            path.chmod(mode)


def _ledger_state(root: Path) -> tuple[str, int, list[dict]]:
    """The ledger file's bytes (hash), modification time and charges: any write changes one of them."""
    path = root / "ledger.duckdb"
    charges = [charge for budget in Ledger(path).show("people") for charge in budget["charges"]]
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns, charges


def _outputs_state(root: Path) -> dict[str, list[str]]:
    """Everything under releases/, internal/ and .staging/ (names only)."""
    out = root / "out"
    return {
        part: sorted(str(p.relative_to(out)) for p in (out / part).rglob("*")) if (out / part).exists() else []
        for part in ("releases", "internal", ".staging")
    }


def _edit_json(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record, indent=2))


def _in_flow(task, *args):
    """Call a Prefect task the way the flows do: inside a flow run."""
    from prefect import flow

    @flow(persist_result=False, validate_parameters=False)
    def caller():
        return task(*args)

    return caller()


def _stderr_line(result) -> str:
    """The refusal as one string, checked to come without a traceback (not even Prefect's run log)."""
    assert "Traceback" not in result.output
    return " ".join(result.stderr.split())


# ---------------------------------------------------------------------- no switch, no injected plan or seed
@pytest.mark.parametrize(
    ("entry", "options"),
    [
        ("release", {"charge": False}),
        ("release", {"seed": SEED}),
        ("release", {"plan": "crafted"}),
        ("run_release", {"charge": False}),
        ("run_release", {"seed": SEED}),
        ("release_many", {"charge": False}),
    ],
)
def test_public_flows_have_no_charge_switch_seed_or_plan(
    tmp_path: Path, ingest_calls: list[str], entry: str, options: dict
):
    import inspect

    import dqrelease.flows.release as flows

    function = getattr(flows, entry)
    parameters = inspect.signature(getattr(function, "fn", function)).parameters
    assert not {"charge", "seed", "plan"} & set(parameters)
    (tmp_path / "people.csv").write_text("colour,size,flag,group\nred,1,0,a\n")
    (tmp_path / "schema.toml").write_text(SCHEMA)
    (tmp_path / "release.toml").write_text(_config().replace(f"n = {ROWS}", "n = 1"))
    target = str(tmp_path / "release.toml")
    with pytest.raises(TypeError):
        function([target] if entry == "release_many" else target, **options)
    assert ingest_calls == []
    assert not (tmp_path / "ledger.duckdb").exists() and not (tmp_path / "out").exists()


# ---------------------------------------------------------------------- the mechanism task needs a grant
@pytest.fixture()
def planned(seeded: SimpleNamespace, tmp_path: Path) -> SimpleNamespace:
    """The seeded release's config pointed at a fresh ledger, its workload and honest plan, and dummy data."""
    from dq_engine import Dataset
    from dqrelease.inputs.config import LedgerConfig, load_config
    from dqrelease.inputs.encoding import domain_from_columns
    from dqrelease.inputs.schema import load_schema
    from dqrelease.plan import build_workload, plan_release

    loaded = load_config(seeded.config)
    config = loaded.model_copy(update={"ledger": LedgerConfig(path=tmp_path / "ledger.duckdb", dataset_id="people")})
    Ledger(config.ledger.path).set_cap("people", epsilon=100, delta=0.01)
    schema = load_schema(config.schema_file)
    domain = domain_from_columns(schema.columns)
    workload = build_workload(config.workload, domain)
    plan = plan_release(config, n=ROWS, workload=workload)
    data = Dataset.from_codes(domain, np.zeros((ROWS, len(domain)), dtype=np.int64))
    return SimpleNamespace(config=config, workload=workload, plan=plan, data=data)


def _charge(config, plan, run_id: str) -> dict:
    from dqrelease.inputs.config import config_hash
    from dqrelease.plan import ledger_amounts

    epsilon, delta, rho = ledger_amounts(plan)  # what the pipeline's charge task charges for this plan
    return Ledger(config.ledger.path).charge(
        "people", epsilon=epsilon, delta=delta, rho=rho, mode=plan.mode, mechanism=plan.mechanism,
        config_hash=config_hash(config), run_id=run_id,
    ).as_dict()


def test_mechanism_task_refuses_a_bare_plan(planned: SimpleNamespace, mechanism_calls: list[str]):
    from dqrelease.tasks.synthesize import synthesize

    rng = np.random.default_rng(0)
    with pytest.raises(UnchargedRunError, match="needs a MechanismGrant, not ReleasePlan"):
        _in_flow(synthesize, planned.plan, planned.data, planned.workload, rng)
    with pytest.raises(UnchargedRunError, match="needs a MechanismGrant"):
        synthesize.fn(planned.plan, planned.data, planned.workload, rng)
    assert mechanism_calls == []


def test_a_grant_cannot_be_made_by_hand(planned: SimpleNamespace):
    from dqrelease.ledger.grants import MechanismGrant

    with pytest.raises(UnchargedRunError, match="issued only by"):
        MechanismGrant(plan=planned.plan, run_id="r1", basis="ledger charge", reference="people#1",
                       privacy=grant_for_tests(), _issuer=object())


def test_grant_after_charge_needs_the_charge_in_the_ledger(planned: SimpleNamespace, mechanism_calls: list[str]):
    from dqrelease.ledger.grants import grant_after_charge
    from dqrelease.tasks.synthesize import synthesize

    config, plan, workload = planned.config, planned.plan, planned.workload
    receipt = _charge(config, plan, "run-honest")
    grant = grant_after_charge(config=config, plan=plan, workload=workload, receipt=receipt, run_id="run-honest")
    assert (grant.basis, grant.reference, grant.plan) == ("ledger charge", "people#1", plan)

    forged = {**receipt, "run_id": "run-forged", "seq": 2}  # a receipt the ledger never issued
    with pytest.raises(UnchargedRunError, match="holds no charge of run run-forged"):
        grant_after_charge(config=config, plan=plan, workload=workload, receipt=forged, run_id="run-forged")
    with pytest.raises(UnchargedRunError, match="another run"):  # someone else's receipt
        grant_after_charge(config=config, plan=plan, workload=workload, receipt=receipt, run_id="run-other")
    _in_flow(synthesize, grant, planned.data, workload, np.random.default_rng(0))  # the honest grant runs
    assert mechanism_calls == ["mechanism"]


def test_grant_after_charge_refuses_a_crafted_plan(planned: SimpleNamespace):
    from dqrelease.ledger.grants import grant_after_charge

    config, plan, workload = planned.config, planned.plan, planned.workload
    cheap = dataclasses.replace(
        plan, costs={**plan.costs, plan.mode: dataclasses.replace(plan.charged, epsilon=plan.charged.epsilon / 100)}
    )
    longer = dataclasses.replace(plan, parameters={**plan.parameters, "rounds": plan.parameters["rounds"] * 10})
    other_n = dataclasses.replace(plan, n=ROWS * 10)
    for run_id, crafted, message in (
        ("run-cheap", cheap, "not the one the config gives"),
        ("run-longer", longer, "not the one the config gives"),
        ("run-n", other_n, "declared privacy.n"),
    ):
        receipt = _charge(config, crafted, run_id)  # the crafted cost is really charged, and still refused
        with pytest.raises(UnchargedRunError, match=message):
            grant_after_charge(config=config, plan=crafted, workload=workload, receipt=receipt, run_id=run_id)


def test_replay_objects_cannot_be_made_by_hand(planned: SimpleNamespace, mechanism_calls: list[str]):
    from dqrelease.outputs.replay import ReplayTarget
    from dqrelease.tasks.privacy import replay_count

    with pytest.raises(ReplayRefusedError, match=r"made only by dqrelease\.outputs\.replay\.prepare_replay"):
        ReplayTarget(
            manifest_path=Path("m.json"), run_id="r", config=planned.config, schema=None, seed=1, recorded_plan={},
            input_sha256={}, outputs={}, _issuer=object(),
        )
    with pytest.raises(UnchargedRunError, match="only a replay's"):
        replay_count.fn(SimpleNamespace(config=planned.config), planned.data, np.random.default_rng(0))


def test_grant_for_replay_needs_the_recorded_plan(pristine: SimpleNamespace, planned: SimpleNamespace):
    from dqrelease.ledger.grants import grant_for_replay
    from dqrelease.outputs.replay import prepare_replay
    from dqrelease.plan import plan_release

    target = prepare_replay(pristine.manifest)
    recorded = plan_release(target.config, n=ROWS, workload=planned.workload)
    assert grant_for_replay(target=target, plan=recorded, run_id="replay").basis == "replay"
    other = plan_release(target.config, n=ROWS - 1, workload=planned.workload)
    with pytest.raises(ReplayRefusedError, match="differs from the one the manifest recorded"):
        grant_for_replay(target=target, plan=other, run_id="replay")
    with pytest.raises(UnchargedRunError, match="needs the ReplayTarget"):
        grant_for_replay(target=SimpleNamespace(recorded_plan=recorded.as_dict()), plan=recorded, run_id="replay")


# ---------------------------------------------------------------------- verify: an honest replay
def test_verify_reproduces_the_release_and_writes_nothing(
    pristine: SimpleNamespace, ingest_calls: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    import dqrelease.flows.release as flows

    scratch_parent = tmp_path / "tmp"
    scratch_parent.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch_parent))
    scratches: list[Path] = []
    original_new_run = flows.new_run

    def spy_new_run(config, *, output=None):
        scratches.append(Path(output))
        return original_new_run(config, output=output)

    monkeypatch.setattr(flows, "new_run", spy_new_run)
    ledger, outputs = _ledger_state(pristine.root), _outputs_state(pristine.root)

    result = _run("verify", str(pristine.manifest))
    assert result.exit_code == ExitCode.OK, result.output
    stdout = " ".join(result.stdout.split())  # the console wraps long lines at the terminal width
    assert "published files match the manifest: parquet, csv, duckdb" in stdout
    assert "verified: parquet, csv, duckdb reproduced byte for byte by a replay (nothing charged" in stdout
    assert ingest_calls == ["ingest"]  # the replay really read the data ...
    assert _ledger_state(pristine.root) == ledger  # ... and never wrote to the ledger
    assert _outputs_state(pristine.root) == outputs
    [scratch] = scratches
    assert scratch.parent == scratch_parent and scratch.name.startswith("dqrelease-replay-")
    assert not scratch.exists()


def test_replay_release_from_python_returns_the_recorded_hashes(pristine: SimpleNamespace):
    from dqrelease.flows.release import replay_release

    ledger = _ledger_state(pristine.root)
    replayed = replay_release(str(pristine.manifest))
    recorded = json.loads(pristine.manifest.read_text())["outputs"]
    assert replayed["run_id"] == pristine.release.name
    assert {fmt: replayed["outputs"][fmt]["sha256"] for fmt in ("parquet", "csv")} == {
        fmt: recorded[fmt]["sha256"] for fmt in ("parquet", "csv")
    }
    assert replayed["outputs"]["duckdb"]["content_sha256"] == recorded["duckdb"]["content_sha256"]
    assert _ledger_state(pristine.root) == ledger


# ---------------------------------------------------------------------- verify: every tampering is refused
def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def _tamper_config(s):
    s.config.write_text(s.config.read_text().replace("epsilon = 2.0", "epsilon = 1.5"))


def _tamper_config_seed(s):
    s.config.write_text(s.config.read_text().replace(f"seed = {SEED}", f"seed = {SEED + 1}"))


def _tamper_schema(s):
    _append(s.root / "schema.toml", "# an edit\n")


def _tamper_input(s):
    data = s.root / "people.csv"
    lines = data.read_text().splitlines()
    lines[1] = "green,99,1,b"
    data.write_text("\n".join(lines) + "\n")


def _add_input(s):
    s.config.write_text(s.config.read_text().replace('paths = ["people.csv"]', 'paths = ["people*.csv"]'))
    (s.root / "people-late.csv").write_text("colour,size,flag,group\nred,1,0,a\n")


def _tamper_manifest(key: str, value):
    return lambda s: _edit_json(s.manifest, lambda record: record.__setitem__(key, value))


def _tamper_manifest_input(s):
    _edit_json(s.manifest, lambda r: r.__setitem__("input_sha256", {k: "0" * 64 for k in r["input_sha256"]}))


def _tamper_manifest_numpy(s):
    _edit_json(s.manifest, lambda r: r["packages"].__setitem__("numpy", "0.0.1"))


def _tamper_manifest_output(s):
    _edit_json(s.manifest, lambda r: r["outputs"]["csv"].__setitem__("sha256", "0" * 64))


def _tamper_published(s):
    _append(s.release / "synthetic.csv", "red,0-25,0,a\n")


def _remove_seed_file(s):
    Path(json.loads(s.manifest.read_text())["seed_file"]).unlink()


def _garble_manifest(s):
    s.manifest.write_bytes(b"\x00\xff not json")


CHANGED_EPSILON = "release.toml differs from the released one (changed: privacy.epsilon)"
"""A refused replay names the config key that changed (the manifest stores the public config)."""


@pytest.mark.parametrize(
    ("tamper", "code", "message"),
    [
        (_tamper_config, ExitCode.REPLAY_REFUSED, CHANGED_EPSILON),
        (_tamper_config_seed, ExitCode.REPLAY_REFUSED, "run.seed of the config differs from the release's seed file"),
        (_tamper_schema, ExitCode.REPLAY_REFUSED, "schema.toml differs from the released one (schema hash)"),
        (_tamper_input, ExitCode.REPLAY_REFUSED, "people.csv changed since the release (SHA-256 differs)"),
        (_add_input, ExitCode.REPLAY_REFUSED, "people-late.csv was not part of the release"),
        (_tamper_manifest("config_sha256", "0" * 64), ExitCode.REPLAY_REFUSED, "(config hash)"),
        (_tamper_manifest("schema_sha256", "0" * 64), ExitCode.REPLAY_REFUSED, "(schema hash)"),
        (_tamper_manifest_input, ExitCode.REPLAY_REFUSED, "people.csv changed since the release"),
        (_tamper_manifest_numpy, ExitCode.REPLAY_REFUSED, "package versions differ: numpy"),
        (_tamper_manifest("code_sha256", "0" * 64), ExitCode.REPLAY_REFUSED, "source code differs"),
        (_tamper_manifest("code_sha256", None), ExitCode.REPLAY_REFUSED, "records no code hash"),
        (_tamper_manifest("seed_file", None), ExitCode.REPLAY_REFUSED, "records no seed file"),
        (_remove_seed_file, ExitCode.REPLAY_REFUSED, "seed file"),
        (_garble_manifest, ExitCode.REPLAY_REFUSED, "not a JSON manifest"),
        (_tamper_manifest("seeded", False), ExitCode.VERIFY_MISMATCH, "disagree on whether the release was seeded"),
        (_tamper_manifest_output, ExitCode.VERIFY_MISMATCH, "synthetic.csv differs from the manifest's SHA-256"),
        (_tamper_published, ExitCode.VERIFY_MISMATCH, "synthetic.csv differs from the manifest's SHA-256"),
    ],
    ids=lambda value: getattr(value, "__name__", None) if callable(value) else None,
)
def test_verify_refuses_tampering_before_reading_the_data(
    pristine: SimpleNamespace, ingest_calls: list[str], tamper, code: ExitCode, message: str
):
    ledger = _ledger_state(pristine.root)
    tamper(pristine)
    outputs = _outputs_state(pristine.root)
    result = _run("verify", str(pristine.manifest))
    assert result.exit_code == code, result.output
    assert message in _stderr_line(result)
    assert ingest_calls == []
    assert _ledger_state(pristine.root) == ledger
    assert _outputs_state(pristine.root) == outputs


def _describe_epsilon_8(s) -> None:
    """Rewrite the manifest to describe an ε = 8 release (a config file, its hash and its plan, all consistent)."""
    edited = s.root / "release-eps8.toml"
    edited.write_text(s.config.read_text().replace("epsilon = 2.0", "epsilon = 8.0"))
    plan = describe_another_release(s.manifest, edited)
    assert plan["costs"][plan["accounting_mode"]]["epsilon"] > 7


def test_verify_refuses_a_manifest_rewritten_to_describe_an_uncharged_release(
    pristine: SimpleNamespace, ingest_calls: list[str]
):
    ledger, outputs = _ledger_state(pristine.root), _outputs_state(pristine.root)
    _describe_epsilon_8(pristine)
    result = _run("verify", str(pristine.manifest))
    assert result.exit_code == ExitCode.REPLAY_REFUSED, result.output
    line = _stderr_line(result)
    assert f"ledger {pristine.root / 'ledger.duckdb'} holds no charge of run {pristine.release.name}" in line
    assert "nothing was read from the data" in line, line
    assert "(dualquery at epsilon=7.9" in line, line  # the ε = 8 plan spends 7.937 of it (fit share 0.9)
    assert len(result.stderr.strip().splitlines()) == 1
    assert ingest_calls == []
    assert _ledger_state(pristine.root) == ledger
    assert _outputs_state(pristine.root) == outputs


def test_replay_release_refuses_a_rewritten_manifest_before_the_ingest(
    pristine: SimpleNamespace, ingest_calls: list[str], mechanism_calls: list[str]
):
    from dqrelease.flows.release import replay_release
    from dqrelease.ledger.grants import grant_for_replay
    from dqrelease.outputs.replay import prepare_replay
    from dqrelease.plan import plan_release

    ledger = _ledger_state(pristine.root)
    _describe_epsilon_8(pristine)
    with pytest.raises(ReplayRefusedError, match=r"ledger .*ledger\.duckdb holds no charge of run"):
        replay_release(str(pristine.manifest))
    target = prepare_replay(pristine.manifest)  # the files all match the edited manifest ...
    from dqrelease.inputs.encoding import domain_from_columns
    from dqrelease.plan import build_workload

    workload = build_workload(target.config.workload, domain_from_columns(target.schema.columns))
    with pytest.raises(ReplayRefusedError, match="holds no charge"):  # ... and no grant is issued for it
        grant_for_replay(target=target, plan=plan_release(target.config, n=ROWS, workload=workload), run_id="r")
    assert ingest_calls == [] and mechanism_calls == []
    assert _ledger_state(pristine.root) == ledger


def test_replay_needs_the_ledger_the_config_names(pristine: SimpleNamespace, ingest_calls: list[str]):
    (pristine.root / "ledger.duckdb").rename(pristine.root / "elsewhere.duckdb")
    try:
        result = _run("verify", str(pristine.manifest))
    finally:
        (pristine.root / "elsewhere.duckdb").rename(pristine.root / "ledger.duckdb")
    assert result.exit_code == ExitCode.REPLAY_REFUSED, result.output
    assert f"ledger {pristine.root / 'ledger.duckdb'} (the config's ledger.path) does not exist" in _stderr_line(result)
    assert ingest_calls == []


def test_verify_refuses_when_installed_versions_differ(
    pristine: SimpleNamespace, ingest_calls: list[str], monkeypatch: pytest.MonkeyPatch
):
    import dqrelease.outputs.manifest as manifest

    installed = manifest.package_versions()
    monkeypatch.setattr(manifest, "package_versions", lambda: {**installed, "ortools": "1.0"})
    result = _run("verify", str(pristine.manifest))
    assert result.exit_code == ExitCode.REPLAY_REFUSED
    assert f"ortools 1.0 (release: {installed['ortools']})" in _stderr_line(result)
    assert ingest_calls == []


def test_verify_refuses_a_missing_manifest_and_the_public_release_json(pristine: SimpleNamespace):
    missing = _run("verify", str(pristine.root / "nowhere.json"))
    assert missing.exit_code == ExitCode.REPLAY_REFUSED and "manifest not found" in _stderr_line(missing)
    public = _run("verify", str(pristine.release / "release.json"))
    assert public.exit_code == ExitCode.REPLAY_REFUSED
    assert "this is the public release.json" in _stderr_line(public)


def test_replay_stops_when_an_input_changes_while_it_is_read(
    pristine: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, mechanism_calls: list[str]
):
    import dqrelease.tasks.prepare as prepare

    original = prepare.ingest_source

    def ingest_then_swap(*args, **kwargs):
        rows = original(*args, **kwargs)
        _tamper_input(pristine)
        return rows

    monkeypatch.setattr(prepare, "ingest_source", ingest_then_swap)
    ledger = _ledger_state(pristine.root)
    result = _run("verify", str(pristine.manifest))
    assert result.exit_code == ExitCode.REPLAY_REFUSED, result.output
    assert "the input files changed while they were read" in _stderr_line(result)
    assert mechanism_calls == []
    assert _ledger_state(pristine.root) == ledger


# ---------------------------------------------------------------------- unseeded and noisy-n releases
def test_verify_of_an_unseeded_release_checks_hashes_and_charges_and_exits_0(
    tmp_path: Path, ingest_calls: list[str]
):
    unseeded = _make_release(tmp_path / "unseeded", seeded=False)
    ingest_calls.clear()
    ledger = _ledger_state(unseeded.root)
    result = _run("verify", str(unseeded.manifest))
    assert result.exit_code == ExitCode.OK, result.output
    assert "published files match the manifest" in result.stdout
    assert "ledger charges that paid for run" in result.stdout
    assert "is unseeded, so its hashes and provenance were checked" in result.stdout
    assert "a byte-for-byte replay needs a seeded release" in result.stdout
    assert "--seeded-test-or-audit" in result.stdout
    assert ingest_calls == []
    assert _ledger_state(unseeded.root) == ledger


def test_verify_of_a_noisy_n_release_replays_the_count_without_charging(tmp_path: Path, ingest_calls: list[str]):
    noisy = _make_release(tmp_path / "noisy", noisy=True)
    ledger = _ledger_state(noisy.root)
    assert [charge["mechanism"] for charge in ledger[2]] == ["laplace-count", "dualquery"]
    result = _run("verify", str(noisy.manifest))
    assert result.exit_code == ExitCode.OK, result.output
    assert ingest_calls == ["ingest", "ingest"]  # the release, then the replay
    assert _ledger_state(noisy.root) == ledger


def test_changed_keys_names_dotted_keys_and_table_items():
    from dqrelease.outputs.replay import changed_keys

    recorded = {"privacy": {"epsilon": 1.0, "delta": 1e-9}, "workload": {"parts": [{"k": 1}, {"k": 3, "count": 64}]},
                "run": {"seed_mode": "seeded"}}
    current = {"privacy": {"epsilon": 1.5, "delta": 1e-9}, "workload": {"parts": [{"k": 1}, {"k": 3, "count": 32}]},
               "run": {"seed_mode": "seeded", "dask_address": "local"}}
    assert changed_keys(recorded, current) == ["privacy.epsilon", "workload.parts[2].count", "run.dask_address"]
    assert changed_keys(recorded, recorded) == []
