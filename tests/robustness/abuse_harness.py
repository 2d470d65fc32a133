"""The abuse corpus's tools: a tiny table with planted canaries, a CLI runner, and the checks every case makes.

Every case builds a :class:`Workspace` (schema, table, release config in a temporary folder), breaks one thing,
runs the ``dqrelease`` CLI in-process (:func:`run_cli`) or as a process (``processes.py``), and hands the
:class:`Outcome` to :func:`expect_refusal` or :func:`expect_release`. Those assert, for every case:

* the exit code;
* exactly one line on stderr for a refusal, naming the problem and the fix (two regexes per case), and no
  traceback anywhere in the output;
* nothing in ``releases/`` or ``internal/``, and nothing left in ``.staging/`` (a release: exactly one complete
  release and internal folder);
* the ledger's caps and charges unchanged (a release: one more charge);
* no canary anywhere (:func:`assert_no_leaks`): not in stdout, stderr, log records, the Prefect server's logs,
  artifacts and run states, any file under the output folder or the ledger, or the temporary files of the run.

The canaries are private by construction: the schema never declares them. ``CANARY_ssn_5e1d`` sits in a source
column the schema does not declare, ``987654321`` in a column that is clipped to its last bucket, and the
out-of-domain and bad-text cases plant ``CANARY_oob_9c2b`` / ``CANARY_text_4a0e`` in declared columns. Counts
taken from the data are private too: cases with ``PRIVATE_COUNT`` bad rows (or records, when n is private)
check that this number is never printed. A value the schema declares is public and may be published.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import os
import re
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

ROOT = Path(__file__).resolve().parents[2]

CANARY_COLUMN_VALUE = "CANARY_ssn_5e1d"
"""In the undeclared source column ``ssn`` of every table."""
CANARY_OUT_OF_DOMAIN = "CANARY_oob_9c2b"
"""An undeclared value planted in the declared categorical column by the out-of-domain cases."""
CANARY_TEXT = "CANARY_text_4a0e"
"""Text planted in a numeric column by the type-mismatch cases."""
CANARY_NUMBER = 987654321
"""In the clipped numeric column ``income`` of every table (clipped into the last bucket, never published)."""
PRIVATE_COUNT = 1237
"""Bad rows (or records, when n is private) of the cases that check that counts from the data stay private."""

CANARY_STRINGS = (CANARY_COLUMN_VALUE, CANARY_OUT_OF_DOMAIN, CANARY_TEXT)

ROWS = 1000
"""Records of the standard table: small, yet enough for the release's utility forecast to accept it (at 48 rows
``dqrelease run`` refuses an MWEM release at epsilon = 1 as no better than publishing zeros)."""

COLUMNS = ("city", "income", "flag", "ssn")
"""Columns of the standard table; ``ssn`` is not declared in the schema."""


# ---------------------------------------------------------------------- the standard workspace
def base_schema() -> dict[str, Any]:
    """Three declared columns: a categorical, a clipped integer, a binary flag."""
    return {
        "columns": [
            {"name": "city", "type": "categorical", "values": ["north", "south", "east"]},
            {"name": "income", "type": "integer", "edges": [0, 100, 1000], "out_of_range": "clip"},
            {"name": "flag", "type": "binary"},
        ]
    }


def base_rows(rows: int = ROWS) -> list[dict[str, str]]:
    """The standard table: every fifth income is the canary number, every ssn a canary string."""
    cities = ("north", "south", "east")
    return [
        {
            "city": cities[i % 3],
            "income": str(CANARY_NUMBER if i % 5 == 0 else (i * 37) % 1000),
            "flag": str(i % 2),
            "ssn": f"{CANARY_COLUMN_VALUE}-{i:03d}",
        }
        for i in range(rows)
    ]


def base_config(rows: int = ROWS) -> dict[str, Any]:
    """A seeded MWEM release of the standard table: 3 rounds, all 2-way marginals, a cap of ten releases."""
    return {
        "name": "abuse",
        "schema_file": "schema.toml",
        "source": {"format": "csv", "paths": ["data.csv"]},
        "privacy": {"n": rows, "epsilon": 1.0, "delta": 1e-6},
        "workload": {"kind": "all_kway", "k": 2},
        "mechanism": {"name": "mwem", "rounds": 3},
        "ledger": {
            "path": "ledger.duckdb", "dataset_id": "abuse", "initial_cap_epsilon": 10.0, "initial_cap_delta": 1e-4,
        },
        "output": {"directory": "out"},
        "run": {"seed_mode": "seeded", "seed": 4242},
        "accuracy": {"worst_one_way_cell": 1.0},  # a small table: the default target needs about 5,000 rows
    }


def csv_text(rows: list[dict[str, str]], columns: tuple[str, ...] = COLUMNS, *, newline: str = "\n") -> str:
    """Rows as CSV text (values are plain: no quoting needed in this corpus)."""
    lines = [",".join(columns)] + [",".join(row[c] for c in columns) for row in rows]
    return newline.join(lines) + newline


def toml_text(document: dict[str, Any]) -> str:
    """A small TOML writer for the corpus's configs and schemas (tables, arrays of tables, scalars, lists)."""
    lines: list[str] = []

    def scalar(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            if math.isnan(value):
                return "nan"
            return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
        if isinstance(value, str):
            return json.dumps(value)
        if isinstance(value, list):
            return "[" + ", ".join(scalar(v) for v in value) + "]"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{json.dumps(k)} = {scalar(v)}" for k, v in value.items()) + "}"
        raise TypeError(f"cannot write {type(value).__name__} as TOML")

    def table(prefix: str, body: dict[str, Any]) -> None:
        plain = {k: v for k, v in body.items() if not _is_table(v) and not _is_table_array(v)}
        for key, value in plain.items():
            lines.append(f"{json.dumps(key)} = {scalar(value)}")
        for key, value in body.items():
            name = f"{prefix}.{json.dumps(key)}" if prefix else json.dumps(key)
            if _is_table(value):
                lines.append(f"\n[{name}]")
                table(name, value)
            elif _is_table_array(value):
                for item in value:
                    lines.append(f"\n[[{name}]]")
                    table(name, item)

    table("", document)
    return "\n".join(lines) + "\n"


