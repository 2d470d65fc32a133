"""The budget ledger in one process: caps, refusals and their messages, exact arithmetic, the ρ rule.

Process-level concurrency and file locking are in ``test_ledger_concurrency.py``.
"""

from __future__ import annotations

import json
import re
import threading
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest

from dqrelease.errors import BudgetRefusedError, ConfigInvalidError, ExitCode
from dqrelease.ledger import SCHEMA_VERSION, Ledger, LedgerError


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "ledger" / "budget.duckdb")


def _charge(ledger: Ledger, epsilon, delta=0.0, rho=None, *, dataset="adult", run="run-1", mode="tight"):
    return ledger.charge(
        dataset, epsilon=epsilon, delta=delta, rho=rho, mode=mode, mechanism="dualquery",
        config_hash="cfg-sha256", run_id=run, note="monthly release",
    )


# ---------------------------------------------------------------------- caps and refusals
def test_ledger_refuses_charge_over_cap_with_remaining_budget_and_fix_in_message(ledger: Ledger):
    ledger.set_cap("adult", epsilon=1.0, delta=1e-5)
    _charge(ledger, 0.625)
    with pytest.raises(BudgetRefusedError) as refused:
        _charge(ledger, 0.5, run="run-2")
    message = str(refused.value)
    assert "\n" not in message
    assert "requested epsilon=0.5, delta=0" in message
    assert "remaining is epsilon=0.375, delta=1e-05" in message
    assert "epsilon exceeds the cap" in message
    assert ("lower privacy.epsilon or raise the cap with `dqrelease budget set-cap adult --epsilon EPSILON "
            f"--delta DELTA --ledger {ledger.path}`") in message
    assert refused.value.exit_code == ExitCode.BUDGET_REFUSED
    assert ledger.spent("adult").charges == 1


def test_ledger_refuses_charge_over_delta_cap_and_names_delta(ledger: Ledger):
    ledger.set_cap("adult", epsilon=10, delta=1e-6)
    _charge(ledger, 0.1, delta=6e-7)
    with pytest.raises(BudgetRefusedError, match=r"\(delta exceeds the cap\).*lower privacy\.delta or raise"):
        _charge(ledger, 0.1, delta=6e-7, run="run-2")
    assert ledger.spent("adult").delta == Fraction(6e-7)


def test_ledger_refuses_charge_when_dataset_has_no_cap_and_says_how_to_set_one(ledger: Ledger):
    ledger.set_cap("other", epsilon=1, delta=1e-5)
    with pytest.raises(BudgetRefusedError, match=re.escape(
        f"dataset 'adult' has no budget cap in ledger {ledger.path}; set one with "
        f"`dqrelease budget set-cap adult --epsilon EPSILON --delta DELTA --ledger {ledger.path}`"
    )):
        _charge(ledger, 0.1)
    assert ledger.spent("adult").charges == 0


def test_ensure_cap_creates_a_missing_cap_but_never_changes_an_existing_one(ledger: Ledger):
    created = ledger.ensure_cap("adult", epsilon=1.0, delta=1e-5)
    kept = ledger.ensure_cap("adult", epsilon=5.0, delta=1e-3)
    assert kept == created
    assert ledger.cap("adult") == created
    assert (created.epsilon, created.delta, created.seq) == (1, Fraction(1e-5), 1)


def test_set_cap_changes_the_cap_and_keeps_the_old_one_in_the_history(ledger: Ledger):
    ledger.set_cap("adult", epsilon=1, delta=1e-5)
    ledger.set_cap("adult", epsilon=2, delta=1e-5, rho=0.5)
    cap = ledger.cap("adult")
    assert (cap.epsilon, cap.rho, cap.seq) == (2, Fraction(0.5), 2)
    with duckdb.connect(str(ledger.path), read_only=True) as con:
        history = con.execute("select seq, epsilon from ledger_caps order by seq").fetchall()
    assert history == [(1, 1.0), (2, 2.0)]


