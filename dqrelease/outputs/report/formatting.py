"""Numbers for people: how the error report writes a figure or a share in its warnings, charts and pages.

The same two functions serve the report's numbers (:mod:`.data` writes its warnings with them), its charts
(:mod:`.charts`) and its pages (the templates' ``fmt`` and ``pct`` filters, :mod:`.render`).
"""

from __future__ import annotations

import math
import re

import numpy as np

__all__ = ["fmt", "pct"]


def fmt(value: float | int | None, digits: int = 3) -> str:
    """A number for people.

    ``n/a`` for None, ``yes`` / ``no`` for booleans, integers with separators, floats to ``digits`` significant
    digits, exponents without padding (``1e-9``, not ``1e-09``).
    """
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return f"{int(value):,}"
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    text = f"{value:.{digits}g}"
    return re.sub(r"e([+-])0*(\d)", lambda m: "e" + ("-" if m.group(1) == "-" else "") + m.group(2), text)


def pct(value: float | None) -> str:
    """A share as a percentage to 3 significant digits (``70.8%``); ``n/a`` for None."""
    if value is None:
        return "n/a"
    if value == 0:
        return "0%"
    return f"{100 * value:.3g}%" if abs(value) >= 1e-4 else f"{fmt(100 * value)}%"