def _is_table(value: Any) -> bool:
    return isinstance(value, dict)


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


@dataclass
class Workspace:
    """A release's folder: ``schema.toml``, ``data.csv``, ``release.toml``, ``ledger.duckdb``, ``out/``."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "release.toml"

    @property
    def schema(self) -> Path:
        return self.root / "schema.toml"

    @property
    def data(self) -> Path:
        return self.root / "data.csv"

    @property
    def out(self) -> Path:
        return self.root / "out"

    @property
    def ledger(self) -> Path:
        return self.root / "ledger.duckdb"

    @property
    def tmp(self) -> Path:
        """The temporary folder of in-process runs (``tempfile.tempdir``), scanned for leaks."""
        return self.root / "tmp"

    def write(
        self,
        *,
        config: dict[str, Any] | None = None,
        schema: dict[str, Any] | None = None,
        rows: list[dict[str, str]] | None = None,
    ) -> Workspace:
        """Write whichever of the three files is given."""
        if config is not None:
            self.config.write_text(toml_text(config))
        if schema is not None:
            self.schema.write_text(toml_text(schema))
        if rows is not None:
            self.data.write_text(csv_text(rows))
        return self

    def releases(self) -> list[Path]:
        folder = self.out / "releases"
        return sorted(folder.iterdir()) if folder.is_dir() else []

    def output_files(self) -> list[Path]:
        """Every file under ``out/`` (published, internal, staging, working databases)."""
        return sorted(p for p in self.out.rglob("*") if p.is_file()) if self.out.is_dir() else []


def make_workspace(root: Path, *, rows: int = ROWS) -> Workspace:
    """The standard workspace in ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    workspace = Workspace(root)
    workspace.tmp.mkdir(exist_ok=True)
    return workspace.write(config=base_config(rows), schema=base_schema(), rows=base_rows(rows))