def test_lowering_the_cap_below_what_was_spent_is_refused_naming_both_and_the_least_cap(ledger: Ledger):
    ledger.set_cap("adult", epsilon=1, delta=1e-5)
    _charge(ledger, 0.5)
    message = ("cap refused for dataset 'adult': the requested cap (epsilon=0.25) is below what its 1 charge(s) "
               "already spent (epsilon=0.5), and charges are never refunded; give at least --epsilon 0.5")
    with pytest.raises(ConfigInvalidError, match=re.escape(message)):
        ledger.set_cap("adult", epsilon=0.25, delta=1e-5)
    assert ledger.cap("adult").epsilon == 1  # unchanged
    ledger.set_cap("adult", epsilon=0.5, delta=1e-5)  # equal to what was spent: accepted, it stops further releases
    assert ledger.budgets("adult")[0].remaining.epsilon == 0
    with pytest.raises(BudgetRefusedError, match="epsilon exceeds the cap"):
        _charge(ledger, 0.1, run="run-2")


def test_the_least_cap_named_by_a_refusal_is_accepted(ledger: Ledger):
    ledger.set_cap("adult", epsilon=1, delta=1e-5)
    for run, epsilon in (("a", 0.1), ("b", 0.1), ("c", 0.2)):  # their exact sum is not a float
        _charge(ledger, epsilon, run=run)
    with pytest.raises(ConfigInvalidError) as refused:
        ledger.set_cap("adult", epsilon=0.3, delta=1e-5)
    least = float(re.search(r"--epsilon (\S+)", str(refused.value)).group(1))
    assert Fraction(least) >= ledger.spent("adult").epsilon
    ledger.set_cap("adult", epsilon=least, delta=1e-5)


def test_refused_charge_writes_nothing_and_accepted_charges_append(ledger: Ledger):
    ledger.set_cap("adult", epsilon=1, delta=1e-5)
    _charge(ledger, 0.5, run="a")
    with pytest.raises(BudgetRefusedError):
        _charge(ledger, 0.75, run="b")
    _charge(ledger, 0.25, run="c")
    [budget] = ledger.budgets("adult")
    assert [(c.seq, c.run_id) for c in budget.charges] == [(1, "a"), (2, "c")]


def test_a_run_id_that_charges_twice_pays_twice(ledger: Ledger):
    ledger.set_cap("adult", epsilon=1, delta=1e-5)
    _charge(ledger, 0.5, run="retried")
    _charge(ledger, 0.5, run="retried")
    assert ledger.spent("adult").epsilon == 1
    with pytest.raises(BudgetRefusedError):
        _charge(ledger, 0.5, run="retried")


def test_receipt_holds_the_charge_and_the_budget_remaining_after_it(ledger: Ledger):
    ledger.set_cap("adult", epsilon=1, delta=1e-5, rho=0.25)
    _charge(ledger, 0.25, delta=1e-6, rho=0.0625)
    receipt = _charge(ledger, 0.5, delta=2e-6, rho=0.125, run="run-2")
    assert (receipt.charge.seq, receipt.charge.run_id, receipt.charge.mode) == (2, "run-2", "tight")
    assert receipt.charge.charged_at.tzinfo is not None
    assert receipt.spent.epsilon == Fraction(3, 4)
    assert receipt.remaining.epsilon == Fraction(1, 4)
    assert receipt.remaining.delta == Fraction(1e-5) - Fraction(1e-6) - Fraction(2e-6)
    assert receipt.remaining.rho == Fraction(1, 16)
    as_dict = json.loads(json.dumps(receipt.as_dict()))
    assert as_dict["remaining"]["epsilon"] == 0.25
    assert as_dict["exact"]["epsilon"] == "1/2"


