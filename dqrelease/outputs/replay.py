"""Replaying a seeded release from its audit manifest, and what is checked before the data is touched.

A replay re-runs a seeded release with its recorded seed and compares the output bytes with the manifest.
It is the only way the pipeline runs a mechanism on private data without a ledger charge, which is sound
only when the replay cannot learn anything the release did not already pay for: the same data, config,
schema, code and seed reproduce the same output, so the comparison's answer is known in advance.
:func:`prepare_replay` therefore refuses (:class:`~dqrelease.errors.ReplayRefusedError`, exit code 6) unless

* the manifest is an audit manifest (``internal/<run_id>/manifest.json``) of a **seeded** release (an unseeded
  one gets :class:`~dqrelease.errors.NothingToVerifyError`, exit code 7; ``verify`` checks such a release with
  :func:`check_published` and :func:`dqrelease.ledger.grants.check_recorded_charges` instead) and its seed file is
  readable;
* the config file at the recorded path has the recorded config hash, and its ``run.seed`` is the seed file's;
* the schema file has the recorded hash;
* every file the ingest would read (glob patterns expanded) has its recorded SHA-256, and no file was added;
* the source code (:func:`~dqrelease.outputs.manifest.code_sha256`) and the package versions are the recorded ones.

All of this reads hashes of files, never their rows. After the ingest, :func:`check_inputs_unchanged` hashes
the inputs again, so a file swapped while it was read stops the replay before the mechanism runs. Refusal
messages name what differs (a key, a file, a package) and never a data value.

:func:`check_published` checks the published files against the manifest (no private data involved), and
:func:`compare_outputs` compares a replay's outputs with it; both raise
:class:`~dqrelease.errors.VerificationError` (exit code 5).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from dqrelease.errors import ConfigInvalidError, NothingToVerifyError, ReplayRefusedError, VerificationError
from dqrelease.inputs.config import ReleaseConfig, config_hash, file_sha256, load_config
from dqrelease.inputs.schema import Schema, load_schema
from dqrelease.inputs.toml_input import format_validation_error
from dqrelease.outputs import manifest as manifests

__all__ = [
    "ManifestRecord",
    "ReplayTarget",
    "changed_keys",
    "check_inputs_unchanged",
    "check_published",
    "compare_outputs",
    "prepare_replay",
    "read_manifest",
]

MAX_MANIFEST_BYTES = 64 * 1024 * 1024
"""Largest manifest read (a manifest of a 100,000-column release is well under 10 MB)."""

_ISSUER = object()  # only prepare_replay makes a ReplayTarget


class _Output(BaseModel):
    """One output file as the manifest records it."""

    model_config = ConfigDict(extra="allow", frozen=True)

    path: str
    sha256: str
    content_sha256: str | None = None


class ManifestRecord(BaseModel):
    """The fields of an audit manifest that ``verify`` and a replay read (others are allowed and ignored)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    run_id: str
    release: str
    config_path: str
    config_sha256: str
    config: dict[str, Any]
    schema_sha256: str
    packages: dict[str, str]
    code_sha256: str | None = None
    git_commit: str | None = None
    privacy: dict[str, Any]
    outputs: dict[str, _Output]
    seeded: bool
    input_sha256: dict[str, str] | None = None
    seed_file: str | None = None
    ledger_charges: list[dict[str, Any]] | None = None