# ---------------------------------------------------------------------- running the CLI
@dataclass
class Outcome:
    """What one CLI invocation left behind (besides files)."""

    exit_code: int
    stdout: str
    stderr: str
    started: datetime
    records: list[str] = field(default_factory=list)
    """Every log record emitted during the run (any logger, any level), formatted with its traceback."""


class _Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []
        self.console = io.StringIO()
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(self.format(record))
        except Exception:  # a record that cannot be formatted is still recorded by its raw parts
            self.lines.append(f"{record.levelname} {record.name} {record.msg!r} {record.args!r}")


def _console_handlers() -> list[logging.StreamHandler]:
    """Prefect's console handlers, wherever its logging config attached them."""
    loggers = [logging.getLogger(), *(
        logger for logger in logging.Logger.manager.loggerDict.values() if isinstance(logger, logging.Logger)
    )]
    return [
        handler for logger in loggers for handler in logger.handlers
        if type(handler).__name__ == "PrefectConsoleHandler"
    ]


@contextmanager
def _recording_logs(tmp: Path) -> Iterator[_Recorder]:
    """Record every log record; Prefect at its user default level (INFO); temporary files go to ``tmp``.

    Prefect's console handlers write into the recorder's ``console`` buffer meanwhile. In-process, which stream
    they hold depends on when Prefect was first imported in the session, and whether a real CLI process shows
    them depends on its startup, which an in-process run cannot reproduce: the whole-process stderr of a
    refusal is checked by ``test_processes.py`` instead, and these lines are scanned for leaks.
    """
    recorder = _Recorder()
    loggers = [logging.getLogger(), logging.getLogger("prefect")]
    prefect_level = loggers[1].level
    saved_tempdir = tempfile.tempdir
    consoles = [(handler, handler.stream, getattr(handler, "console", None)) for handler in _console_handlers()]
    for handler, _, console in consoles:
        handler.stream = recorder.console
        if console is not None:
            console.file = recorder.console
    for logger in loggers:
        logger.addHandler(recorder)
    loggers[1].setLevel(logging.INFO)
    tempfile.tempdir = str(tmp)
    try:
        yield recorder
    finally:
        tempfile.tempdir = saved_tempdir
        loggers[1].setLevel(prefect_level)
        for logger in loggers:
            logger.removeHandler(recorder)
        for handler, stream, console in consoles:
            handler.stream = stream
            if console is not None:
                console.file = stream


def run_cli(workspace: Workspace, *args: str) -> Outcome:
    """Run ``dqrelease ARGS`` in-process (CliRunner) with the workspace as current directory."""
    from typer.testing import CliRunner

    from dqrelease.cli import app

    started = datetime.now(UTC)
    workspace.tmp.mkdir(exist_ok=True)
    cwd = Path.cwd()
    os.chdir(workspace.root)
    try:
        with _recording_logs(workspace.tmp) as recorder:
            result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    finally:
        os.chdir(cwd)
    return Outcome(
        exit_code=result.exit_code, stdout=result.stdout, stderr=result.stderr, started=started,
        records=[*recorder.lines, recorder.console.getvalue()],
    )


# ---------------------------------------------------------------------- ledger state
def ledger_state(path: Path) -> Any:
    """The ledger's caps and charges (every row of those tables, read-only); ``{}`` when there is no ledger yet.

    A file that is not a DuckDB database is represented by its hash, a directory by ``"directory"``.
    """
    if path.is_dir():
        return "directory"
    if not path.exists():
        return {}
    try:
        with duckdb.connect(str(path), read_only=True) as con:
            tables = [
                row[0] for row in con.execute(
                    "select table_name from information_schema.tables where table_type = 'BASE TABLE'"
                ).fetchall()
                if "cap" in row[0] or "charge" in row[0]
            ]
            state = {
                name: sorted(map(repr, con.execute(f'select * from "{name}"').fetchall()))  # names from the catalog
                for name in sorted(tables)
            }
            return {name: rows for name, rows in state.items() if rows}
    except duckdb.Error:
        return {"bytes": hashlib.sha256(path.read_bytes()).hexdigest()}


