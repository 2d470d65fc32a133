"""The shared data directory: DQRELEASE_DATA wins, else ../shared/data beside the repo; configs name it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import dqrelease.inputs.data_home as data_home
from dqrelease.errors import ConfigInvalidError
from dqrelease.inputs.config import load_config
from dqrelease.inputs.data_home import DATA_FIX, require_shared_data_dir, shared_data_dir, shared_data_file

ROOT = Path(__file__).resolve().parents[2]
KDD99_FILE = "kddcup99_10pct/kddcup.data_10_percent.gz"


@pytest.fixture
def fake_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repo folder without ../shared/data beside it, as the package's location; DQRELEASE_DATA unset."""
    package = tmp_path / "clone" / "dqrelease" / "inputs"
    package.mkdir(parents=True)
    monkeypatch.setattr(data_home, "__file__", str(package / "data_home.py"))
    monkeypatch.delenv("DQRELEASE_DATA", raising=False)
    return package.parent.parent


def test_environment_variable_wins_over_the_folder_beside_the_repo(fake_repo, tmp_path, monkeypatch):
    (fake_repo.parent / "shared" / "data").mkdir(parents=True)
    chosen = tmp_path / "elsewhere"
    monkeypatch.setenv("DQRELEASE_DATA", str(chosen))
    assert shared_data_dir() == chosen.resolve()


def test_folder_beside_the_repo_is_used_when_the_variable_is_unset_or_empty(fake_repo, monkeypatch):
    beside = fake_repo.parent / "shared" / "data"
    beside.mkdir(parents=True)
    assert shared_data_dir() == beside.resolve()
    monkeypatch.setenv("DQRELEASE_DATA", "")
    assert shared_data_dir() == beside.resolve()


def test_no_variable_and_no_folder_beside_the_repo_gives_none(fake_repo):
    assert shared_data_dir() is None
    assert shared_data_file("adult_pgm/adult.csv") is None
    with pytest.raises(FileNotFoundError, match=re.escape(DATA_FIX)):
        require_shared_data_dir()


def test_empty_folder_in_the_variable_is_returned_but_its_files_do_not_exist(tmp_path, monkeypatch):
    monkeypatch.setenv("DQRELEASE_DATA", str(tmp_path))
    assert shared_data_dir() == tmp_path.resolve()
    assert not (shared_data_dir() / "adult_pgm" / "adult.csv").exists()
    assert shared_data_file("adult_pgm/adult.csv") is None


def test_shared_data_file_returns_an_existing_file_only(tmp_path, monkeypatch):
    monkeypatch.setenv("DQRELEASE_DATA", str(tmp_path))
    (tmp_path / "adult_pgm").mkdir()
    (tmp_path / "adult_pgm" / "adult.csv").write_text("age\n1\n")
    assert shared_data_file("adult_pgm/adult.csv") == tmp_path.resolve() / "adult_pgm" / "adult.csv"
    assert shared_data_file("adult_pgm") is None  # a folder is not a file


def _config_with_source(tmp_path: Path, path: str) -> Path:
    text = (ROOT / "examples" / "adult" / "release.toml").read_text()
    text = re.sub(r"(?m)^paths = .*$", f"paths = [{path!r}]", text, count=1)
    text = re.sub(r'(?m)^schema_file = .*$', f"schema_file = {str(ROOT / 'examples/adult/schema.toml')!r}", text)
    config = tmp_path / "release.toml"
    config.write_text(text)
    return config


def test_config_path_with_the_placeholder_expands_to_the_shared_data_directory(tmp_path, monkeypatch):
    data = tmp_path / "data"
    monkeypatch.setenv("DQRELEASE_DATA", str(data))
    config = load_config(_config_with_source(tmp_path, "${DQRELEASE_DATA}/adult/adult.data"))
    assert [Path(p) for p in config.source.paths] == [data.resolve() / "adult" / "adult.data"]


def test_config_path_with_the_placeholder_and_no_shared_data_is_refused_with_the_fix(fake_repo, tmp_path):
    value = "${DQRELEASE_DATA}/adult/adult.data"
    with pytest.raises(ConfigInvalidError) as caught:
        load_config(_config_with_source(tmp_path, value))
    message = str(caught.value)
    assert "\n" not in message
    assert value in message
    assert DATA_FIX in message


def test_kdd99_example_names_its_file_through_the_placeholder(tmp_path, monkeypatch):
    monkeypatch.setenv("DQRELEASE_DATA", str(tmp_path))
    config = load_config(ROOT / "examples" / "kdd99" / "release.toml")
    assert [Path(p) for p in config.source.paths] == [tmp_path.resolve() / KDD99_FILE]