# ---------------------------------------------------------------------- exact arithmetic
@pytest.mark.parametrize("cap", [0.3, "0.3", Fraction(3, 10)], ids=["float", "decimal-string", "fraction"])
def test_float_costs_count_at_their_exact_binary_value_so_point_one_plus_point_two_exceeds_point_three(
    ledger: Ledger, cap
):
    # Fraction(0.1) + Fraction(0.2) = 0.30000000000000001665... > 0.3 whether the cap is the float 0.3
    # (0.29999999999999998889...) or exactly 3/10: the accountant's floats are never rounded down.
    ledger.set_cap("adult", epsilon=cap, delta=1e-5)
    _charge(ledger, 0.1)
    with pytest.raises(BudgetRefusedError, match=re.escape("requested epsilon=0.2, delta=0 but remaining is "
                                                           "epsilon=0.19999999999999998")):
        _charge(ledger, 0.2, run="run-2")


def test_charge_landing_exactly_on_the_cap_is_accepted_and_nothing_more(ledger: Ledger):
    ledger.set_cap("adult", epsilon=Fraction(0.1) + Fraction(0.2), delta=1e-5)
    _charge(ledger, 0.1)
    receipt = _charge(ledger, 0.2, run="run-2")
    assert receipt.remaining.epsilon == 0
    with pytest.raises(BudgetRefusedError):
        _charge(ledger, 5e-324, run="run-3")  # the smallest positive float


def test_amounts_survive_the_file_exactly(ledger: Ledger):
    ledger.set_cap("adult", epsilon="1/3", delta=1e-5)
    for run in range(3):
        _charge(ledger, 0.1, run=f"run-{run}")
    reopened = Ledger(ledger.path)
    assert reopened.spent("adult").epsilon == 3 * Fraction(0.1)
    assert reopened.spent("adult").epsilon != Fraction(3, 10)
    assert reopened.cap("adult").epsilon == Fraction(1, 3)


# ---------------------------------------------------------------------- the ρ rule
def test_rho_cap_refuses_when_the_rho_sum_exceeds_it_even_if_epsilon_fits(ledger: Ledger):
    ledger.set_cap("adult", epsilon=100, delta=1e-5, rho=0.5)
    _charge(ledger, 1.0, rho=0.25)
    _charge(ledger, 1.0, rho=0.25, run="run-2")
    with pytest.raises(BudgetRefusedError, match=r"\(rho exceeds the cap\).*rho=0\.125 but remaining is .*rho=0"):
        _charge(ledger, 1.0, rho=0.125, run="run-3")


def test_rho_cap_refuses_a_charge_that_reports_no_rho(ledger: Ledger):
    ledger.set_cap("adult", epsilon=100, delta=1e-5, rho=0.5)
    with pytest.raises(BudgetRefusedError, match=r"this charge has no rho.*privacy\.accounting = \"tight\""):
        _charge(ledger, 0.1, rho=None, mode="paper")


def test_rho_cap_set_after_a_charge_without_rho_refuses_every_charge(ledger: Ledger):
    ledger.set_cap("adult", epsilon=100, delta=1e-5)
    _charge(ledger, 0.1, rho=None, mode="paper")
    ledger.set_cap("adult", epsilon=100, delta=1e-5, rho=10)
    with pytest.raises(BudgetRefusedError, match=r"1 earlier charge\(s\) have no rho.*set the cap without --rho"):
        _charge(ledger, 0.1, rho=0.001, run="run-2")
    assert ledger.budgets("adult")[0].remaining.rho is None


def test_without_rho_cap_rho_is_recorded_but_only_epsilon_and_delta_are_enforced(ledger: Ledger):
    ledger.set_cap("adult", epsilon=1, delta=1e-5)
    _charge(ledger, 0.5, rho=1000.0)
    _charge(ledger, 0.5, rho=None, mode="paper", run="run-2")
    spent = ledger.spent("adult")
    assert (spent.epsilon, spent.rho, spent.charges_without_rho) == (1, None, 1)


