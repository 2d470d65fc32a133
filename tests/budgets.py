"""Budgets for tests that run mechanisms: an engine grant, or a ledger-charged grant of a registry plan.

Every mechanism spends its events on a grant before it reads the data (``dq_engine.privacy.grant``); a test states
a budget large enough for the small runs it makes. Tests of the grant itself (``tests/privacy/test_doors.py``) make
their own, tight ones.
"""

from __future__ import annotations

from pathlib import Path

from dq_engine import PrivacyGrant

TEST_EPSILON = 1e4
"""A test's budget: far above any test run's cost (the grant's own tests use tight budgets)."""

TEST_DELTA = 1e-3


def grant_for_tests(purpose: str = "unit test on a small table") -> PrivacyGrant:
    """An engine grant with :data:`TEST_EPSILON` and :data:`TEST_DELTA` (tight accounting)."""
    return PrivacyGrant(epsilon=TEST_EPSILON, delta=TEST_DELTA, purpose=purpose)


def study_grant(plan, folder: Path, *, run_id: str = "test-run"):
    """A :class:`~dqrelease.mechanisms.base.MechanismGrant` of ``plan``, charged to a throw-away ledger in
    ``folder``."""
    from dqrelease.ledger import Ledger
    from dqrelease.ledger.grants import grant_for_study

    ledger = Ledger(Path(folder) / "study-ledger.duckdb")
    ledger.ensure_cap("study", epsilon=TEST_EPSILON, delta=0.5)
    return grant_for_study(plan, ledger=ledger, dataset_id="study", run_id=run_id)


def describe_another_release(manifest: Path, config_path: Path) -> dict:
    """Rewrite an audit manifest to describe the release of ``config_path``: its path, hash, config and plan together.

    What a forger would do to get an uncharged replay of a costlier release (e.g. ε = 8 instead of the charged ε):
    every file hash a replay checks still matches, so only the ledger can tell. ``config_path``'s ``privacy.n`` must
    be declared. Returns the rewritten plan.
    """
    import json

    from dqrelease.inputs.config import config_hash, load_config
    from dqrelease.inputs.encoding import domain_from_columns
    from dqrelease.inputs.schema import load_schema
    from dqrelease.plan import build_workload, plan_release

    config = load_config(config_path)
    workload = build_workload(config.workload, domain_from_columns(load_schema(config.schema_file).columns))
    plan = plan_release(config, n=int(config.privacy.n), workload=workload).as_dict()
    record = json.loads(manifest.read_text())
    record.update(config_path=str(config_path), config_sha256=config_hash(config), privacy=plan,
                  config=json.loads(config.model_dump_json(exclude={"run": {"seed"}})))
    manifest.write_text(json.dumps(record, indent=2))
    return plan
