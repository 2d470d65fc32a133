"""Lazy re-exports for a package's ``__init__`` (PEP 562): a name's module is imported on first use.

``dq_engine`` and ``dq_engine.oracle`` re-export their public names this way, so that importing the package (or one
light submodule such as ``dq_engine.errors``, which imports the package first) loads neither numpy's heavy users nor
OR-Tools: a refusal of a bad config stays fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose names live in the modules ``exports`` maps them to.

    Args:
        package: The package's name (for the error message).
        exports: Public name -> the module that defines it.
        namespace: The package's ``globals()``: a name is cached there once imported.
    """

    def __getattr__(name: str) -> object:  # noqa: N807 - the module-level hook's name
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:  # noqa: N807 - the module-level hook's name
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
