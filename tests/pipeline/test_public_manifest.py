"""The public release.json names no absolute local path; the internal manifest keeps them (verify reads it)."""

from __future__ import annotations

from pathlib import Path

from dqrelease.inputs.config import load_config
from dqrelease.outputs.manifest import build_manifest

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "examples" / "adult"


def _strings(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def test_release_json_holds_paths_relative_to_the_release(tmp_path: Path):
    work = tmp_path / "work"
    work.mkdir()
    text = (ADULT / "release.toml").read_text()
    text = text.replace('schema_file = "schema.toml"', f'schema_file = "{ADULT / "schema.toml"}"')
    text = text.replace('"data/adult.data", "data/adult.test"', f'"{ADULT / "data" / "adult.data"}"')
    text = text.replace("../../dqrelease-out/ledger.duckdb", "ledger.duckdb")
    text = text.replace("../../dqrelease-out/adult", "out")
    config_path = work / "release.toml"
    config_path.write_text(text)
    config = load_config(config_path)
    release_dir = work / "out" / "releases" / "run-1"
    common = {
        "config": config, "config_path": config_path.resolve(), "run_id": "run-1", "started": "s", "finished": "f",
        "plan": {}, "charges": [], "outputs": {"csv": {"path": "synthetic.csv", "sha256": "0" * 64}}, "rows": 1,
        "seed_file": None,
    }

    public = build_manifest(**common, public=True, release_dir=release_dir)
    absolute = [text for text in _strings(public) if Path(text).is_absolute()]
    assert absolute == []
    assert (release_dir / public["config_path"]).resolve() == config_path.resolve()
    assert (release_dir / public["config"]["schema_file"]).resolve() == (ADULT / "schema.toml").resolve()
    [source] = public["config"]["source"]["paths"]
    assert (release_dir / source).resolve() == (ADULT / "data" / "adult.data").resolve()
    assert (release_dir / public["config"]["output"]["directory"]).resolve() == (work / "out").resolve()
    assert public["outputs"]["csv"]["path"] == "synthetic.csv"

    internal = build_manifest(**common, public=False)
    assert internal["config_path"] == str(config_path.resolve())
    assert Path(internal["config"]["schema_file"]).is_absolute()


def test_release_json_gives_the_days_of_the_run_not_its_times(tmp_path: Path):
    """The run's duration depends on the data (answering grows with its distinct rows): public files hold dates."""
    text = (ADULT / "release.toml").read_text()
    text = text.replace('schema_file = "schema.toml"', f'schema_file = "{ADULT / "schema.toml"}"')
    text = text.replace('"data/adult.data", "data/adult.test"', f'"{ADULT / "data" / "adult.data"}"')
    config_path = tmp_path / "release.toml"
    config_path.write_text(text)
    common = {
        "config": load_config(config_path), "config_path": config_path.resolve(), "run_id": "run-1",
        "started": "2026-11-26T01:02:03.456789+00:00", "finished": "2026-11-26T01:03:59.000001+00:00", "plan": {},
        "charges": [], "outputs": {}, "rows": 1, "seed_file": None,
    }
    public = build_manifest(**common, public=True, release_dir=tmp_path / "out")
    assert (public["started"], public["finished"]) == ("2026-11-26", "2026-11-26")
    internal = build_manifest(**common, public=False)
    assert internal["finished"] == "2026-11-26T01:03:59.000001+00:00"  # the internal manifest keeps the times
