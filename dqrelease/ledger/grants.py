"""Permission to run a mechanism on private data: a committed ledger charge, or a checked replay.

:func:`dqrelease.mechanisms.dispatch.run_mechanism` (and so the pipeline's mechanism task) takes a
:class:`~dqrelease.mechanisms.base.MechanismGrant` instead of a plan and runs the plan the grant holds, and the
engine spends the plan's events on the grant's budget (:class:`dq_engine.privacy.grant.PrivacyGrant`, the charged
amounts) before it reads the data: no public function runs a mechanism without one, and one grant pays for one run.
Grants are issued only here:

* :func:`grant_after_charge`, after the ledger committed this run's charge. It re-derives the plan from the
  config and the public workload (a hand-made plan whose stated cost does not belong to its parameters is
  refused), and it finds the charge in the ledger file itself (a hand-made receipt is refused): same run, dataset,
  mechanism, accounting mode and config, amounts at least the plan's cost.
* :func:`grant_for_replay`, for a replay whose manifest passed :func:`dqrelease.outputs.replay.prepare_replay`, when the
  replay's plan is the plan the manifest recorded and the ledger named by the config holds the release's charge
  (:func:`replay_charges`, checked before any data is read too). It charges nothing: the release already paid for
  this output, and a manifest edited to describe another release (config, hash and plan rewritten together, e.g.
  ε = 8) finds no charge of its run that pays for it.
* :func:`grant_for_study`, for benchmarks and tests that run the registry's plans: it charges the plan's cost to a
  ledger the caller names (e.g. a throw-away file with its own cap) and issues the grant on that charge.

The noisy record count (``privacy.n = "noisy"``) charges inside its own task before it draws
(:mod:`dqrelease.tasks.privacy`); its replay takes a :class:`~dqrelease.outputs.replay.ReplayTarget`.
:func:`check_recorded_charges` issues no grant: it checks that the ledger holds the charges an audit manifest
records, which is what ``verify`` checks of an unseeded release besides its files.

These checks stop mistakes and shortcuts through the package's API (a flow, a task, the CLI). They are not a
sandbox: code that forges these objects on purpose could as well read the data file itself.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dq_engine.privacy.grant import PrivacyGrant
from dqrelease.errors import ReplayRefusedError, UnchargedRunError, VerificationError
from dqrelease.inputs.config import ReleaseConfig, config_hash
from dqrelease.ledger import Charge, Ledger
from dqrelease.ledger.records import float_at_least
from dqrelease.mechanisms import ReleasePlan
from dqrelease.mechanisms.base import GRANT_ISSUER, MechanismGrant
from dqrelease.outputs.manifest import plan_fingerprint
from dqrelease.outputs.replay import ManifestRecord, ReplayTarget

if TYPE_CHECKING:
    from dq_engine import Workload

__all__ = [
    "MechanismGrant",
    "check_recorded_charges",
    "grant_after_charge",
    "grant_for_replay",
    "grant_for_study",
    "granted_plan",
    "replay_charges",
]

COUNT_MECHANISM = "laplace-count"
"""Mechanism name of the noisy record count's charge (:mod:`dqrelease.tasks.privacy`)."""

def grant_after_charge(
    *, config: ReleaseConfig, plan: ReleasePlan, workload: Workload, receipt: dict[str, Any], run_id: str
) -> MechanismGrant:
    """Grant a run of ``plan`` after its charge was committed to the ledger.

    Args:
        config: The release config (its ledger, dataset id and hash).
        plan: The plan to run.
        workload: The public workload the plan was made for.
        receipt: The charge receipt (``ChargeReceipt.as_dict()``) returned by the ledger.
        run_id: The run.

    Raises:
        UnchargedRunError: The plan is not the one the config gives, or the ledger holds no matching charge.
    """
    from dqrelease.plan import plan_release

    declared = config.privacy.n
    if declared != "noisy" and plan.n != declared:
        raise UnchargedRunError("the plan's n is not the config's declared privacy.n; plan with the config's n")
    if plan_fingerprint(plan_release(config, n=plan.n, workload=workload).as_dict()) != plan_fingerprint(
        plan.as_dict()
    ):
        raise UnchargedRunError(
            "the plan is not the one the config gives for its n and workload (parameters or cost differ); "
            "plan with dqrelease.plan.plan_release"
        )
    dataset_id = config.ledger.dataset_id
    expected = {"run_id": run_id, "dataset_id": dataset_id, "config_hash": config_hash(config)}
    if any(receipt.get(key) != value for key, value in expected.items()):
        raise UnchargedRunError("the charge receipt is of another run, dataset or config; charge this run's plan")
    budgets = Ledger.of(config.ledger).budgets(dataset_id)
    charges = [c for b in budgets for c in b.charges if c.seq == receipt.get("seq") and c.run_id == run_id]
    from dqrelease.plan import ledger_amounts

    epsilon, delta, rho = ledger_amounts(plan)  # what the pipeline charges for this plan, exactly
    if not charges or not _covers(
        charges[0], mechanism=plan.mechanism, mode=plan.mode, config_hash=config_hash(config),
        epsilon=epsilon, delta=delta, rho=rho,
    ):
        raise UnchargedRunError(
            f"the ledger {config.ledger.path} holds no charge of run {run_id} covering this plan's cost; "
            "a mechanism runs only after its charge is committed"
        )
    return _issue(plan, run_id=run_id, basis="ledger charge", reference=f"{dataset_id}#{charges[0].seq}",
                  charge=charges[0])


