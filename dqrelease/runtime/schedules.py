"""Scheduled releases: one release of a dataset at a time, and only the latest missed run caught up.

A deployment run of the release flow (what ``dqrelease serve`` schedules, or ``prefect deployment run`` starts) is
limited in Prefect's own terms, so that overlapping schedules never charge the ledger twice for one period:

* **Per deployment** (:func:`deployment_limit`): Prefect's deployment concurrency limit of 1 with the collision
  strategy ``ENQUEUE``. A run due while the deployment's previous run is running waits in Prefect's
  ``AwaitingConcurrencySlot`` state (enforced by the server when the run would become Pending); nothing is read or
  charged meanwhile.
* **Per dataset** (:func:`one_release_per_dataset`): a Prefect global concurrency limit of 1 named
  ``dqrelease-dataset-<ledger.dataset_id>`` (:func:`ensure_dataset_limit`: made by ``serve`` or the first run). A
  deployment run holds its slot from before the config's data is read until the run ends, waiting for it first, so
  two deployments of one dataset (two ``serve`` commands, or two configs charging one ``ledger.dataset_id``) never
  overlap either. The slot is a lease Prefect renews while the run lives (a crashed run's slot is freed when its
  lease expires).
* **Catch-up** (:func:`superseded_by`): a scheduled run is skipped (its state becomes Cancelled, nothing read or
  charged) when a later scheduled run of the same deployment is already due. After the server or ``serve`` was
  down, or while runs waited behind a long one, only the latest missed run is run, once; a run started by hand
  (``prefect deployment run``) is never skipped this way.

A flow run that is not a deployment run (``dqrelease run``, ``release(...)`` in Python) holds no slot: the operator
started it, and the ledger serializes every charge against the cap in one transaction whatever runs at once
(:mod:`dqrelease.ledger.store`; tests/robustness/test_concurrency.py races 16 such runs).

Prefect is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

__all__ = [
    "DATASET_LIMIT_PREFIX",
    "dataset_limit_name",
    "deployment_limit",
    "ensure_dataset_limit",
    "one_release_per_dataset",
    "superseded_by",
]

DATASET_LIMIT_PREFIX = "dqrelease-dataset-"
"""Name prefix of the per-dataset global concurrency limits (``dqrelease-dataset-<ledger.dataset_id>``)."""

P = ParamSpec("P")
R = TypeVar("R")


def deployment_limit() -> Any:
    """The deployment concurrency limit ``dqrelease serve`` gives its deployment: one run at a time, the next waits.

    ``ENQUEUE``, not ``CANCEL_NEW``: a waiting run is skipped anyway if a later one is due when it may start
    (:func:`superseded_by`), so a run due during a long release still happens, once, right after it.
    """
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy

    return ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.ENQUEUE)


def dataset_limit_name(dataset_id: str) -> str:
    """The global concurrency limit of one dataset (``ledger.dataset_id`` allows only letters, digits, ``_.-``)."""
    return f"{DATASET_LIMIT_PREFIX}{dataset_id}"


def ensure_dataset_limit(dataset_id: str) -> str:
    """Create the dataset's global concurrency limit with one slot unless it exists; return its name.

    Called by ``serve`` (so that ``prefect gcl inspect`` finds it at once) and by every deployment run (so that a
    deployment made otherwise is limited too); a concurrent creation by another run is fine. An existing limit is
    left as it is: an operator who changed it in Prefect meant it.
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    name = dataset_limit_name(dataset_id)
    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            with suppress(ObjectAlreadyExists):
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
    return name


def superseded_by(flow_run: Any) -> Any | None:
    """A later scheduled run of ``flow_run``'s deployment that is already due, if any (then ``flow_run`` is skipped).

    Only a run the deployment's schedule created (``auto_scheduled``) can be superseded, and only by another such
    run whose scheduled time is after its own and not in the future.
    """
    if flow_run.deployment_id is None or not flow_run.auto_scheduled:
        return None
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterExpectedStartTime,
    )

    window = FlowRunFilterExpectedStartTime(after_=flow_run.expected_start_time, before_=datetime.now(UTC))
    with get_client(sync_client=True) as client:
        later = client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[flow_run.deployment_id])),
            flow_run_filter=FlowRunFilter(expected_start_time=window),
        )
    due = [run for run in later if run.auto_scheduled and run.expected_start_time > flow_run.expected_start_time]
    return min(due, key=lambda run: run.expected_start_time, default=None)


@contextmanager
def _dataset_slot(dataset_id: str) -> Iterator[None]:
    """Hold the dataset's one slot (waiting for it) while the block runs."""
    from prefect.concurrency.sync import concurrency

    with concurrency(ensure_dataset_limit(dataset_id), occupy=1, strict=True):
        yield


def one_release_per_dataset(dataset_of: Callable[..., str]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a flow function (under ``@flow``): limit its deployment runs as the module docstring says.

    Outside a deployment run the function runs as it is. A deployment run waits for and holds its dataset's slot,
    and skips itself when a later scheduled run is due: it then returns Prefect's ``Cancelled`` state, whose message
    names the later run.

    Args:
        dataset_of: Called with the flow's arguments, returns the ``ledger.dataset_id`` the run charges (from the
            public config only; this module does not read configs).

    Returns:
        The decorator.
    """

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            from prefect.context import FlowRunContext

            context = FlowRunContext.get()
            flow_run = None if context is None else context.flow_run
            if flow_run is None or flow_run.deployment_id is None:
                return function(*args, **kwargs)
            dataset_id = dataset_of(*args, **kwargs)
            with _dataset_slot(dataset_id):
                later = superseded_by(flow_run)
                if later is not None:
                    from prefect.states import Cancelled

                    return Cancelled(message=(
                        f"skipped: the run scheduled for {later.expected_start_time.isoformat()} is due too, and "
                        f"only the latest missed run of a schedule is caught up (dataset {dataset_id!r}; nothing "
                        "was read or charged)"
                    ))
                return function(*args, **kwargs)

        return wrapper

    return decorate
