"""Seeded releases: when one may run, and the ledger's check that its seed was never charged before.

A seeded release (``run.seed_mode = "seeded"``) draws all its noise from the configured seed, so anyone holding the
seed and the config reproduces the noise, and the same seed on changed data draws the same noise: the difference of
two such releases is the difference of the data (on Adult and Adult minus one record, the same seed gave planning
n of 48,639 and 48,638). Seeds are for tests and audits, where a replay must reproduce a release byte for byte.
Hence:

* a seeded release runs only when its operator says it is a test or an audit (``dqrelease run
  --seeded-test-or-audit``, ``seeded_test_or_audit=True`` in :mod:`dqrelease.flows.release`), with a warning;
  ``dqrelease serve`` never schedules one (:func:`refuse_seeded`);
* a seed is charged to a dataset by one run only: :meth:`dqrelease.ledger.Ledger.charge` records a keyed hash of
  it and refuses it for any other run, and :func:`check_seeded_release` refuses it before anything is read.

A replay (``dqrelease verify``) charges nothing, so it is no new use of its seed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dqrelease.errors import ConfigInvalidError
from dqrelease.ledger import Ledger

if TYPE_CHECKING:
    from dqrelease.inputs.config import ReleaseConfig

__all__ = [
    "SEEDED_FLAG",
    "SEEDED_KEYWORD",
    "SEEDED_WARNING",
    "check_seeded_release",
    "refuse_seeded",
]

SEEDED_FLAG = "--seeded-test-or-audit"
"""The ``dqrelease run`` flag that lets a seeded config run (a test or an audit)."""

SEEDED_KEYWORD = "seeded_test_or_audit"
"""The keyword of the release flows with the same meaning."""

SEEDED_WARNING = (
    "warning: this release is seeded for a test or an audit: anyone holding its seed can reproduce its noise, "
    "so it is not for production (set run.seed_mode = 'secure' for a real release)"
)
"""The line a seeded release prints (``dqrelease run``) or logs (the flows) when it proceeds."""


def refuse_seeded(config: ReleaseConfig, *, fix: str) -> None:
    """Refuse a seeded config (one line naming ``fix``); a secure one passes.

    Raises:
        ConfigInvalidError: ``config.run.seed_mode`` is ``"seeded"``.
    """
    if config.run.seed_mode == "seeded":
        raise ConfigInvalidError(
            f"release {config.name!r} is seeded (run.seed_mode = 'seeded'): anyone holding its seed can reproduce "
            f"its noise, so seeds are for tests and audits only; {fix}"
        )


def check_seeded_release(config: ReleaseConfig, *, test_or_audit: bool, fix: str) -> None:
    """Before anything is read or charged: a seeded config runs only as a test or an audit, with an unused seed.

    Args:
        config: The release config.
        test_or_audit: The operator said this run is a test or an audit (:data:`SEEDED_FLAG`, :data:`SEEDED_KEYWORD`).
        fix: How the caller's operator says so (the refusal names it).

    Raises:
        ConfigInvalidError: The config is seeded and ``test_or_audit`` is false, or the ledger holds a charge of
            another run with this seed for the config's dataset.
    """
    if config.run.seed_mode != "seeded":
        return
    if not test_or_audit:
        refuse_seeded(config, fix=f"{fix} if this run is a test or an audit, or set run.seed_mode = 'secure' "
                                  "(and remove run.seed) for a production release")
    Ledger.of(config.ledger).check_seed(config.ledger.dataset_id, config.run.seed)
