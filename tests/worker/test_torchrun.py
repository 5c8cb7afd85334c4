"""The worker under torchrun: two CPU processes talking over gloo stand in for two GPUs.

A few labels keep training to seconds; the demo pool still has a hundred solutions for the
ranks to score in shares.
"""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.core.db import transaction
from app.datasets.demo_seed import seed
from app.models import Generation, Label, Problem, RunStatus, Solution, TrainingRun
from app.training import request_run
from tests.worker.failing_rank import FAILURE
from tests.worker.test_cycle import label_queued, worker

pytestmark = pytest.mark.sqlite_only

TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2")
"""``torchrun`` on a free port, so that runs beside each other do not collide."""

LABELS = 12
"""Enough labeled examples to train and hold some out, with ``SMALL_RUNS``."""

SMALL_RUNS = {"train_min_labels": "10", "generation_min_done": "0"}
"""Settings that let a run of a dozen labels train and queue a generation."""

FINISHED = {RunStatus.SUCCEEDED.value, RunStatus.FAILED.value}


def seed_and_label(engine: Engine) -> None:
    with transaction(engine) as session:
        seed(session)
    assert label_queued(engine, LABELS) == LABELS


def finish(process: subprocess.Popen[str], timeout: float = 240) -> tuple[str, str]:
    """The output of a process that must end by itself: a hung rank fails the test."""
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"torchrun still running after {timeout}s\n{out}{err}")


def test_the_loop_trains_on_every_rank_records_the_run_on_rank_zero_and_ends_on_sigterm(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    """One launch for the whole cycle: the loop follows rank 0 into a requested run, every
    rank trains and scores its share, rank 0 records it; SIGTERM to rank 0 ends them all."""
    from worker.checkpoint import load_checkpoint
    from worker.score import score_solutions

    seed_and_label(engine)
    with transaction(engine) as session:
        requested = request_run(session).id

    loop = worker(database_url, tmp_path, *TORCHRUN, "-m", "worker", **SMALL_RUNS)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and loop.poll() is None:
        with Session(engine) as session:
            if session.scalar(select(TrainingRun.status)) in FINISHED:
                break
        time.sleep(0.2)
    if loop.poll() is not None:
        pytest.fail("the loop ended by itself:\n" + "".join(loop.communicate()))
    # Rank 0 alone hears SIGTERM; it tells rank 1 to stop too.
    os.kill(rank_pids(loop)[0], signal.SIGTERM)
    out, err = finish(loop, timeout=60)

    assert loop.returncode == 0, out + err
    assert f"rank 1 run {requested} succeeded" in err, err
    with Session(engine) as session:
        run = session.scalars(select(TrainingRun)).one()
        assert run.id == requested
        assert run.status == RunStatus.SUCCEEDED.value and run.is_current
        metrics = run.metrics or {}
        # Alice's labels, and the demo's gold labels (an admin's): QC and screening answers
        # stay out of training by default.
        trainable = select(func.count()).where(
            Label.is_quality_control.is_(False), Label.is_initial_screening.is_(False)
        )
        assert metrics["train"]["world_size"] == 2
        assert metrics["labels"] == session.scalar(trainable) >= LABELS
        assert metrics["evaluation"]["sets"]["held_out_examples"] > 0
        assert "status" in metrics["evaluation"]["step_auroc"]
        assert [p.name for p in tmp_path.iterdir()] == [f"run-{requested}"]
        assert run.checkpoint_path == str(tmp_path / f"run-{requested}")
        generation = session.scalars(select(Generation)).one()
        queued = generation.selected + generation.control
        assert generation.run_id == run.id and queued == metrics["selection"]["queued"] > 0
        assert queued == session.scalar(
            select(func.count()).select_from(Solution).where(Solution.generation == 1)
        )
        scored = session.execute(
            select(Solution.prm_score, Solution.prm_step_scores, Solution.steps, Problem.text)
            .join(Problem)
            .where(Solution.scored_by_run_id == run.id)
            .order_by(Solution.id)
        ).all()
    # The ranks scored the pool in shares; rank 0 put the scores back in order, so they
    # are what the checkpoint gives each solution on its own.
    assert len(scored) == metrics["pool_scored"] > 50
    model, tokenizer, args, _meta = load_checkpoint(tmp_path / f"run-{requested}")
    expected = score_solutions(model, tokenizer, [(s.text, s.steps) for s in scored], args)
    for solution, score in zip(scored, expected, strict=True):
        assert solution.prm_step_scores == pytest.approx(score.step_scores, abs=1e-7)
        assert solution.prm_score == pytest.approx(score.score, abs=1e-7)


@pytest.mark.parametrize(
    ("rank", "call", "step"),
    [
        (0, "grade_solutions", "grade"),  # rank 0's own work: the others wait for it
        (1, "fit", "train"),  # inside collectives: rank 0 waits for rank 1
    ],
)
def test_a_failure_on_one_rank_ends_every_rank_and_fails_the_run(
    engine: Engine, database_url: str, tmp_path: Path, rank: int, call: str, step: str
) -> None:
    seed_and_label(engine)

    failing = worker(
        database_url,
        tmp_path,
        *TORCHRUN,
        "-m",
        "tests.worker.failing_rank",
        str(rank),
        call,
        **SMALL_RUNS,
    )
    _out, err = finish(failing)

    assert failing.returncode != 0
    # torchrun's summary lists every rank that failed, with its exit status.
    exit_codes = [int(code) for code in re.findall(r"^\s*exitcode\s*:\s*(-?\d+)", err, re.M)]
    assert len(exit_codes) == 2 and 0 not in exit_codes, err
    with Session(engine) as session:
        run = session.scalars(select(TrainingRun)).one()
        assert run.status == RunStatus.FAILED.value and run.step == step
        assert f"rank {rank}: " in (run.error or "")
        assert f"{FAILURE} on rank {rank}" in (run.error or ""), run.error
        assert run.checkpoint_path is None and not run.is_current
        assert session.scalars(select(Generation)).first() is None
    assert list(tmp_path.iterdir()) == []


def rank_pids(torchrun: subprocess.Popen[str]) -> dict[int, int]:
    """The processes torchrun started, by rank (from /proc: Linux only)."""
    children = Path(f"/proc/{torchrun.pid}/task/{torchrun.pid}/children").read_text().split()
    pids = {}
    for pid in map(int, children):
        environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        rank = next(item for item in environment if item.startswith(b"RANK="))
        pids[int(rank.removeprefix(b"RANK="))] = pid
    return pids