def charges(path: Path, dataset_id: str = "abuse") -> list[dict[str, Any]]:
    """The dataset's charges (empty when the ledger or the dataset does not exist)."""
    if not path.exists():
        return []
    from dqrelease.ledger import Ledger

    budgets = Ledger(path, lock_timeout=5).budgets(dataset_id)
    return [charge.as_dict() for charge in budgets[0].charges] if budgets else []


# ---------------------------------------------------------------------- the checks
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\s+File \"", re.MULTILINE)


def all_of(*patterns: str) -> str:
    """A regex that matches a line containing every pattern, in any order."""
    return "".join(f"(?=.*{p})" for p in patterns)


def stderr_lines(text: str) -> list[str]:
    """Stderr's non-blank lines besides the run's plain progress lines (:data:`dqrelease.cli.live.PLAIN_PREFIX`).

    Outside a terminal, ``run`` prints a line per stage as it goes; a refusal is the one line that is not one of
    them (the progress lines are still checked for leaks with the rest of the output).
    """
    from dqrelease.cli.live import PLAIN_PREFIX

    return [line for line in text.splitlines() if line.strip() and not re.match(PLAIN_PREFIX, line)]


def expect_refusal(
    workspace: Workspace,
    outcome: Outcome,
    *,
    code: int,
    problem: str,
    fix: str,
    ledger_before: Any,
    charged: int = 0,
    extra_secrets: tuple[str, ...] = (),
    outputs_before: list[Path] | None = None,
    one_line: bool = True,
) -> None:
    """A refusal: exit ``code``, one stderr line matching ``problem`` and ``fix``, no output, ledger as before.

    Args:
        workspace: The case's workspace.
        outcome: The run.
        code: Expected exit code.
        problem: Regex the stderr line must match: what is wrong (a key, a column, a file...).
        fix: Regex the stderr line must match: what to do.
        ledger_before: :func:`ledger_state` before the run.
        charged: Charges the run may add (a noisy count charged before a later refusal); 0: ledger unchanged.
        extra_secrets: Further private strings of this case.
        outputs_before: Files under ``out/`` before the run (an earlier release): they must be all that is left.
        one_line: False leaves the line count to a separate test (stderr's first line must still be the refusal).
    """
    context = f"exit {outcome.exit_code}\n--- stderr ---\n{outcome.stderr}\n--- stdout ---\n{outcome.stdout}"
    assert outcome.exit_code == code, context
    lines = stderr_lines(outcome.stderr)
    _transcribe(code, outcome.stderr)
    assert lines, f"nothing on stderr\n{context}"
    if one_line:
        assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}\n{context}"
    assert re.search(problem, lines[0], re.IGNORECASE), f"the line does not name the problem /{problem}/\n{context}"
    assert re.search(fix, lines[0], re.IGNORECASE), f"the line does not name the fix /{fix}/\n{context}"
    assert not TRACEBACK.search(outcome.stdout + outcome.stderr), context
    if outputs_before is None:
        assert_nothing_published(workspace)
    else:
        assert workspace.output_files() == outputs_before, "the refused run changed the files under out/"
    if charged == 0:
        assert ledger_state(workspace.ledger) == ledger_before, "the ledger changed"
    else:
        assert len(charges(workspace.ledger)) == _charge_count(ledger_before) + charged
    assert_no_leaks(workspace, outcome, extra_secrets=extra_secrets)