@dataclass(frozen=True, kw_only=True)
class ReplayTarget:
    """A manifest whose replay passed every check of :func:`prepare_replay` (made only there).

    Attributes:
        manifest_path: The audit manifest.
        run_id: The release's run id.
        config: The release config (its hash is the recorded one).
        schema: The schema (its file's hash is the recorded one).
        seed: The recorded seed (restricted: never logged or shown).
        recorded_plan: The plan as the manifest recorded it (the replay's plan must equal it).
        input_sha256: The recorded hashes of the input files.
        outputs: The recorded output files and hashes.
    """

    manifest_path: Path
    run_id: str
    config: ReleaseConfig
    schema: Schema
    seed: int = field(repr=False)
    recorded_plan: dict[str, Any]
    input_sha256: dict[str, str]
    outputs: dict[str, dict[str, Any]]
    _issuer: object = field(repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._issuer is not _ISSUER:
            raise ReplayRefusedError(
                "a ReplayTarget is made only by dqrelease.outputs.replay.prepare_replay(manifest), which checks the "
                "manifest first; call that (or dqrelease.flows.release.replay_release)"
            )


def read_manifest(path: Path) -> ManifestRecord:
    """Read an audit manifest.

    Raises:
        ReplayRefusedError: The file is missing, unreadable, not JSON, the public ``release.json``, or lacks a
            field a replay needs.
    """
    path = Path(path)
    fix = "give the audit manifest internal/<run_id>/manifest.json"
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError:
        raise ReplayRefusedError(f"{path}: manifest not found; {fix}") from None
    except IsADirectoryError:
        raise ReplayRefusedError(f"{path}: is a directory, not a manifest; {fix}") from None
    except OSError as error:
        raise ReplayRefusedError(f"{path}: cannot read the manifest ({error.strerror}); {fix}") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise ReplayRefusedError(f"{path}: larger than {MAX_MANIFEST_BYTES // 2**20} MB, not a manifest; {fix}")
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ReplayRefusedError(f"{path}: not a JSON manifest; {fix}") from None
    if isinstance(raw, dict) and "outputs" in raw and "input_sha256" not in raw:
        raise ReplayRefusedError(f"{path}: this is the public release.json (it has no input hashes); {fix}")
    try:
        return ManifestRecord.model_validate(raw)
    except ValidationError as error:
        problems = format_validation_error(error, path, raw, ManifestRecord)
        raise ReplayRefusedError(f"not a dqrelease audit manifest: {problems}; {fix}") from None


def check_published(record: ManifestRecord, *, release_dir: Path | None = None) -> list[str]:
    """Check the published files of a release against its manifest (reads no private data).

    Args:
        record: The audit manifest.
        release_dir: The published release directory (default: ``<output.directory>/releases/<run_id>`` of the
            recorded config).

    Returns:
        The formats whose files match.

    Raises:
        ReplayRefusedError: The manifest names an output outside the release directory.
        VerificationError: A published file, or the public ``release.json``, is missing or differs.
    """
    if release_dir is None:
        directory = record.config.get("output", {}).get("directory") if isinstance(record.config, dict) else None
        if not isinstance(directory, str):
            raise ReplayRefusedError("the manifest records no output.directory; give --release DIR")
        release_dir = Path(directory) / "releases" / record.run_id
    release_dir = Path(release_dir)
    if not release_dir.is_dir():
        raise VerificationError(
            f"published release directory {release_dir} not found; give --release DIR if the release was moved"
        )
    problems = []
    for fmt, output in record.outputs.items():
        if Path(output.path).name != output.path or output.path in ("", ".", ".."):
            raise ReplayRefusedError(f"the manifest's {fmt} output path {output.path!r} is not a file name")
        published = release_dir / output.path
        if not published.is_file():
            problems.append(f"{output.path} is missing")
        elif file_sha256(published) != output.sha256:
            problems.append(f"{output.path} differs from the manifest's SHA-256 (it changed after publication)")
    public = release_dir / "release.json"
    try:
        public_record = json.loads(public.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        problems.append("release.json is missing or not JSON")
    else:
        recorded = {fmt: output.model_dump(exclude_none=True) for fmt, output in record.outputs.items()}
        if not isinstance(public_record, dict) or public_record.get("run_id") != record.run_id:
            problems.append("release.json is of another run")
        elif public_record.get("outputs") != recorded:
            problems.append("release.json lists other output hashes than the audit manifest")
        elif public_record.get("seeded", record.seeded) != record.seeded:
            problems.append("release.json and the audit manifest disagree on whether the release was seeded")
    if problems:
        raise VerificationError(f"published release {release_dir} does not match its manifest: {'; '.join(problems)}")
    return list(record.outputs)


def prepare_replay(manifest_path: Path) -> ReplayTarget:
    """Check everything a replay of ``manifest_path`` would run against the manifest, before any data is read.

    Raises:
        NothingToVerifyError: The release was unseeded.
        ReplayRefusedError: Anything differs, or the manifest, config, schema or seed file cannot be read (the
            message lists every difference found).
    """
    manifest_path = Path(manifest_path)
    record = read_manifest(manifest_path)
    if not record.seeded:
        raise NothingToVerifyError(
            f"nothing to replay: release {record.release} (run {record.run_id}) was unseeded "
            "(run.seed_mode = 'secure'): its randomness was never recorded, by design, so it cannot be replayed; "
            "`dqrelease verify` checks its files and ledger charges, and a byte-for-byte replay needs a release run "
            "with seed_mode = 'seeded' (tests and audits)"
        )
    if record.code_sha256 is None or record.input_sha256 is None or not record.input_sha256:
        missing = "code hash" if record.code_sha256 is None else "input file hashes"
        raise ReplayRefusedError(
            f"replay refused: {manifest_path} records no {missing} (written by an older dqrelease), so the replay "
            "cannot be checked against it; re-run the release to get a verifiable manifest"
        )
    seed = _recorded_seed(record)
    try:
        config = load_config(Path(record.config_path))
        schema = load_schema(config.schema_file)
    except ConfigInvalidError as error:
        raise ReplayRefusedError(f"replay refused: the manifest's config cannot be loaded: {error}") from None

    differences = []
    if config_hash(config) != record.config_sha256:
        changed = changed_keys(record.config, json.loads(config.model_dump_json(exclude={"run": {"seed"}})))
        named = f"changed: {', '.join(changed)}" if changed else "config hash"
        differences.append(f"config {record.config_path} differs from the released one ({named})")
    if config.run.seed_mode != "seeded" or config.run.seed != seed:
        differences.append("run.seed of the config differs from the release's seed file")
    if file_sha256(config.schema_file) != record.schema_sha256:
        differences.append(f"schema file {config.schema_file} differs from the released one (schema hash)")
    differences.extend(_input_differences(record.input_sha256, manifests.input_hashes(config)))
    if manifests.code_sha256() != record.code_sha256:
        commit = f" (the release ran git commit {record.git_commit})" if record.git_commit else ""
        differences.append(f"the dqrelease/dq_engine source code differs from the release's{commit}")
    installed = manifests.package_versions()
    changed = [
        f"{name} {installed.get(name, 'not installed')} (release: {record.packages.get(name, 'not recorded')})"
        for name in sorted(set(installed) | set(record.packages))
        if installed.get(name, "not installed") != record.packages.get(name, "not recorded")
    ]
    if changed:
        differences.append(f"package versions differ: {', '.join(changed)}")
    if differences:
        raise ReplayRefusedError(
            f"replay refused, nothing was read from the data: {'; '.join(differences)}; a replay needs the "
            "release's own config, schema, input files, code and package versions"
        )
    return ReplayTarget(
        manifest_path=manifest_path, run_id=record.run_id, config=config, schema=schema, seed=seed,
        recorded_plan=record.privacy, input_sha256=dict(record.input_sha256),
        outputs={fmt: output.model_dump() for fmt, output in record.outputs.items()}, _issuer=_ISSUER,
    )


def changed_keys(recorded: Any, current: Any, prefix: str = "") -> list[str]:
    """The dotted config keys whose values differ between the manifest's config and the current one.

    Both are the config's public JSON (the manifest stores it, without ``run.seed``); a list of tables is compared
    item by item (``workload.parts[2].count``), a key present on one side only is named too.
    """
    if isinstance(recorded, dict) and isinstance(current, dict):
        keys = list(dict.fromkeys([*recorded, *current]))
        return [changed for key in keys for changed in changed_keys(
            recorded.get(key, _ABSENT), current.get(key, _ABSENT), f"{prefix}.{key}" if prefix else str(key)
        )]
    both_tables = isinstance(recorded, list) and isinstance(current, list) and len(recorded) == len(current) \
        and all(isinstance(item, dict) for item in [*recorded, *current])
    if both_tables:
        return [changed for index, (old, new) in enumerate(zip(recorded, current, strict=True))
                for changed in changed_keys(old, new, f"{prefix}[{index + 1}]")]
    return [] if recorded == current else [prefix or "(the whole config)"]


_ABSENT = object()
"""A key missing on one side of :func:`changed_keys`."""


def check_inputs_unchanged(target: ReplayTarget) -> None:
    """Hash the input files again after they were read (a file swapped during the ingest stops the replay).

    Raises:
        ReplayRefusedError: An input file changed, appeared or disappeared since :func:`prepare_replay`.
    """
    differences = _input_differences(target.input_sha256, manifests.input_hashes(target.config))
    if differences:
        raise ReplayRefusedError(
            f"replay stopped before the mechanism ran: the input files changed while they were read: "
            f"{'; '.join(differences)}; run verify again when the files are stable"
        )


def compare_outputs(expected: dict[str, dict[str, Any]], actual: dict[str, dict[str, Any]]) -> list[str]:
    """Compare a replay's output hashes with the manifest's (DuckDB files by their table content).

    Returns:
        The formats reproduced.

    Raises:
        VerificationError: Some format differs or is missing.
    """
    mismatches = []
    for fmt, info in expected.items():
        key = "content_sha256" if fmt == "duckdb" else "sha256"
        if actual.get(fmt, {}).get(key) != info.get(key):
            mismatches.append(fmt)
    if mismatches:
        raise VerificationError(
            f"the replay's output differs for {', '.join(mismatches)}: the release is not reproduced by its own "
            "config, data, code and seed"
        )
    return list(expected)


def _recorded_seed(record: ManifestRecord) -> int:
    if not record.seed_file:
        raise ReplayRefusedError(
            "replay refused: the manifest of this seeded release records no seed file; give the audit manifest "
            "internal/<run_id>/manifest.json written by the run"
        )
    path = Path(record.seed_file)
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ReplayRefusedError(
            f"replay refused: seed file {path} not found; verify needs the run's restricted seed file"
        ) from None
    except (OSError, UnicodeDecodeError):
        raise ReplayRefusedError(f"replay refused: seed file {path} cannot be read; check its permissions") from None
    if not text.isdigit():
        raise ReplayRefusedError(f"replay refused: seed file {path} does not hold a seed (a non-negative integer)")
    return int(text)


def _input_differences(recorded: dict[str, str], current: dict[str, str]) -> list[str]:
    """What differs between recorded and current input hashes, by file path (never by content)."""
    differences = []
    for path in sorted(set(recorded) | set(current)):
        if path not in current:
            differences.append(f"input file {path} is missing")
        elif path not in recorded:
            differences.append(f"input file {path} was not part of the release (source.paths now match it)")
        elif current[path] != recorded[path]:
            differences.append(f"input file {path} changed since the release (SHA-256 differs)")
    return differences
