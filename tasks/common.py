"""Task defaults shared by every dqrelease task.

Tasks are never cached and never persist results: a cache must never replay a mechanism's output without
the ledger knowing, and results hold private data (the raw table, true answers).
"""

from prefect.cache_policies import NO_CACHE

TASK_OPTIONS = {"cache_policy": NO_CACHE, "persist_result": False}
