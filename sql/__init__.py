"""SQL models of the pipeline (one file per model), loaded by name."""
