"""Imported only by :func:`tests.pipeline.side_helpers.import_marker` (a side-process warm-up under test)."""
