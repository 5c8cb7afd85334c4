"""End to end: labels in the database, `python -m worker once`, a new generation queued."""

import os
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.datasets.demo_seed import QUALITY_CONTROL_QUESTIONS, seed
from app.db import transaction
from app.labeling.quality import mark_quality_control
from app.labeling.queue import next_assignment
from app.labeling.submission import SubmissionInput, leased_task, save_label
from app.models import (
    Generation,
    GenerationQualityControl,
    GoldLabel,
    Label,
    QueueState,
    RunStatus,
    Solution,
    TrainingRun,
    User,
)
from tests.labeling.test_queue import RULES

ROOT = Path(__file__).resolve().parents[2]


def label_queued(engine: Engine, limit: int | None = None) -> int:
    """Alice labels the queued demo solutions (all, or ``limit``): a wrong answer gets -1
    at its last step."""
    labeled = 0
    while limit is None or labeled < limit:
        with transaction(engine) as session:
            alice = session.scalars(select(User).where(User.name == "alice")).one()
            lease = next_assignment(session.connection(), alice, RULES)
            if lease is None:
                return labeled
            task = leased_task(session.connection(), lease.id)
            solution = session.get(Solution, lease.solution_id)
            assert task is not None and solution is not None
            steps = solution.steps or []
            wrong = solution.answer_correct is False
            ratings = [1] * (len(steps) - 1) + [-1 if wrong else 1]
            reason = "found_error" if wrong else "solution"
            body = SubmissionInput.model_validate(
                {
                    "steps": [{"rating": r} for r in ratings],
                    "finish_reason": reason,
                    "total_time": 1000,
                }
            )
            save_label(session.connection(), task, alice, body, overlap=1)
            labeled += 1
    return labeled


def worker(database_url: str, checkpoints: Path, *command: str) -> subprocess.Popen[str]:
    """``python *command`` (``-m worker once``, say) on the database, from the project root."""
    env = {
        **os.environ,
        "STEPLABEL_DATABASE_URL": database_url,
        "STEPLABEL_CHECKPOINT_DIR": str(checkpoints),
        "STEPLABEL_SELECT_PER_PROBLEM": "2",
    }
    return subprocess.Popen(
        [sys.executable, *command],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_once_trains_selects_and_queues_a_generation(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    from app.grading import grade_solutions

    with transaction(engine) as session:
        seed(session)
        grade_solutions(session)
    assert label_queued(engine) > 50
    with transaction(engine) as session:
        # One of alice's labels becomes a QC question: the new generation gets it, beside
        # the demo's own questions.
        question = session.execute(
            select(Label.solution_id, Label.id)
            .join(User, User.id == Label.labeler_id)
            .where(User.name == "alice")
            .limit(1)
        ).one()
        mark_quality_control(session, *question)
        questions = sorted(session.scalars(select(GoldLabel.solution_id)))
    assert len(questions) == QUALITY_CONTROL_QUESTIONS + 1

    first = worker(database_url, tmp_path, "-m", "worker", "once")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with Session(engine) as session:
            if session.scalar(select(TrainingRun.status)) == RunStatus.RUNNING.value:
                break
        time.sleep(0.2)
    second = worker(database_url, tmp_path, "-m", "worker", "once")
    _, second_err = second.communicate(timeout=120)
    first_out, first_err = first.communicate(timeout=600)
    assert first.returncode == 0, first_out + first_err
    assert second.returncode == 0 and "another worker is training" in second_err

    with Session(engine) as session:
        run = session.scalars(select(TrainingRun)).one()  # the second did not train
        assert run.status == RunStatus.SUCCEEDED.value and run.is_current
        metrics = run.metrics or {}
        for key in (
            "step_accuracy",
            "auroc_negative",
            "first_error_f1",
            "best_of_n_prm",
            "selection_yield",
        ):
            assert key in metrics, key
        assert run.labels_used and Path(run.checkpoint_path or "").is_dir()
        assert set(run.timings or {}) >= {"grade", "data", "train", "evaluate", "score", "select"}
        generation = session.scalars(select(Generation)).one()
        assert generation.run_id == run.id and generation.number == 1
        assert generation.quality_control == len(questions)
        served_questions = select(GenerationQualityControl.solution_id).order_by(
            GenerationQualityControl.solution_id
        )
        assert session.scalars(served_questions).all() == questions
        queued = session.scalars(select(Solution).where(Solution.generation == 1)).all()
        assert len(queued) == generation.selected == 2 * 24
        assert all(s.queue_state == QueueState.OPEN.value for s in queued)
        assert all(s.prm_score is not None and s.scored_by_run_id == run.id for s in queued)
        wrong = sum(s.answer_correct is False for s in queued)
        assert generation.wrong_answers == wrong > 0
        # The new generation reaches labelers: bob gets one of its solutions next.
        bob = session.scalars(select(User).where(User.name == "bob")).one()
        served = next_assignment(session.connection(), bob, RULES)
        assert served is not None
        served_solution = session.get(Solution, served.solution_id)
        assert served_solution is not None and served_solution.generation in (0, 1)
        assert session.scalar(
            select(func.count()).select_from(Solution).where(Solution.generation == 1)
        ) == len(queued)


def test_a_second_run_is_compared_with_the_current_checkpoint_on_its_held_out_set(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    from worker.train import is_improvement

    with transaction(engine) as session:
        seed(session)
    label_queued(engine)
    for _ in range(2):
        process = worker(database_url, tmp_path, "-m", "worker", "once")
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, out + err
    with Session(engine) as session:
        first, second = session.scalars(select(TrainingRun).order_by(TrainingRun.id)).all()
    assert first.metrics and second.metrics
    assert "current_checkpoint_on_this_held_out" not in first.metrics or (
        first.metrics["current_checkpoint_on_this_held_out"] is None
    )
    judged = second.metrics["current_checkpoint_on_this_held_out"]
    assert judged is not None and judged["held_out_steps"] == second.metrics["held_out_steps"]
    assert second.is_current == is_improvement(second.metrics, judged)
    assert first.is_current != second.is_current
