"""Two workers at once on one pool (issue 25): every solution in at most one generation.

A slow scoring step used to let a second worker take the first's run for dead (no
heartbeat inside a step) and select from the same pool, and queueing took any solution it
was given. Now the run beats while it lives, and a generation takes only what is still
unqueued and unlabeled.
"""

import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import transaction
from app.datasets.demo_seed import seed
from app.grading import grade_solutions
from app.models import RunStatus, Solution, TrainingRun
from tests.worker.test_cycle import TEST_WORKER, label_queued
from worker import cycle, runs

STALE_AFTER = timedelta(seconds=2)
SLOW_SCORING_S = 20.0
"""Longer than the second worker takes, once it has taken the first run for dead, to train
and read the pool: so without heartbeats both would select from one pool."""
DECLINED_FOR = 3 * STALE_AFTER
"""How long into the first run's scoring the second worker must have kept declining to
run before the scoring may end early: past this, a run without heartbeats would have been
taken for dead and the second worker busy with its own (and the scoring waits it out)."""


def test_two_workers_at_once_queue_each_solution_once(
    engine: Engine, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with transaction(engine) as session:
        seed(session)
        # Graded beforehand: on SQLite, a worker's heartbeat waits for its own write
        # transactions, and grading the demo's thousand solutions is one of seconds.
        grade_solutions(session)
    label_queued(engine, limit=30)
    monkeypatch.setattr(runs, "STALE_AFTER", STALE_AFTER)
    score = cycle.score_solutions
    scoring_since: list[float] = []
    declined_while_stale = threading.Event()

    def slow_scoring(*args: Any, **kwargs: Any) -> Any:
        scoring_since.append(time.monotonic())
        declined_while_stale.wait(SLOW_SCORING_S)
        return score(*args, **kwargs)

    monkeypatch.setattr(cycle, "score_solutions", slow_scoring)
    options = TEST_WORKER | {"train_min_labels": "10", "train_epochs": "1"}
    settings = Settings(
        database_url=database_url, checkpoint_dir=tmp_path, generation_min_done=0, **options
    )
    outcomes: list[cycle.RunOutcome] = []

    def first() -> None:
        outcome = cycle.run_one(engine, settings, force=True, should_stop=lambda: False)
        assert outcome is not None
        outcomes.append(outcome)

    def second(alongside: threading.Thread) -> None:
        # As `python -m worker` polls: a run when one is due and no other is running.
        while alongside.is_alive():
            outcome = cycle.run_one(engine, settings, force=False, should_stop=lambda: False)
            if outcome is not None:
                outcomes.append(outcome)
                return
            if scoring_since and time.monotonic() > scoring_since[0] + DECLINED_FOR.total_seconds():
                declined_while_stale.set()
            time.sleep(0.2)

    one = threading.Thread(target=first)
    one.start()
    wait_for_a_running_run(engine)
    two = threading.Thread(target=second, args=(one,))
    two.start()
    one.join(timeout=600)
    two.join(timeout=600)

    with Session(engine) as session:
        metrics = [run.metrics or {} for run in session.scalars(select(TrainingRun))]
        queued_by_runs = sum(m.get("selection", {}).get("queued", 0) for m in metrics)
        in_generations = session.scalar(
            select(func.count()).select_from(Solution).where(Solution.generation >= 1)
        )
    assert queued_by_runs > 0, outcomes
    # A solution queued twice is in the runs' counts twice, in the table once.
    assert in_generations == queued_by_runs, outcomes
    assert [o.status for o in outcomes] == [RunStatus.SUCCEEDED.value], outcomes


def wait_for_a_running_run(engine: Engine) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with Session(engine) as session:
            if session.scalar(select(TrainingRun.status)) == RunStatus.RUNNING.value:
                return
        time.sleep(0.1)
    raise AssertionError("the first worker never started its run")