# ---------------------------------------------------------------------- inputs
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"epsilon": -0.1}, "epsilon (-0.1) must be >= 0"),
        ({"epsilon": float("nan")}, "epsilon (nan) must be a finite number"),
        ({"epsilon": float("inf")}, "epsilon (inf) must be a finite number"),
        ({"epsilon": True}, "epsilon (True) must be a number"),
        ({"delta": 1.0}, "delta of a charge (1.0) must be < 1"),
        ({"rho": "abc"}, "rho ('abc') must be a finite number"),
        ({"mode": "loose"}, "accounting mode 'loose' must be one of paper, tight"),
        ({"run_id": ""}, "run_id of a charge must be a non-empty string"),
        ({"dataset_id": "a b"}, "dataset id 'a b' must be non-empty and use only letters"),
    ],
)
def test_charge_rejects_invalid_arguments_with_a_precise_message(ledger: Ledger, overrides, message):
    ledger.set_cap("adult", epsilon=1, delta=1e-5)
    arguments = {"dataset_id": "adult", "epsilon": 0.1, "delta": 0.0, "rho": None, "mode": "tight",
                 "mechanism": "dualquery", "config_hash": "h", "run_id": "r"} | overrides
    dataset_id = arguments.pop("dataset_id")
    with pytest.raises(ConfigInvalidError, match=re.escape(message)):
        ledger.charge(dataset_id, **arguments)
    assert ledger.spent("adult").charges == 0


def test_set_cap_rejects_a_delta_cap_of_one(ledger: Ledger):
    with pytest.raises(ConfigInvalidError, match=re.escape("delta cap (1) must be < 1")):
        ledger.set_cap("adult", epsilon=1, delta=1)


# ---------------------------------------------------------------------- reading
def test_show_lists_cap_totals_remaining_and_charges_as_json(ledger: Ledger):
    ledger.set_cap("adult", epsilon=1, delta=1e-5)
    ledger.set_cap("census", epsilon=2, delta=1e-6)
    _charge(ledger, 0.25)
    rows = json.loads(json.dumps(ledger.show()))
    assert [row["dataset_id"] for row in rows] == ["adult", "census"]
    adult = rows[0]
    assert adult["cap"]["epsilon"] == 1.0
    assert adult["spent"]["charges"] == 1
    assert adult["remaining"]["exact"]["epsilon"] == "3/4"
    assert adult["charges"][0]["run_id"] == "run-1"
    assert ledger.show("nobody") == []


def test_plain_sql_view_shows_the_same_totals(ledger: Ledger):
    ledger.set_cap("adult", epsilon=1, delta=1e-5)
    _charge(ledger, 0.25, rho=0.5)
    _charge(ledger, 0.5, rho=0.25, run="run-2")
    with duckdb.connect(str(ledger.path), read_only=True) as con:
        row = con.execute("select charges, epsilon_spent, rho_spent from ledger_budget where dataset_id = 'adult'")
        assert row.fetchall() == [(2, 0.75, 0.75)]


def test_ledger_refuses_a_file_with_a_newer_schema_version(ledger: Ledger):
    ledger.set_cap("adult", epsilon=1, delta=1e-5)
    with duckdb.connect(str(ledger.path)) as con:
        con.execute("insert into ledger_version values ($v, now()::timestamp)", {"v": SCHEMA_VERSION + 1})
    with pytest.raises(LedgerError, match=f"schema version {SCHEMA_VERSION + 1} .* upgrade dqrelease"):
        ledger.spent("adult")


def test_ledger_reports_a_file_that_is_not_a_ledger(tmp_path: Path):
    path = tmp_path / "notes.duckdb"
    path.write_text("not a database")
    with pytest.raises(LedgerError, match=re.escape(f"cannot open ledger {path} (")):
        Ledger(path).show()


