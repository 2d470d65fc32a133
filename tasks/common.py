"""Task and flow defaults shared by every dqrelease task and flow.

Tasks are never cached and never persist results: a cache must never replay a mechanism's output without
the ledger knowing, and results hold private data (the raw table, true answers).

Flows persist nothing either (``persist_result=False``), and their failures neither
(:func:`failures_not_persisted`): Prefect 3 pickles a flow's exception into its local result storage
(``$PREFECT_HOME/storage``) whatever ``persist_result`` says, outside the run's own folders.

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


def failures_not_persisted(function: Callable[P, R]) -> Callable[P, R]:
    """Decorate a flow function (under ``@flow``): a failure becomes a ``Failed`` state that is never written.

    An exception raised by a flow function is pickled into Prefect's result storage before the run ends (Prefect
    3's flow engine writes it even with ``persist_result=False``). Returned as a ``Failed`` state instead, it is
    kept in memory only: the flow's caller still gets the same exception object when the flow ends (so the CLI's
    exit codes hold), and the Prefect server records the state's one-line message: a named error's message (written
    never to contain data), else the exception's type only, unless debugging (as :func:`private_errors`).
    """

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except Exception as error:
            from prefect.states import Failed

            shown = f"{type(error).__name__}: {error}" if isinstance(error, ReleaseError) or debugging() else (
                type(error).__name__)
            return Failed(data=error, message=shown)

    return wrapper


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