def _transcribe(code: int, stderr: str) -> None:
    """With ABUSE_CORPUS_TRANSCRIPT=FILE, append ``<test id> | <exit code> | <stderr>`` (for docs/robustness.md)."""
    target = os.environ.get("ABUSE_CORPUS_TRANSCRIPT")
    if target:
        case = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(f"{case} | {code} | {stderr.strip()}\n")


def expect_release(
    workspace: Workspace, outcome: Outcome, *, ledger_before: Any, charged: int = 1, extra_secrets: tuple[str, ...] = ()
) -> Path:
    """A success: exit 0, one more complete release and internal folder, ``charged`` more charges, no leak.

    Returns:
        The new release folder.
    """
    context = f"exit {outcome.exit_code}\n--- stderr ---\n{outcome.stderr}\n--- stdout ---\n{outcome.stdout}"
    assert outcome.exit_code == 0, context
    assert not TRACEBACK.search(outcome.stdout + outcome.stderr), context
    release = workspace.releases()[-1]
    assert_complete_release(workspace, release)
    assert_no_staging_left(workspace)
    assert len(charges(workspace.ledger)) == _charge_count(ledger_before) + charged
    assert_no_leaks(workspace, outcome, extra_secrets=extra_secrets)
    return release


def _charge_count(state: Any) -> int:
    if not isinstance(state, dict) or "bytes" in state:
        return 0
    return sum(len(rows) for name, rows in state.items() if "charge" in name)


def assert_nothing_published(workspace: Workspace) -> None:
    """No file in ``releases/``, ``internal/`` or ``.staging/``, and no working database left behind."""
    left = [str(p.relative_to(workspace.out)) for p in workspace.output_files()]
    assert left == [], f"files left under out/: {left}"


def assert_no_staging_left(workspace: Workspace) -> None:
    staging = workspace.out / ".staging"
    left = sorted(p.name for p in staging.iterdir()) if staging.is_dir() else []
    assert left == [], f"staging leftovers: {left}"
    stray = [p.name for p in workspace.out.glob("*.duckdb*")] if workspace.out.is_dir() else []
    assert stray == [], f"working database left in out/: {stray}"


def assert_complete_release(workspace: Workspace, release: Path) -> None:
    """The release folder holds every output its internal manifest lists, with the recorded hashes."""
    from dqrelease.inputs.config import file_sha256

    internal = workspace.out / "internal" / release.name
    manifest = json.loads((internal / "manifest.json").read_text())
    assert (release / "release.json").is_file()
    for fmt, info in manifest["outputs"].items():
        path = release / Path(info["path"]).name
        assert path.is_file(), f"{fmt} output missing from {release.name}"
        assert file_sha256(path) == info["sha256"], f"{fmt} output differs from the manifest"
    for name in ("error_report.json", "error_report.md", "error_report.html"):
        assert (internal / name).is_file(), f"{name} missing"


# ---------------------------------------------------------------------- leaks
def _number_pattern(number: int) -> re.Pattern[str]:
    digits = str(number)
    grouped = f"{number:,}"
    scientific = f"{number:.8e}".split("e")[0].rstrip("0")
    forms = "|".join(re.escape(f) for f in (digits, grouped, scientific + "e"))
    return re.compile(rf"(?<![\w.\-])(?:{forms})(?![\w\-])")


_NUMBER_PATTERNS = {CANARY_NUMBER: _number_pattern(CANARY_NUMBER), PRIVATE_COUNT: _number_pattern(PRIVATE_COUNT)}
_CANARY_BYTES = [s.encode() for s in CANARY_STRINGS] + [
    struct.pack(fmt, CANARY_NUMBER) for fmt in ("<i", "<q", "<d")
] + [str(CANARY_NUMBER).encode()]


def find_canaries(text: str, *, counts: bool = True, extra: tuple[str, ...] = ()) -> list[str]:
    """The canaries found in ``text`` (strings case-insensitively; numbers as whole tokens)."""
    found = [s for s in (*CANARY_STRINGS, *extra) if s.lower() in text.lower()]
    for number, pattern in _NUMBER_PATTERNS.items():
        if (counts or number == CANARY_NUMBER) and pattern.search(text):
            found.append(str(number))
    return found