def test_threads_of_one_process_cannot_overspend(ledger: Ledger):
    ledger.set_cap("adult", epsilon=1.0, delta=1e-5)
    outcomes: list[str] = []

    def attempt(run: int) -> None:
        try:
            _charge(ledger, 0.3, run=f"thread-{run}")
            outcomes.append("charged")
        except BudgetRefusedError:
            outcomes.append("refused")

    threads = [threading.Thread(target=attempt, args=(run,)) for run in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["charged"] * 3 + ["refused"] * 5
    assert ledger.spent("adult").epsilon == 3 * Fraction(0.3)


# ---------------------------------------------------------------------- schema versions and migrations
def _tables(path: Path) -> dict[str, list[tuple]]:
    with duckdb.connect(str(path), read_only=True) as con:
        names = [row[0] for row in con.execute(
            "select table_name from information_schema.tables where table_type = 'BASE TABLE'").fetchall()]
        return {name: sorted(con.execute(f'select * from "{name}"').fetchall()) for name in names}  # catalog names


def _version_1_file(path: Path) -> None:
    """A ledger as schema version 1 wrote it: two datasets, three caps, three charges (one with ρ)."""
    from dqrelease.ledger import store
    from dqrelease.ledger.records import Charge
    from dqrelease.sql import load_sql

    path.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(path)) as con:
        con.execute(load_sql("ledger_version_table"))
        con.execute(load_sql("ledger_schema"))
        con.execute(load_sql("ledger_version_insert"), {"version": 1, "applied_at_utc": store.naive_utc()})
        store.insert_cap(con, "adult", (Fraction(1), Fraction(1, 10**5), None), seq=1)
        store.insert_cap(con, "adult", (Fraction(3), Fraction(1, 10**5), None), seq=2)
        store.insert_cap(con, "kdd", (Fraction(2), Fraction(0), Fraction(1, 2)), seq=1)
        for seq, (dataset, epsilon, rho) in enumerate(
            [("adult", Fraction(1, 3), None), ("adult", Fraction(0.1), None), ("kdd", Fraction(1, 4), Fraction(1, 8))],
            start=1,
        ):
            store.insert_charge(con, Charge(
                dataset_id=dataset, seq=seq, run_id=f"old-{seq}", charged_at=store.utc_now(), config_hash="c" * 64,
                mechanism="dualquery", mode="tight", epsilon=epsilon, delta=Fraction(0), rho=rho, note="v1 charge",
            ))


def test_a_version_1_ledger_is_migrated_keeping_every_cap_and_charge(tmp_path: Path):
    path = tmp_path / "old" / "ledger.duckdb"
    _version_1_file(path)
    before = _tables(path)

    ledger = Ledger(path)
    shown = ledger.show()
    after = _tables(path)
    assert SCHEMA_VERSION == 2
    assert [row[0] for row in after["ledger_version"]] == [1, 2]
    assert after["ledger_caps"] == before["ledger_caps"] and len(after["ledger_caps"]) == 3
    assert after["ledger_charges"] == before["ledger_charges"] and len(after["ledger_charges"]) == 3
    assert after["ledger_seeds"] == [] and after["ledger_seed_key"] == []
    assert [entry["dataset_id"] for entry in shown] == ["adult", "kdd"]
    assert shown[0]["spent"]["exact"]["epsilon"] == str(Fraction(1, 3) + Fraction(0.1))
    assert shown[0]["cap"]["exact"]["epsilon"] == "3" and shown[1]["spent"]["exact"]["rho"] == "1/8"
    # the migrated file takes seeded charges, and refuses a repeated seed
    ledger.charge("adult", epsilon=0.5, delta=0, rho=None, mode="tight", mechanism="dualquery",
                  config_hash="c" * 64, run_id="new-1", seed=7)
    with pytest.raises(ConfigInvalidError, match="seed refused for dataset 'adult'"):
        ledger.charge("adult", epsilon=0.5, delta=0, rho=None, mode="tight", mechanism="dualquery",
                      config_hash="c" * 64, run_id="new-2", seed=7)


