"""Task defaults shared by every dqrelease task.

Tasks are never cached and never persist results: a cache must never replay a mechanism's output without
the ledger knowing, and results hold private data (the raw table, true answers).

Tasks that touch private data are wrapped by :func:`private_errors`: an unexpected exception (whose message
could quote a data value, e.g. a parse error) reaches Prefect's logs and the CLI only as its type, unless
``DQRELEASE_DEBUG=1`` is set (what ``dqrelease --debug`` does). Named :class:`~dqrelease.errors.ReleaseError`
messages are written never to contain data, so they pass through unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from prefect.cache_policies import NO_CACHE

from dqrelease.errors import InternalError, ReleaseError, debugging

TASK_OPTIONS = {"cache_policy": NO_CACHE, "persist_result": False}

P = ParamSpec("P")
R = TypeVar("R")


def private_errors(function: Callable[P, R]) -> Callable[P, R]:
    """Replace unexpected exceptions by a value-free :class:`InternalError` (see the module docstring)."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except ReleaseError:
            raise
        except Exception as error:
            if debugging():
                raise
            raise InternalError(
                f"{function.__name__} failed with {type(error).__name__}; rerun with `dqrelease --debug` "
                "to see the traceback (it may quote private data)"
            ) from None

    return wrapper