def grant_for_replay(*, target: ReplayTarget, plan: ReleasePlan, run_id: str) -> MechanismGrant:
    """Grant an uncharged replay of ``plan``: the manifest was checked, recorded exactly this plan, and was paid for.

    Raises:
        UnchargedRunError: ``target`` is not a checked replay.
        ReplayRefusedError: The plan differs from the manifest's, or the config's ledger holds no charge of the
            release that pays for it (:func:`replay_charges`); the replay stops before the mechanism runs.
    """
    if not isinstance(target, ReplayTarget):
        raise UnchargedRunError("a replay needs the ReplayTarget of dqrelease.outputs.replay.prepare_replay(manifest)")
    if plan_fingerprint(plan.as_dict()) != plan_fingerprint(target.recorded_plan):
        raise ReplayRefusedError(
            "replay stopped before the mechanism ran: its plan (parameters, n or cost) differs from the one the "
            "manifest recorded"
        )
    replay_charges(target)
    return _issue(plan, run_id=run_id, basis="replay", reference=str(target.manifest_path), charge=None)


def replay_charges(target: ReplayTarget) -> list[Charge]:
    """The ledger charges that paid for the release a replay reproduces; call it before the replay reads any data.

    The ledger named by the replayed config (``ledger.path``, ``ledger.dataset_id``) must hold a charge of the
    manifest's run id with the recorded plan's mechanism and accounting mode, the config's hash, and amounts at
    least the plan's charged cost (compared exactly, as for a release's own grant); with ``privacy.n = "noisy"``
    also the run's noisy-count charge (at least ``n_epsilon`` and δ/2), since the replay draws that count again.

    Returns:
        The charges found (the release's, after the noisy count's when there is one).

    Raises:
        ReplayRefusedError: The ledger file is missing, or holds no such charge (one line naming the ledger).
    """
    if not isinstance(target, ReplayTarget):
        raise UnchargedRunError("a replay needs the ReplayTarget of dqrelease.outputs.replay.prepare_replay(manifest)")
    config, plan = target.config, target.recorded_plan
    path, dataset_id = config.ledger.path, config.ledger.dataset_id
    refused = f"replay refused, nothing was read from the data: ledger {path}"
    fix = "a replay reproduces only a release that this ledger charged; verify the release's own, unedited manifest"
    if not Path(path).is_file():
        raise ReplayRefusedError(f"{refused} (the config's ledger.path) does not exist; {fix}")
    try:
        mode = plan["accounting_mode"]
        cost = plan["costs"][mode]
        rho = None if cost.get("rho") is None else float(cost["rho"])
        # the recorded cost is the accounting's float, rounded outward; a pure release is charged the exact sum of
        # its events, which can be below that float by less than one step: one step down is what a charge must reach
        epsilon = math.nextafter(float(cost["epsilon"]), 0.0)
        needed = [(str(plan["mechanism"]), epsilon, Fraction(float(cost["delta"])), rho)]
    except (KeyError, TypeError, ValueError):
        raise ReplayRefusedError(
            f"replay refused: {target.manifest_path} records no charged cost in its plan; {fix}"
        ) from None
    if config.privacy.n == "noisy":  # the count's charge: its configured ε, and δ/2 (tasks.privacy.count_records)
        needed.insert(0, (COUNT_MECHANISM, float(config.privacy.n_epsilon), Fraction(config.privacy.delta) / 2, None))
    hashed = config_hash(config)
    run_charges = [c for b in Ledger(path).budgets(dataset_id) for c in b.charges if c.run_id == target.run_id]
    found, missing = [], []
    for mechanism, epsilon, delta, rho in needed:
        paying = [c for c in run_charges if _covers(
            c, mechanism=mechanism, mode=mode, config_hash=hashed, epsilon=epsilon, delta=delta, rho=rho
        )]
        if paying:
            found.append(paying[0])
        else:
            missing.append(f"{mechanism} at epsilon={epsilon:.4g}, delta={float(delta):.3g}")
    if missing:
        raise ReplayRefusedError(
            f"{refused} holds no charge of run {target.run_id} on dataset {dataset_id!r} with this manifest's "
            f"config hash, accounting mode ({mode}) and cost ({'; '.join(missing)}); {fix}"
        )
    return found


