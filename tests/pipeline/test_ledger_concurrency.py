"""The ledger under real concurrency: separate PROCESSES charging one file, and a process holding the file.

Helpers run in spawned processes, so they live at module level and do nothing on import.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest

from dqrelease.errors import BudgetRefusedError
from dqrelease.ledger import Ledger, LedgerLockedError

pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context("spawn")
WORKERS = 8
ATTEMPTS = 10
JOIN_TIMEOUT = 120.0


# ---------------------------------------------------------------------- helpers run in child processes
def charge_repeatedly(path: str, worker: int, epsilon: float, delta: float, start, results) -> None:
    """Wait for every worker, then try ``ATTEMPTS`` charges; report one outcome per attempt."""
    ledger = Ledger(Path(path), lock_timeout=JOIN_TIMEOUT)
    outcomes = []
    try:
        start.wait(timeout=JOIN_TIMEOUT)
        for attempt in range(ATTEMPTS):
            try:
                ledger.charge(
                    "adult", epsilon=epsilon, delta=delta, rho=None, mode="paper", mechanism="dualquery",
                    config_hash="cfg", run_id=f"worker-{worker}-attempt-{attempt}",
                )
                outcomes.append("charged")
            except BudgetRefusedError:
                outcomes.append("refused")
    except BaseException as error:  # reported to the parent, which fails the test with it
        outcomes.append(f"error: {type(error).__name__}: {error}")
    results.put(outcomes)


def hold_file_open(path: str, read_only: bool, ready, release) -> None:
    """Open the ledger file with plain DuckDB (like an inspection session) until told to let go."""
    con = duckdb.connect(path, read_only=read_only)
    con.execute("select count(*) from ledger_charges").fetchall()
    ready.set()
    release.wait(timeout=JOIN_TIMEOUT)
    con.close()


# ---------------------------------------------------------------------- tests
def _run_workers(path: Path, *, epsilon: float, delta: float) -> list[str]:
    start, results = SPAWN.Barrier(WORKERS), SPAWN.Queue()
    processes = [
        SPAWN.Process(target=charge_repeatedly, args=(str(path), worker, epsilon, delta, start, results))
        for worker in range(WORKERS)
    ]
    for process in processes:
        process.start()
    outcomes = []
    try:
        for _ in processes:
            outcomes += results.get(timeout=JOIN_TIMEOUT)
    except queue.Empty:
        pytest.fail("a charging process did not report back")
    finally:
        for process in processes:
            process.join(timeout=JOIN_TIMEOUT)
    return outcomes


@pytest.mark.parametrize(
    ("epsilon", "delta", "expected_charges"),
    [
        (0.3, 0.0, 3),  # epsilon runs out: floor(1.0 / 0.3) = 3 (3 * Fraction(0.3) < 1 < 4 * Fraction(0.3))
        (0.01, 3e-6, 3),  # delta runs out: floor(1e-5 / 3e-6) = 3
    ],
    ids=["epsilon-exhaustion", "delta-exhaustion"],
)
def test_concurrent_processes_cannot_overspend_the_cap(tmp_path: Path, epsilon, delta, expected_charges):
    ledger = Ledger(tmp_path / "ledger.duckdb")
    ledger.set_cap("adult", epsilon=1.0, delta=1e-5)

    outcomes = _run_workers(ledger.path, epsilon=epsilon, delta=delta)

    assert [o for o in outcomes if o.startswith("error")] == []
    assert len(outcomes) == WORKERS * ATTEMPTS
    assert outcomes.count("charged") == expected_charges
    spent = ledger.spent("adult")
    assert spent.charges == expected_charges
    assert spent.epsilon == expected_charges * Fraction(epsilon) <= Fraction(1.0)
    assert spent.delta == expected_charges * Fraction(delta) <= Fraction(1e-5)


@pytest.mark.parametrize("read_only", [False, True], ids=["read-write-holder", "read-only-holder"])
def test_charge_gives_up_with_a_clear_error_while_another_process_holds_the_file(tmp_path: Path, read_only):
    ledger = Ledger(tmp_path / "ledger.duckdb", lock_timeout=0.5)
    ledger.set_cap("adult", epsilon=1, delta=1e-5)
    ready, release = SPAWN.Event(), SPAWN.Event()
    holder = SPAWN.Process(target=hold_file_open, args=(str(ledger.path), read_only, ready, release))
    holder.start()
    try:
        assert ready.wait(timeout=JOIN_TIMEOUT), "the holder process did not open the ledger"
        with pytest.raises(LedgerLockedError, match=rf"ledger {ledger.path} is locked by another process "
                                                    rf"\(PID {holder.pid}\); retry later \(waited 0\.5 s"):
            ledger.charge("adult", epsilon=0.1, delta=0, rho=None, mode="paper", mechanism="dualquery",
                          config_hash="cfg", run_id="blocked")
    finally:
        release.set()
        holder.join(timeout=JOIN_TIMEOUT)
    assert ledger.spent("adult").charges == 0


def test_charge_waits_for_a_process_holding_the_file_and_then_succeeds(tmp_path: Path):
    ledger = Ledger(tmp_path / "ledger.duckdb", lock_timeout=JOIN_TIMEOUT)
    ledger.set_cap("adult", epsilon=1, delta=1e-5)
    ready, release = SPAWN.Event(), SPAWN.Event()
    holder = SPAWN.Process(target=hold_file_open, args=(str(ledger.path), False, ready, release))
    holder.start()
    try:
        assert ready.wait(timeout=JOIN_TIMEOUT), "the holder process did not open the ledger"
        # Let go of the file shortly after the charge starts waiting for it.
        timer = threading.Timer(1.0, release.set)
        timer.start()
        receipt = ledger.charge("adult", epsilon=0.1, delta=0, rho=None, mode="paper", mechanism="dualquery",
                                config_hash="cfg", run_id="patient")
        timer.join()
    finally:
        release.set()
        holder.join(timeout=JOIN_TIMEOUT)
    assert receipt.charge.seq == 1
    assert ledger.spent("adult").charges == 1


def hold_queue(path: str, ready, release) -> None:
    """Hold the ledger's queue (its ``.lock`` file) as a dqrelease operation in another process does."""
    import filelock

    with filelock.FileLock(f"{path}.lock"):
        ready.set()
        release.wait(timeout=JOIN_TIMEOUT)


