"""Named errors of the release pipeline and the exit code each maps to.

Messages are one line, name the problem and the fix, and never contain a value read from private data.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "BudgetRefusedError",
    "ConfigInvalidError",
    "ExitCode",
    "InternalError",
    "LedgerError",
    "LedgerLockedError",
    "ReleaseError",
    "ValidationFailedError",
    "VerificationError",
]


class ExitCode(IntEnum):
    """Process exit codes of the ``dqrelease`` CLI."""

    OK = 0
    INTERNAL_ERROR = 1
    INVALID_CONFIG = 2
    VALIDATION_FAILED = 3
    BUDGET_REFUSED = 4
    VERIFY_MISMATCH = 5


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
    """A seeded re-run did not reproduce the manifest's output hashes."""

    exit_code = ExitCode.VERIFY_MISMATCH


class LedgerError(ReleaseError):
    """The ledger file cannot be used (locked, unreadable, or written by a newer dqrelease)."""

    exit_code = ExitCode.INTERNAL_ERROR


class LedgerLockedError(LedgerError):
    """Another process (or thread) kept the ledger file locked for longer than the lock timeout."""


class InternalError(ReleaseError):
    """An unexpected failure inside a task that touches private data (details hidden unless debugging)."""
