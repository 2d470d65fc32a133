"""Named errors of the release pipeline and the exit code each maps to.

Messages are one line, name the problem and the fix, and never contain a value read from private data.
"""

from __future__ import annotations

import os
from enum import IntEnum

__all__ = [
    "DEBUG_VARIABLE",
    "BudgetRefusedError",
    "ConfigInvalidError",
    "ExitCode",
    "InternalError",
    "LedgerError",
    "LedgerLockedError",
    "NothingToVerifyError",
    "ReleaseError",
    "ReplayRefusedError",
    "UnchargedRunError",
    "ValidationFailedError",
    "VerificationError",
    "committed_charge",
    "debugging",
    "note_committed_charge",
]


DEBUG_VARIABLE = "DQRELEASE_DEBUG"
"""Set to ``1`` (``dqrelease --debug``): unexpected exceptions keep their text and traceback (they may quote data)."""


def debugging() -> bool:
    """True when :data:`DEBUG_VARIABLE` is ``1``."""
    return os.environ.get(DEBUG_VARIABLE) == "1"


_CHARGE_NOTE = "the run failed after its charge of epsilon = {epsilon:.4g} was committed; charges are never refunded"


def note_committed_charge(error: BaseException, epsilon: float) -> None:
    """Record on ``error`` that the run failed after the ledger committed its charge (``epsilon`` in total).

    The CLI's one line then ends with :func:`committed_charge`: a run that charged and failed says so.
    """
    if committed_charge(error) is None:
        error.add_note(_CHARGE_NOTE.format(epsilon=epsilon))


def committed_charge(error: BaseException) -> str | None:
    """The note :func:`note_committed_charge` left on ``error`` (None when the run charged nothing)."""
    prefix = _CHARGE_NOTE.split("{", 1)[0]
    return next((note for note in getattr(error, "__notes__", ()) if note.startswith(prefix)), None)


class ExitCode(IntEnum):
    """Process exit codes of the ``dqrelease`` CLI."""

    OK = 0
    INTERNAL_ERROR = 1
    INVALID_CONFIG = 2
    VALIDATION_FAILED = 3
    BUDGET_REFUSED = 4
    VERIFY_MISMATCH = 5
    REPLAY_REFUSED = 6
    NOTHING_TO_VERIFY = 7


class ReleaseError(Exception):
    """Base class; ``exit_code`` says how the CLI exits."""

    exit_code: ExitCode = ExitCode.INTERNAL_ERROR


class ConfigInvalidError(ReleaseError):
    """The release config or the schema file is invalid (nothing was read from the private data)."""

    exit_code = ExitCode.INVALID_CONFIG


class ValidationFailedError(ReleaseError):
    """The raw or synthetic table failed its expectation suite (no privacy cost was charged for raw)."""

    exit_code = ExitCode.VALIDATION_FAILED

    def __init__(self, message: str, failures: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.failures = failures or []


class BudgetRefusedError(ReleaseError):
    """The ledger refused the charge: it would exceed the dataset's cap (or no cap exists)."""

    exit_code = ExitCode.BUDGET_REFUSED


class VerificationError(ReleaseError):
    """Bytes differ from the manifest: a published file, or the output of a seeded replay."""

    exit_code = ExitCode.VERIFY_MISMATCH


class ReplayRefusedError(ReleaseError):
    """A replay was refused before it read the data.

    The manifest cannot be read, or what the replay would run (config, schema, input files, code, package
    versions, seed) differs from what the manifest recorded.
    """

    exit_code = ExitCode.REPLAY_REFUSED


class NothingToVerifyError(ReleaseError):
    """The manifest is of an unseeded release: its randomness was never recorded, so it cannot be replayed."""

    exit_code = ExitCode.NOTHING_TO_VERIFY


class UnchargedRunError(ReleaseError):
    """A mechanism was asked to run on private data without a ledger charge or a checked replay behind it."""

    exit_code = ExitCode.INTERNAL_ERROR


class LedgerError(ReleaseError):
    """The ledger file cannot be used (locked, unreadable, or written by a newer dqrelease)."""

    exit_code = ExitCode.INTERNAL_ERROR


class LedgerLockedError(LedgerError):
    """Another process (or thread) kept the ledger file locked for longer than the lock timeout."""


class InternalError(ReleaseError):
    """An unexpected failure inside a task that touches private data (details hidden unless debugging)."""
