r"""The registry's table: every mechanism by its ``mechanism.name``, filled once by :mod:`dqrelease.mechanisms`.

:mod:`dqrelease.mechanisms` (the package) imports every mechanism module and :func:`register`\ s its entries in the
order the docs list them, the default first. Code that needs *other* mechanisms at call time -- ``auto`` plans the
one it chooses, a refusal recommends one whose forecast passes -- looks them up here by name, so no mechanism module
imports the package that lists them all.
"""

from __future__ import annotations

from dqrelease.mechanisms.base import Mechanism

__all__ = ["DEFAULT_MECHANISM", "MECHANISMS", "mechanism", "register"]

MECHANISMS: dict[str, Mechanism] = {}
"""Every mechanism by its ``mechanism.name``, in the order the docs list them (the default first)."""

DEFAULT_MECHANISM = "dualquery"


def register(*entries: Mechanism) -> None:
    """Add mechanisms to :data:`MECHANISMS`, in order.

    Raises:
        ValueError: A name is registered twice.
    """
    for entry in entries:
        if entry.name in MECHANISMS:
            raise ValueError(f"mechanism {entry.name!r} is registered twice")
        MECHANISMS[entry.name] = entry


def mechanism(name: str) -> Mechanism:
    """The registered mechanism called ``name``.

    Raises:
        KeyError: With the list of names, if there is none.
    """
    if name not in MECHANISMS:
        raise KeyError(f"no mechanism {name!r}; choose one of {', '.join(MECHANISMS)}")
    return MECHANISMS[name]
