"""Runs one OpenDP synthesizer (MST or AIM, ``opendp.extras.mbi``) inside the separate peers venv.

Called by ``bench/fidelity.py`` as ``.venv-peers/bin/python bench/peers_worker.py SPEC.json``; imports only
numpy, polars and opendp (never dq_engine or dqrelease, which the peers venv does not have).

``SPEC.json`` holds:

* ``data``: an ``.npz`` with ``codes`` (integer value codes, one column per attribute, one row per record),
  ``names`` (column names) and ``sizes`` (each column's number of values);
* ``algorithm``: ``"mst"`` or ``"aim"``;
* ``rho``: the zCDP budget of the whole release (the caller passes ``largest_rho(ε, δ)``, so the peer runs at
  the same (ε, δ) as dqrelease's mechanisms);
* ``seed``: seeds numpy's generator for the synthesis step (OpenDP's noise comes from OS randomness and cannot
  be seeded);
* ``rows``: how many rows to synthesize;
* ``queries``: AIM's workload, lists of column names (the workload's marginals; MST selects its own 2-way
  marginals and ignores it);
* ``out``: the ``.npz`` path for the synthetic codes (``-1`` where OpenDP returned a null key: a value outside
  the declared keys) and the JSON path beside it for timings.

Every column is given its full key set ``0 .. size-1``, so OpenDP spends nothing on discovering keys. The
query asks for ``rho * (1 - 1e-9)`` (OpenDP refuses a query that asks for the context's whole budget through
its own float rounding), and OpenDP 0.16's MST splits its budget with ``prior(x)`` (the next float below),
which still fails its own check ("insufficient budget for query") by float bookkeeping: the worker replaces
``prior`` in ``opendp.extras.mbi._mst`` by ``prior(x) * (1 - 1e-9)``, so MST asks for slightly *less* budget
than allowed at each step, never more. Synthesis uses ``method="sample"``: the default ``"round"`` couples
columns through the row order (OpenDP's docs).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

BUDGET_MARGIN = 1e-9
"""Relative margin by which the query and MST's selection steps ask for less than the budget they may use."""


def _patch_mst_budget_split() -> None:
    """Make OpenDP 0.16's MST split its budget with a margin (it otherwise fails from float bookkeeping)."""
    import opendp.extras.mbi._mst as mst

    original = mst.prior

    def prior_with_margin(x: float) -> float:
        return original(x) * (1.0 - BUDGET_MARGIN)

    mst.prior = prior_with_margin


def installed_versions(names: tuple[str, ...]) -> dict[str, str | None]:
    """The installed version of each package (None when it is not installed): the peers' figures depend on them."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def run(spec: dict) -> dict:
    """Fit the synthesizer on the codes and sample ``rows`` rows; returns the timings (codes written to ``out``)."""
    began = time.perf_counter()
    from importlib.metadata import version

    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    _patch_mst_budget_split()
    imported = time.perf_counter()

    with np.load(spec["data"]) as archive:
        codes = archive["codes"]
        names = [str(name) for name in archive["names"]]
        sizes = [int(size) for size in archive["sizes"]]
    frame = pl.DataFrame({name: codes[:, j].astype(np.int64) for j, name in enumerate(names)})
    keys = {name: list(range(size)) for name, size in zip(names, sizes, strict=True)}
    rho = float(spec["rho"])
    if spec["algorithm"] == "mst":
        algorithm = dp.mbi.MST()
    elif spec["algorithm"] == "aim":
        queries = [dp.mbi.Count(by=tuple(columns)) for columns in spec["queries"]]
        algorithm = dp.mbi.AIM(queries=queries)
    else:
        raise ValueError(f"algorithm ({spec['algorithm']!r}) must be 'mst' or 'aim'")
    loaded = time.perf_counter()

    context = dp.Context.compositor(
        data=frame.lazy(), privacy_unit=dp.unit_of(changes=1), privacy_loss=dp.loss_of(rho=rho)
    )
    table = context.query(rho=rho * (1.0 - BUDGET_MARGIN)).contingency_table(keys=keys, algorithm=algorithm).release()
    fitted = time.perf_counter()

    np.random.seed(int(spec["seed"]))  # the synthesis step's sampling draws from numpy's global generator
    synthetic = table.synthesize(rows=int(spec["rows"]), method="sample")
    out = np.full((synthetic.height, len(names)), -1, dtype=np.int64)
    for j, name in enumerate(names):
        out[:, j] = synthetic[name].cast(pl.Int64).fill_null(-1).to_numpy()
    sampled = time.perf_counter()
    np.savez_compressed(spec["out"], codes=out)
    return {
        "import_seconds": imported - began,
        "load_seconds": loaded - imported,
        "fit_seconds": fitted - loaded,
        "sample_seconds": sampled - fitted,
        "seconds": sampled - loaded,
        "rho": rho,
        "rho_asked": rho * (1.0 - BUDGET_MARGIN),
        "opendp": version("opendp"),
        "mbi": version("mbi"),
        "packages": installed_versions(("opendp", "mbi", "jax", "jaxlib", "numpy", "pandas", "polars")),
        "null_rows": int((out < 0).any(axis=1).sum()),
    }


def main(spec_path: str) -> None:
    """Read the spec, run, write the timings JSON beside ``out``."""
    spec = json.loads(Path(spec_path).read_text())
    timings = run(spec)
    Path(spec["out"]).with_suffix(".json").write_text(json.dumps(timings, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
