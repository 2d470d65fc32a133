"""Named exceptions of the engine.

Every message says what was wrong and how to fix it, and never echoes a value read from private data:
only public quantities (domain sizes, parameter values, counts of queries) appear in messages.
"""


class DQEngineError(Exception):
    """Base class of every error raised by :mod:`dq_engine`."""


class DomainError(DQEngineError, ValueError):
    """A domain, attribute or encoded record does not fit the public domain description."""


class WorkloadError(DQEngineError, ValueError):
    """A workload cannot be built or does not fit its domain."""


class ConfigError(DQEngineError, ValueError):
    """A mechanism or oracle configuration is invalid (a parameter outside its documented range)."""


class AccountingError(DQEngineError, ValueError):
    """A privacy event cannot be accounted in the requested mode, or a target budget cannot be met."""


class BudgetExceededError(AccountingError):
    """A planned privacy cost exceeds the budget it must fit in."""


class UniverseTooLargeError(DQEngineError, ValueError):
    """A mechanism that enumerates the data universe was asked to run on a universe too large to hold."""


class InfeasibleConstraintsError(DQEngineError, ValueError):
    """Declared constraints leave no feasible record, or a record cannot be made feasible as asked."""
