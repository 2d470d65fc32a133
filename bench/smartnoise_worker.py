"""Runs one smartnoise-synth synthesizer (MST or AIM) inside the separate smartnoise venv.

Called by ``bench/smartnoise_compare.py`` as ``.venv-smartnoise/bin/python bench/smartnoise_worker.py SPEC``;
imports only numpy, pandas and snsynth (never dq_engine, which the smartnoise venv does not have).

``SPEC`` is a JSON file: ``codes`` (CSV of integer codes, one column per attribute, with a header),
``synthesizer`` (``"mst"`` or ``"aim"``), ``epsilon``, ``delta``, ``seed``, ``marginals`` (AIM's workload: lists
of column names; MST selects its own 2-way marginals and ignores it), ``rounds`` (AIM's round cap, None =
its default 16 · attributes) and ``out`` (CSV path for the synthetic
codes). Every column is declared categorical, so no budget goes to preprocessing (``preprocessor_eps = 0``).
The result JSON (next to ``out``) holds the fit and sample times measured in this process (after the imports).

smartnoise draws its noise through OpenDP (OS randomness, not seedable); ``seed`` seeds numpy's global
generator, which AIM's and MST's own choices use.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    began = time.perf_counter()
    from snsynth.aim import AIMSynthesizer
    from snsynth.mst import MSTSynthesizer

    import_seconds = time.perf_counter() - began
    np.random.seed(spec["seed"])
    frame = pd.read_csv(spec["codes"])
    columns = list(frame.columns)
    if spec["synthesizer"] == "aim":
        position = {name: f"col{i}" for i, name in enumerate(columns)}
        workload = [tuple(position[a] for a in marginal) for marginal in spec["marginals"]]
        AIMSynthesizer.get_workload = staticmethod(lambda *args, **kwargs: workload)  # the bench's workload
        synthesizer = AIMSynthesizer(epsilon=spec["epsilon"], delta=spec["delta"], rounds=spec.get("rounds"))
    else:
        synthesizer = MSTSynthesizer(epsilon=spec["epsilon"], delta=spec["delta"])
    began = time.perf_counter()
    synthesizer.fit(frame, categorical_columns=columns, preprocessor_eps=0.0)
    fit_seconds = time.perf_counter() - began
    began = time.perf_counter()
    synthetic = synthesizer.sample(len(frame))
    sample_seconds = time.perf_counter() - began
    synthetic = pd.DataFrame(synthetic, columns=columns) if not isinstance(synthetic, pd.DataFrame) else synthetic
    out = Path(spec["out"])
    synthetic[columns].to_csv(out, index=False)
    out.with_suffix(".json").write_text(json.dumps({"import_seconds": import_seconds, "fit_seconds": fit_seconds,
                                                    "sample_seconds": sample_seconds, "rows": len(synthetic)}))


if __name__ == "__main__":
    main(sys.argv[1])