def test_operations_of_dqrelease_processes_queue_on_the_lock_file(tmp_path: Path):
    """While another process holds the queue the database is not even opened; its turn comes when it lets go."""
    ledger = Ledger(tmp_path / "ledger.duckdb", lock_timeout=0.5)
    ledger.set_cap("adult", epsilon=1, delta=1e-5)
    ready, release = SPAWN.Event(), SPAWN.Event()
    holder = SPAWN.Process(target=hold_queue, args=(str(ledger.path), ready, release))
    holder.start()
    try:
        assert ready.wait(timeout=JOIN_TIMEOUT), "the holder process did not take the queue"
        with duckdb.connect(str(ledger.path)) as con:  # the database itself is free: only the queue is held
            con.execute("select 1")
        with pytest.raises(LedgerLockedError, match=rf"ledger {ledger.path} is locked by other dqrelease "
                                                    rf"operations \(their queue is {ledger.path}\.lock\)"):
            ledger.charge("adult", epsilon=0.1, delta=0, rho=None, mode="paper", mechanism="dualquery",
                          config_hash="cfg", run_id="queued")
        threading.Timer(1.0, release.set).start()
        patient = Ledger(ledger.path, lock_timeout=JOIN_TIMEOUT)
        receipt = patient.charge("adult", epsilon=0.1, delta=0, rho=None, mode="paper", mechanism="dualquery",
                                 config_hash="cfg", run_id="patient")
    finally:
        release.set()
        holder.join(timeout=JOIN_TIMEOUT)
    assert receipt.charge.seq == 1 and ledger.spent("adult").charges == 1


def test_a_ledger_whose_lock_file_cannot_be_created_is_used_without_a_queue(tmp_path: Path):
    """No lock file can be made (an auditor's read-only folder; here a folder in its place): no queue, as before."""
    ledger = Ledger(tmp_path / "ledger.duckdb")
    ledger.set_cap("adult", epsilon=1, delta=1e-5)
    lock = tmp_path / "ledger.duckdb.lock"
    lock.unlink()
    lock.mkdir()
    assert [budget.dataset_id for budget in Ledger(ledger.path).budgets()] == ["adult"]
    receipt = ledger.charge("adult", epsilon=0.1, delta=0, rho=None, mode="paper", mechanism="dualquery",
                            config_hash="cfg", run_id="unqueued")
    assert receipt.charge.seq == 1 and lock.is_dir()