def test_a_new_ledger_gets_version_1_and_every_migration(ledger: Ledger):
    ledger.set_cap("adult", epsilon=1, delta=1e-5)
    tables = _tables(ledger.path)
    assert [row[0] for row in tables["ledger_version"]] == list(range(1, SCHEMA_VERSION + 1))
    assert {"ledger_caps", "ledger_charges", "ledger_seeds", "ledger_seed_key"} <= set(tables)


# ---------------------------------------------------------------------- seeds: one run per seed and dataset
def _seeded(ledger: Ledger, seed: int, *, run: str, dataset: str = "adult", mechanism: str = "dualquery"):
    return ledger.charge(
        dataset, epsilon=0.25, delta=0, rho=None, mode="tight", mechanism=mechanism, config_hash="cfg-sha256",
        run_id=run, note="seeded test release", seed=seed,
    )


def test_a_seed_charged_by_one_run_is_refused_for_the_next_before_the_charge(ledger: Ledger):
    ledger.set_cap("adult", epsilon=10, delta=1e-5)
    _seeded(ledger, 918273645, run="run-1")
    before = _tables(ledger.path)
    with pytest.raises(ConfigInvalidError) as refused:
        _seeded(ledger, 918273645, run="run-2")
    message = str(refused.value)
    assert "\n" not in message and "918273645" not in message
    assert f"seed refused for dataset 'adult': ledger {ledger.path} already holds a charge of another run" in message
    assert "set a new run.seed" in message and refused.value.exit_code == ExitCode.INVALID_CONFIG
    assert _tables(ledger.path) == before  # nothing charged, nothing recorded
    with pytest.raises(ConfigInvalidError, match="seed refused"):
        ledger.check_seed("adult", 918273645)
    _seeded(ledger, 918273646, run="run-3")  # another seed is accepted
    ledger.set_cap("kdd", epsilon=1, delta=0)
    _seeded(ledger, 918273645, run="run-4", dataset="kdd")  # the same seed on another dataset too
    assert [c.run_id for b in ledger.budgets() for c in b.charges] == ["run-1", "run-3", "run-4"]


def test_one_run_may_charge_its_seed_twice_and_it_is_recorded_once(ledger: Ledger):
    ledger.set_cap("adult", epsilon=10, delta=1e-5)
    _seeded(ledger, 42, run="run-1", mechanism="laplace-count")  # the noisy count, then the release it plans
    _seeded(ledger, 42, run="run-1")
    seeds = _tables(ledger.path)["ledger_seeds"]
    assert [(row[0], row[2], row[3]) for row in seeds] == [("adult", "run-1", 1)]
    assert ledger.spent("adult").charges == 2


def test_seeds_are_stored_as_keyed_hashes_never_in_clear(tmp_path: Path):
    hashes = []
    for name in ("a", "b"):
        ledger = Ledger(tmp_path / f"{name}.duckdb")
        ledger.set_cap("adult", epsilon=1, delta=0)
        _seeded(ledger, 918273645, run="run-1")
        tables = _tables(ledger.path)
        assert "918273645" not in repr(tables)
        assert b"918273645" not in ledger.path.read_bytes()
        [(_, digest, *_)] = tables["ledger_seeds"]
        assert re.fullmatch(r"[0-9a-f]{64}", digest)
        hashes.append(digest)
    assert hashes[0] != hashes[1]  # each ledger has its own key: equal seeds do not link across files


def test_a_refused_charge_records_no_seed_and_check_seed_creates_no_file(tmp_path: Path):
    ledger = Ledger(tmp_path / "budget.duckdb")
    ledger.check_seed("adult", 1)
    assert not ledger.path.exists()
    ledger.set_cap("adult", epsilon=0.1, delta=0)
    with pytest.raises(BudgetRefusedError):
        _seeded(ledger, 1, run="run-1")  # over the cap: nothing is written, the seed stays unused
    assert _tables(ledger.path)["ledger_seeds"] == []
    ledger.check_seed("adult", 1)
