"""The public release.json names no path of the operator's machine; the internal manifest keeps them (verify)."""

from __future__ import annotations

import re
from pathlib import Path

from dqrelease.inputs.config import file_sha256, load_config
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


def leaked_paths(public: dict, *, names: list[str], folders: list[Path]) -> list[str]:
    """The strings of a ``release.json`` that name a path or a file of the operator's machine.

    A path-like string (:func:`_path_like`) other than a published file's own name, or a string holding one of
    ``names`` (source, ledger, config or schema file names) or one of ``folders``. Empty when nothing leaks.
    """
    published = {output["path"] for output in public["outputs"].values()}
    return [
        text for text in _strings(public) if text not in published and (
            _path_like(text) or any(name in text for name in names) or any(str(f) in text for f in folders)
        )
    ]


def _path_like(text: str) -> bool:
    """One word that names a file or folder: a path separator or ``..`` in it, or a file suffix (``x.data``).

    Sentences (the privacy analysis' ``rho ln(1/delta)``) and exact fractions (``1/1000000``) are not paths.
    """
    if any(space in text for space in " \t\n") or re.fullmatch(r"-?\d+/\d+", text):
        return False
    return "/" in text or "\\" in text or ".." in text or re.fullmatch(r"[\w.\-]+\.[A-Za-z]\w*", text) is not None


def test_release_json_names_no_path_source_or_ledger(tmp_path: Path):
    work = tmp_path / "work"
    work.mkdir()
    text = (ADULT / "release.toml").read_text()
    text = text.replace('schema_file = "schema.toml"', f'schema_file = "{ADULT / "schema.toml"}"')
    text = text.replace('"data/adult.data", "data/adult.test"', f'"{ADULT / "data" / "adult.data"}"')
    config_path = work / "release.toml"
    config_path.write_text(text)
    config = load_config(config_path)
    outputs = {"csv": {"path": "synthetic.csv", "sha256": "0" * 64},
               "duckdb": {"path": "synthetic.duckdb", "table": "synthetic", "sha256": "1" * 64}}
    charge = {"dataset_id": "uci-adult", "seq": 3, "run_id": "run-1", "charged_at": "2026-11-26T01:02:03+00:00",
              "epsilon": 1.0, "note": "dualquery release uci-adult"}
    common = {
        "config": config, "config_path": config_path.resolve(), "run_id": "run-1", "started": "2026-11-26T01:00:00",
        "finished": "2026-11-26T01:05:00", "plan": {"mechanism": "dualquery"}, "charges": [charge],
        "outputs": outputs, "rows": 1, "seed_file": "/somewhere/seed",
    }

    public = build_manifest(**common, public=True)
    names = ["adult.data", "adult.test", "ledger.duckdb", "schema.toml", "release.toml", "seed", "dqrelease-out"]
    assert leaked_paths(public, names=names, folders=[tmp_path, ROOT]) == []
    # what a user of the table needs is there
    assert (public["release"], public["dataset"]) == (config.name, config.ledger.dataset_id)
    assert public["schema_sha256"] == file_sha256(ADULT / "schema.toml")
    assert public["settings"]["output"]["formats"] == list(config.output.formats)
    assert public["settings"]["privacy"]["neighbouring"] == config.privacy.neighbouring
    assert public["outputs"] == outputs and public["privacy"] == {"mechanism": "dualquery"}
    assert public["ledger_charges"] == [{**charge, "charged_at": "2026-11-26"}]
    assert "input_sha256" not in public and "packages" not in public and "config" not in public

    internal = build_manifest(**common, public=False)
    assert internal["config_path"] == str(config_path.resolve())  # verify and replay read the internal one
    assert Path(internal["config"]["schema_file"]).is_absolute()
    assert internal["input_sha256"] and internal["seed_file"] == "/somewhere/seed"


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
    public = build_manifest(**common, public=True)
    assert (public["started"], public["finished"]) == ("2026-11-26", "2026-11-26")
    internal = build_manifest(**common, public=False)
    assert internal["finished"] == "2026-11-26T01:03:59.000001+00:00"  # the internal manifest keeps the times
