"""The small slice of Adult that the end-to-end tests release (``tests/pipeline``, ``tests/cli``).

:func:`write_slice` writes its first 1,500 records as ``adult-slice.csv``, :func:`source_section` is a config's
``[source]`` section that reads them, and :func:`release_config` is the seeded DualQuery release of the slice that
the release-flow, Dask and refusal tests run (its keys can be overridden one by one).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT / "examples" / "adult"
SLICE_ROWS = 1500
SLICE_FILE = "adult-slice.csv"
UNDECLARED_WORKCLASS = "Moonlighting-Zebra"
"""A workclass the schema does not declare (a validation failure must name the column, never the value)."""


def write_slice(folder: Path, *, undeclared_value: bool = False) -> Path:
    """Write the slice to ``folder / adult-slice.csv``; with ``undeclared_value`` its 6th record's workclass is
    :data:`UNDECLARED_WORKCLASS`."""
    lines = (ADULT / "data" / "adult.data").read_text().splitlines()[:SLICE_ROWS]
    if undeclared_value:
        lines[5] = lines[5].replace("Private", UNDECLARED_WORKCLASS, 1)
    path = folder / SLICE_FILE
    path.write_text("\n".join(lines) + "\n")
    return path


def source_section(paths: str = f'["{SLICE_FILE}"]') -> str:
    """The ``[source]`` section of a config that reads ``paths`` (a TOML list) as Adult's headerless CSV."""
    return f"""[source]
format = "csv"
paths = {paths}
header = false
column_names = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
  "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "income"]"""


def release_config(**overrides: str) -> str:
    """A seeded DualQuery release of the slice (ledger, outputs and source relative to the config's folder).

    Each override replaces one value as TOML text: ``source_paths``, ``n``, ``epsilon``, ``rounds`` (a whole line
    of ``[mechanism]``), ``oracle`` (the body of ``[mechanism.oracle]``), ``cap`` (the ledger's initial cap
    lines), ``extra`` (top-level lines), ``samples``, ``ledger`` (the ledger file) and ``run`` (the body of
    ``[run]``; seeded by default, so a run needs ``--seeded-test-or-audit`` and each seed is charged once per
    ledger).
    """
    values = {
        "source_paths": f'["{SLICE_FILE}"]',
        "n": str(SLICE_ROWS),
        "epsilon": "1.0",
        "rounds": "",
        "oracle": 'kind = "portfolio"\ntime_limit = 0.5\nnum_workers = 2\nlocal_restarts = 3\n'
        "deterministic_time_limit = 0.2",
        "cap": "initial_cap_epsilon = 5.0\ninitial_cap_delta = 1e-5",
        "extra": "",
        "samples": "40",
        "ledger": "ledger.duckdb",
        "run": 'seed_mode = "seeded"\nseed = 918273645',
    }
    values.update(overrides)
    return f"""
name = "adult-test"
schema_file = "{ADULT / 'schema.toml'}"
{values['extra']}

{source_section(values['source_paths'])}

[privacy]
n = {values['n']}
epsilon = {values['epsilon']}
delta = 1e-6
accounting = "tight"

[workload]
kind = "random_marginals"
k = 3
count = 6
seed = 3

[mechanism]
name = "dualquery"
eta = 1.0
samples = {values['samples']}
{values['rounds']}

[mechanism.oracle]
{values['oracle']}

# a test table is small: the default accuracy target (worst one-way cell 0.05) needs about 5,000 rows at epsilon 1
[accuracy]
worst_one_way_cell = 1.0

[ledger]
path = "{values['ledger']}"
dataset_id = "adult-slice"
{values['cap']}

[output]
directory = "out"
rows = 400
numeric_values = "uniform"

[run]
{values['run']}
"""