def file_texts(path: Path) -> list[str]:
    """The text views of a file: its bytes decoded, and the values of a Parquet or DuckDB table."""
    data = path.read_bytes()
    texts = [data.decode("utf-8", errors="replace")]
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            texts.append(repr(pq.read_table(path).to_pylist()))
        except Exception as error:  # an unreadable file still gets its bytes scanned
            texts.append(f"unreadable parquet: {type(error).__name__}")
    if data[8:12] == b"DUCK":
        try:
            with duckdb.connect(str(path), read_only=True) as con:
                for (schema, name) in con.execute(
                    "select table_schema, table_name from information_schema.tables"
                ).fetchall():
                    texts.append(repr(con.execute(f'select * from "{schema}"."{name}"').fetchall()))
        except duckdb.Error as error:
            texts.append(f"unreadable duckdb: {type(error).__name__}")
    return texts


def binary_canaries(path: Path) -> list[str]:
    data = path.read_bytes()
    return [repr(b) for b in _CANARY_BYTES if b in data]


def prefect_texts(since: datetime) -> list[str]:
    """Logs, artifacts, parameters and state messages of the flow runs that started since ``since``."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterStartTime,
        LogFilter,
        LogFilterFlowRunId,
    )
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    texts: list[str] = []
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(start_time=FlowRunFilterStartTime(after_=since)))
        ids = [run.id for run in runs]
        if not ids:
            return texts
        for run in runs:
            texts.append(str(run.state.message if run.state else ""))
            texts.append(json.dumps(run.parameters, default=str))
        for task_run in client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=ids))):
            texts.append(str(task_run.state.message if task_run.state else ""))
        offset = 0
        while True:
            page = client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=ids)), limit=200, offset=offset
            )
            texts += [log.message for log in page]
            if len(page) < 200:
                break
            offset += 200
        for artifact in client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=ids))
        ):
            texts.append(json.dumps(artifact.data, default=str) + " " + str(artifact.description))
    return texts


def assert_no_leaks(
    workspace: Workspace,
    outcome: Outcome,
    *,
    extra_secrets: tuple[str, ...] = (),
    prefect: bool = True,
    files: bool = True,
) -> None:
    """No canary in anything the run wrote or printed (see the module docstring).

    ``prefect=False`` skips the Prefect server's records, ``files=False`` the files (a killed run's staging
    folder legitimately holds the raw table until the next run removes it).
    """
    found: dict[str, list[str]] = {}

    def check(where: str, text: str, *, counts: bool = True) -> None:
        hits = find_canaries(text, counts=counts, extra=extra_secrets)
        if hits:
            found.setdefault(where, []).extend(hits)

    check("stdout", outcome.stdout)
    check("stderr", outcome.stderr)
    for line in outcome.records:
        check("log record", line)
    if prefect and _prefect_reachable():
        for text in prefect_texts(outcome.started):
            check("prefect", text)
    paths = [*workspace.output_files(), *(p for p in workspace.tmp.rglob("*") if p.is_file())] if files else []
    if files and workspace.ledger.is_file():
        paths.append(workspace.ledger)
    for path in paths:
        # the internal report may hold counts (internal numbers), never raw values
        counts = not (path.parent.parent.name == "internal" and path.name.startswith("error_report"))
        for text in file_texts(path):
            check(str(path.relative_to(workspace.root)), text, counts=counts)
        hits = binary_canaries(path)
        if hits:
            found.setdefault(str(path.relative_to(workspace.root)), []).extend(hits)
    assert not found, f"private values leaked: {found}"


def _prefect_reachable() -> bool:
    from prefect.settings import PREFECT_API_URL

    return bool(PREFECT_API_URL.value())
