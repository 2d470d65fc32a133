"""The ``dqrelease`` command line.

Commands: ``run CONFIG``, ``plan CONFIG``, ``budget show`` / ``budget set-cap``, ``verify MANIFEST``,
``serve CONFIG --cron``, ``schema init CONFIG`` (a schema skeleton from the source's header) and
``server start|status|stop`` (the local Prefect server runs reuse). Exit codes
(see :class:`dqrelease.errors.ExitCode`): 0 success, 1 internal error,
2 invalid config or schema, 3 validation failure, 4 budget refused, 5 verification mismatch, 6 replay refused,
7 nothing to replay (an unseeded release given to the Python API's replay).

Output rules: an expected refusal is one line on stderr and its exit code (tracebacks and Prefect's run logs only
with ``--debug``; the run logs are in the Prefect server in any case); printed paths are never wrapped.
Prefect, Great Expectations and Dask are imported only once a run really starts, so a bad config, schema or
plan is refused in about a second (``tests/cli/test_cli_output.py``,
``test_loading_and_planning_a_config_imports_no_prefect_gx_or_dask``).

Modules: :mod:`~dqrelease.cli.app` (the Typer apps, ``--debug``, exit codes, the fast exit of :func:`main`),
:mod:`~dqrelease.cli.release` (``run``, ``plan``, ``verify``, ``serve``; what ``plan`` prints:
:mod:`~dqrelease.cli.plan_view`), :mod:`~dqrelease.cli.budget`,
:mod:`~dqrelease.cli.schema` and :mod:`~dqrelease.cli.server`; importing this package registers their commands on
:data:`app`. The name ``app`` of this package is the Typer app, not the module: import the module's other names as
``from dqrelease.cli.app import ...``.
"""

from dqrelease.cli import budget, release, schema, server  # noqa: F401 - importing them registers their commands on app
from dqrelease.cli.app import app, main
from dqrelease.cli.release import SIDE_PROCESS_WARM_UP, SIDE_PROCESS_WHEN_IDLE

__all__ = ["SIDE_PROCESS_WARM_UP", "SIDE_PROCESS_WHEN_IDLE", "app", "main"]
