"""A public table of German credit's shape (1,000 rows, 21 columns), written as a release workspace.

Only the shape matters to the forecast; the values are synthetic (seeded): column j copies column j-1's value
(modulo its size) with probability 0.5, else draws from a skewed distribution, so pairs are correlated.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

ROWS = 1_000
SIZES = (4, 10, 5, 10, 10, 5, 5, 4, 4, 3, 4, 4, 10, 3, 3, 4, 4, 2, 2, 2, 2)
"""German credit's 21 columns (numeric ones in 10 buckets), as categorical sizes."""

MECHANISM = """
name = "dualquery"
eta = 1.0
samples = 300

[mechanism.fit]
enabled = false
"""
"""The issue's case: DualQuery's raw records with the examples' eta and s."""


def german_rows(seed: int = 7) -> np.ndarray:
    """Codes of the synthetic table, shape ``(ROWS, 21)``."""
    rng = np.random.default_rng(seed)
    columns = [rng.integers(0, SIZES[0], ROWS)]
    for size in SIZES[1:]:
        fresh = rng.choice(size, size=ROWS, p=rng.dirichlet(np.full(size, 0.7)))
        columns.append(np.where(rng.random(ROWS) < 0.5, columns[-1] % size, fresh))
    return np.stack(columns, axis=1)


def write_workspace(
    directory: Path, *, mechanism: str = MECHANISM, epsilon: float = 1.0, data: str | None = None
) -> Path:
    """Schema, data and config of a German-credit-shaped release in ``directory``; returns the config's path.

    Args:
        directory: Where to write.
        mechanism: The ``[mechanism]`` section's body (default: the issue's raw DualQuery).
        epsilon: ``privacy.epsilon``.
        data: CSV text to write instead of the synthetic table (e.g. one that cannot be read).
    """
    schema = ["# German-credit-shaped public schema (synthetic values)"]
    for j, size in enumerate(SIZES):
        values = ", ".join(f'"v{v}"' for v in range(size))
        schema += ["[[columns]]", f'name = "c{j:02d}"', 'type = "categorical"', f"values = [{values}]", ""]
    (directory / "schema.toml").write_text("\n".join(schema))
    if data is None:
        header = ",".join(f"c{j:02d}" for j in range(len(SIZES)))
        body = "\n".join(",".join(f"v{v}" for v in row) for row in german_rows())
        data = f"{header}\n{body}\n"
    (directory / "german.csv").write_text(data)
    config = directory / "release.toml"
    config.write_text(f"""
name = "german-shape"
schema_file = "schema.toml"

[source]
format = "csv"
paths = ["german.csv"]
header = true

[privacy]
n = {ROWS}
epsilon = {epsilon}
delta = 1e-9
accounting = "tight"

[mechanism]
{mechanism}

[ledger]
path = "ledger.duckdb"
dataset_id = "german"
initial_cap_epsilon = 20.0
initial_cap_delta = 1e-6

[output]
directory = "out"

[run]
seed_mode = "seeded"
seed = 11
""")
    return config
