"""How charges compose across runs and when a cap refuses one, with the messages that say so.

With ``S`` the dataset's earlier charges and ``c`` the new one, the charge is refused iff

* ``Σ_S ε + ε_c > cap_ε`` (basic composition, Dwork & Roth Theorem 3.16 for (ε, δ)), or
* ``Σ_S δ + δ_c > cap_δ``, or
* the cap has a ρ and (some charge of ``S ∪ {c}`` has no ρ, or ``Σ_S ρ + ρ_c > cap_ρ``) (zCDP composes
  by adding ρ, Bun & Steinke 2016 Lemma 2.3).

All comparisons are exact (:class:`fractions.Fraction`), so a cap is never exceeded by rounding; a charge that
lands exactly on the cap is accepted. See ``docs/ledger.md``.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from dqrelease.ledger.records import Cap, Remaining, Spent, float_at_least

__all__ = [
    "cap_below_spent_message",
    "no_cap_message",
    "refusal_message",
    "refusals",
    "seed_reuse_message",
    "set_cap_command",
]


def refusals(cap: Cap, spent: Spent, epsilon: Fraction, delta: Fraction, rho: Fraction | None) -> list[str]:
    """Why a charge of (ε, δ, ρ) does not fit under ``cap`` after ``spent`` (empty list: it fits)."""
    reasons = []
    if spent.epsilon + epsilon > cap.epsilon:
        reasons.append("epsilon exceeds the cap")
    if spent.delta + delta > cap.delta:
        reasons.append("delta exceeds the cap")
    if cap.rho is not None:
        if rho is None:
            reasons.append("this charge has no rho")
        if spent.rho is None:
            reasons.append("an earlier charge has no rho")
        if rho is not None and spent.rho is not None and spent.rho + rho > cap.rho:
            reasons.append("rho exceeds the cap")
    return reasons


def set_cap_command(dataset_id: str, rho: bool, ledger_path: Path) -> str:
    """The ``dqrelease budget set-cap`` command that fixes a refusal."""
    return (
        f"`dqrelease budget set-cap {dataset_id} --epsilon EPSILON --delta DELTA{' --rho RHO' if rho else ''} "
        f"--ledger {ledger_path}`"
    )


def cap_below_spent_message(
    dataset_id: str, cap: tuple[Fraction, Fraction, Fraction | None], spent: Spent
) -> str | None:
    """The refusal of a cap below what the dataset's charges already spent, or None when the cap is not below it.

    Charges are never refunded, so such a cap could only refuse every later charge while showing a negative
    remaining budget. The fix names, for each amount the cap is below, the least value a cap can have (rounded up
    to a float, so that giving it is accepted); a cap equal to what was spent stops further releases.
    """
    requested = dict(zip(("epsilon", "delta", "rho"), cap, strict=True))
    totals = {"epsilon": spent.epsilon, "delta": spent.delta, "rho": spent.rho}
    below = [name for name, value in requested.items()
             if value is not None and totals[name] is not None and value < totals[name]]
    if not below:
        return None
    asked = ", ".join(f"{name}={_number(requested[name])}" for name in below)
    used = ", ".join(f"{name}={float_at_least(totals[name])!r}" for name in below)
    least = " ".join(f"--{name} {float_at_least(totals[name])!r}" for name in below)
    return (
        f"cap refused for dataset {dataset_id!r}: the requested cap ({asked}) is below what its {spent.charges} "
        f"charge(s) already spent ({used}), and charges are never refunded; give at least {least} (a cap equal to "
        "what was spent stops further releases)"
    )


def no_cap_message(dataset_id: str, ledger_path: Path) -> str:
    """The refusal of a charge on a dataset without a cap."""
    return (
        f"dataset {dataset_id!r} has no budget cap in ledger {ledger_path}; set one with "
        f"{set_cap_command(dataset_id, False, ledger_path)} or give ledger.initial_cap_epsilon and "
        "ledger.initial_cap_delta in the release config"
    )


def seed_reuse_message(dataset_id: str, ledger_path: Path) -> str:
    """The refusal of a seed that another run already charged to the dataset (the seed is never named)."""
    return (
        f"seed refused for dataset {dataset_id!r}: ledger {ledger_path} already holds a charge of another run with "
        "this run.seed, and the same seed on changed data draws the same noise; set a new run.seed (each seed is "
        "charged once per dataset), or re-run the earlier release with `dqrelease verify MANIFEST` (uncharged)"
    )


def refusal_message(
    cap: Cap,
    spent: Spent,
    request: tuple[Fraction, Fraction, Fraction | None],
    reasons: list[str],
    ledger_path: Path,
) -> str:
    """One line: what was requested, what remains of which cap, why it does not fit, and the fix."""
    epsilon, delta, rho = request
    remaining = Remaining.of(cap, spent)
    show_rho = cap.rho is not None
    parts = [
        f"budget refused for dataset {cap.dataset_id!r} ({', '.join(reasons)}): requested "
        f"{_describe(epsilon, delta, rho, show_rho)} but remaining is "
        f"{_describe(remaining.epsilon, remaining.delta, remaining.rho, show_rho)} "
        f"of the cap {_describe(cap.epsilon, cap.delta, cap.rho, show_rho)} after {spent.charges} charge(s)"
    ]
    if remaining.epsilon < 0 or remaining.delta < 0 or (remaining.rho is not None and remaining.rho < 0):
        parts.append("the cap is below what was already spent, so every charge is refused until it is raised")
    if "this charge has no rho" in reasons:
        parts.append('the cap has a rho: charge with privacy.accounting = "tight" (it reports rho)')
    if "an earlier charge has no rho" in reasons:
        parts.append(
            f"{spent.charges_without_rho} earlier charge(s) have no rho, so the rho cap refuses every "
            "charge: set the cap without --rho"
        )
    lower = [name for name, key in (("privacy.epsilon", "epsilon"), ("privacy.delta", "delta"))
             if any(reason.startswith(key) for reason in reasons)]
    if any(reason.startswith("rho exceeds") for reason in reasons) and "privacy.epsilon" not in lower:
        lower.append("privacy.epsilon")
    fix = f"lower {' / '.join(lower)} or raise" if lower else "raise"
    parts.append(f"{fix} the cap with {set_cap_command(cap.dataset_id, show_rho, ledger_path)}")
    return "; ".join(parts)


def _number(value: Fraction | None) -> str:
    """Short readable form: integers as such, else the shortest float repr (the comparison stays exact)."""
    if value is None:
        return "n/a"
    return str(value.numerator) if value.denominator == 1 else repr(float(value))


def _describe(epsilon: Fraction, delta: Fraction, rho: Fraction | None, show_rho: bool) -> str:
    text = f"epsilon={_number(epsilon)}, delta={_number(delta)}"
    return f"{text}, rho={_number(rho)}" if show_rho else text