def check_recorded_charges(record: ManifestRecord) -> list[str]:
    """Check that the ledger holds the charges the manifest says paid for the release (its provenance).

    Reads the ledger named by the manifest's config (``ledger.path``) and compares each recorded charge (dataset,
    sequence number, run id, mechanism, accounting mode, config hash and exact amounts) with the ledger's.

    Returns:
        The charges found, as ``dataset#seq``.

    Raises:
        VerificationError: The manifest records no charge, the ledger file is missing, or a charge is missing or
            differs (exit 5).
    """
    recorded = record.ledger_charges or []
    ledger = record.config.get("ledger", {}) if isinstance(record.config, dict) else {}
    path = ledger.get("path") if isinstance(ledger, dict) else None
    if not recorded or not isinstance(path, str):
        raise VerificationError(
            f"the manifest of run {record.run_id} records no ledger charge: nothing shows the release was paid for"
        )
    if not Path(path).is_file():
        raise VerificationError(
            f"ledger {path} (the manifest's ledger.path) not found, so the charges that paid for run "
            f"{record.run_id} cannot be checked; restore the ledger at that path"
        )
    keys = ("dataset_id", "seq", "run_id", "mechanism", "accounting_mode", "config_hash", "exact")
    held = {(charge.dataset_id, charge.seq): charge.as_dict() for budget in Ledger(path).budgets()
            for charge in budget.charges}
    found, problems = [], []
    for charge in recorded:
        name = f"{charge.get('dataset_id')}#{charge.get('seq')}"
        actual = held.get((charge.get("dataset_id"), charge.get("seq")))
        if actual is None:
            problems.append(f"charge {name} is not in the ledger")
        elif any(actual.get(key) != charge.get(key) for key in keys):
            problems.append(f"charge {name} differs from the ledger's")
        else:
            found.append(name)
    if problems:
        raise VerificationError(f"ledger {path} does not hold the charges of run {record.run_id} as the manifest "
                                f"records them: {'; '.join(problems)}")
    return found


def grant_for_study(plan: ReleasePlan, *, ledger: Ledger, dataset_id: str, run_id: str) -> MechanismGrant:
    """Charge ``plan``'s cost to ``ledger`` (the caller's own, e.g. a benchmark's throw-away file) and grant its run.

    For benchmarks and tests that run the registry's plans outside a release config: the run is still paid for by
    a committed ledger charge, under the caller's cap.

    Raises:
        BudgetRefusedError: The charge does not fit ``dataset_id``'s cap in ``ledger`` (set one with
            :meth:`~dqrelease.ledger.Ledger.set_cap`).
    """
    from dqrelease.plan import ledger_amounts

    epsilon, delta, rho = ledger_amounts(plan)
    receipt = ledger.charge(
        dataset_id, epsilon=epsilon, delta=delta, rho=rho, mode=plan.mode, mechanism=plan.mechanism,
        config_hash="study", run_id=run_id, note=f"study run of {plan.mechanism}",
    )
    return _issue(plan, run_id=run_id, basis="ledger charge", reference=f"{dataset_id}#{receipt.charge.seq}",
                  charge=receipt.charge)


def _issue(
    plan: ReleasePlan,
    *,
    run_id: str,
    basis: Literal["ledger charge", "replay"],
    reference: str,
    charge: Charge | None,
) -> MechanismGrant:
    """The grant of ``plan``, its engine budget the charge's exact amounts (the plan's own cost for a replay)."""
    cost = plan.charged
    epsilon = float_at_least(charge.epsilon) if charge is not None else cost.epsilon
    delta = float_at_least(charge.delta) if charge is not None else cost.delta
    privacy = PrivacyGrant(epsilon=epsilon, delta=delta, mode=plan.mode, purpose=f"{basis} {reference}")
    return MechanismGrant(
        plan=plan, run_id=run_id, basis=basis, reference=reference, privacy=privacy, _issuer=GRANT_ISSUER
    )


def granted_plan(grant: MechanismGrant) -> ReleasePlan:
    """The plan a grant allows to run.

    Raises:
        UnchargedRunError: ``grant`` is not a :class:`MechanismGrant` (e.g. a bare plan).
    """
    if not isinstance(grant, MechanismGrant):
        raise UnchargedRunError(
            f"the mechanism task needs a MechanismGrant, not {type(grant).__name__}: a mechanism runs on private "
            "data only after a ledger charge (grant_after_charge) or for a checked replay (grant_for_replay)"
        )
    return grant.plan


def _covers(
    charge: Charge,
    *,
    mechanism: str,
    mode: str,
    config_hash: str,
    epsilon: float | Fraction,
    delta: float | Fraction,
    rho: float | Fraction | None,
) -> bool:
    """Whether a committed ledger charge pays for a run of ``mechanism`` costing (ε, δ, ρ) (compared exactly)."""
    if (charge.mechanism, charge.mode, charge.config_hash) != (mechanism, mode, config_hash):
        return False
    if charge.epsilon < Fraction(epsilon) or charge.delta < Fraction(delta):
        return False
    return rho is None or (charge.rho is not None and charge.rho >= Fraction(rho))
