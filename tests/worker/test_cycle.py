"""End to end: labels in the database, `python -m worker once`, a new generation queued."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import transaction
from app.datasets.demo_seed import DEMO_PROBLEMS, QUALITY_CONTROL_QUESTIONS, seed
from app.labeling import service
from app.labeling.submission import SubmissionInput
from app.models import (
    Generation,
    GenerationQualityControl,
    GoldLabel,
    Label,
    QueueState,
    RunStatus,
    Solution,
    TaskStyle,
    TrainingRun,
    User,
    utc_now,
)
from app.pool_shape import BY_POOL_SHAPE, strategy_for_pool
from app.quality.questions import mark_quality_control
from tests.factories import login_of, make_label, make_solution, next_lease, task_of
from tests.labeling.test_queue import RULES

if TYPE_CHECKING:
    from worker.cycle import RunOutcome

ROOT = Path(__file__).resolve().parents[2]


def label_queued(
    engine: Engine, limit: int | None = None, labelers: tuple[str, ...] = ("alice",)
) -> int:
    """The ``labelers`` label the queued demo solutions in turn (all, or ``limit`` labels):
    a wrong answer gets -1 at its last step."""
    labeled = 0
    active = list(labelers)
    while active and (limit is None or labeled < limit):
        name = active[labeled % len(active)]
        with transaction(engine) as session:
            labeler = session.scalars(select(User).where(User.name == name)).one()
            lease = next_lease(session.connection(), labeler, RULES)
            if lease is None:
                active.remove(name)
                continue
            task = task_of(session.connection(), labeler, lease)
            solution = session.get(Solution, lease.solution_id)
            assert solution is not None
            body = SubmissionInput.model_validate(
                {**simulated_label(solution, task.alternatives or []), "total_time": 1000}
            )
            connection, login = session.connection(), login_of(labeler)
            service.submit_label(connection, login, lease.id, body, utc_now(), RULES)
            labeled += 1
    return labeled


def simulated_label(solution: Solution, alternatives: list[list[str]]) -> dict[str, Any]:
    """A wrong answer gets -1 at its last step; a phase-1 task has every candidate rated +1
    and continues with the first."""
    steps = solution.steps or []
    if solution.style == TaskStyle.PHASE1.value:
        rated = [
            {
                "rating": 1,
                "alternative_ratings": [1] * len(alternatives[k] if k < len(alternatives) else []),
                "chosen": 0,
            }
            for k in range(len(steps))
        ]
        return {"steps": rated, "finish_reason": "solution"}
    wrong = solution.answer_correct is False
    ratings = [1] * (len(steps) - 1) + [-1 if wrong else 1]
    reason = "found_error" if wrong else "solution"
    return {"steps": [{"rating": r} for r in ratings], "finish_reason": reason}


TEST_WORKER = {
    "prm_base_model": "tiny",
    "select_per_problem": "2",
    # fp32 on any CPU (bf16 is the default with AMX): tests compare scores exactly.
    "train_precision": "fp32",
    # Two passes, not the tiny model's 15: these tests check what a run records and queues,
    # not how well it learns (tests/worker/test_train.py does that).
    "train_epochs": "2",
    # Half the tiny model's 512 tokens (its byte tokenizer makes the demo's solutions 214 to
    # 687 long, 403 the median): half the training time. A longer solution loses its first
    # steps (the last, with the error, stays), as any run's does.
    "train_max_length": "256",
}
"""The worker's settings in these tests, besides the database and the checkpoints."""
WORKER_ON_GO = (
    "import sys; from worker.__main__ import main; "
    "sys.stdin.readline(); sys.exit(main(sys.argv[1:]))"
)
"""``-c`` code for a worker that does its imports, then waits for a line on stdin to start:
started on a go, it meets another worker's run that is still going, however fast that run
is (the imports take seconds, a run on a fast CPU about as long)."""


def worker(
    database_url: str, checkpoints: Path, *command: str, **settings: str
) -> subprocess.Popen[str]:
    """``python *command`` (``-m worker once``, say) on the database, from the project root,
    with the tiny model; ``settings`` are more STEPLABEL_ variables (lowercase names)."""
    # The shell's own STEPLABEL_ settings (a strategy, a model) would change what is tested.
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("STEPLABEL_")}
    env = {
        **inherited,
        "STEPLABEL_DATABASE_URL": database_url,
        "STEPLABEL_CHECKPOINT_DIR": str(checkpoints),
        **{f"STEPLABEL_{name.upper()}": value for name, value in (TEST_WORKER | settings).items()},
    }
    return subprocess.Popen(
        [sys.executable, *command],
        cwd=ROOT,
        env=env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_once_trains_selects_and_queues_a_generation(
    engine: Engine, database_url: str, tmp_path: Path, shared_data: Path
) -> None:
    from app.grading import grade_solutions
    from worker.__main__ import BUSY

    with transaction(engine) as session:
        seed(session)
        grade_solutions(session)
    # As the new user does: 60 labels by the demo's two labelers, then a run.
    assert label_queued(engine, limit=60, labelers=("alice", "bob")) == 60
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

    evaluation = {
        "eval_dir": str(shared_data),
        "eval_processbench_per_subset": "6",
        "eval_best_of_n_problems": "5",
        # 60 of the demo's 113 tasks (its first 12 solutions go to both labelers): this
        # run queues a generation past 50% labeled, not the default 80%.
        "generation_min_done": "0.5",
    }
    first = worker(database_url, tmp_path, "-m", "worker", "once", **evaluation)
    second = worker(database_url, tmp_path, "-c", WORKER_ON_GO, "once")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with Session(engine) as session:
            if session.scalar(select(TrainingRun.status)) == RunStatus.RUNNING.value:
                break
        time.sleep(0.2)
    _, second_err = second.communicate("go\n", timeout=120)
    first_out, first_err = first.communicate(timeout=600)
    assert first.returncode == 0, first_out + first_err
    assert second.returncode == BUSY, second_err
    said = second_err.splitlines()[-1]  # after the log's lines
    assert said.startswith("run 1 is training on ") and said.endswith("; nothing done")

    with Session(engine) as session:
        run = session.scalars(select(TrainingRun)).one()  # the second did not train
        assert run.status == RunStatus.SUCCEEDED.value and run.is_current
        metrics = run.metrics or {}
        evaluation = metrics["evaluation"]
        assert evaluation["sets"]["held_out_problems"] > 0
        assert evaluation["sets"]["processbench_test"] == 4 * 6
        # The demo's first 60 labels span enough problems for a held-out figure.
        auroc = evaluation["step_auroc"]
        assert auroc["status"] == "ok", auroc
        assert auroc["low"] <= auroc["value"] <= auroc["high"]
        processbench = evaluation["processbench"]
        assert set(processbench["subsets"]) == {"gsm8k", "math", "olympiadbench", "omnimath"}
        f1 = processbench["f1"]
        assert f1["low"] <= f1["value"] <= f1["high"] and f1["n"] == 24
        assert evaluation["best_of_n"]["problems"] == 5
        assert {"prm", "majority", "random"} <= set(evaluation["best_of_n"])
        gate = metrics["gate"]
        assert (gate["promote"], gate["reason"], gate["metric"]) == (True, "first model", None)
        assert metrics["training_args"]["mode"] == "full"  # the tiny model's default
        # The strategy's 2 per problem, and about a tenth of the generation besides: the
        # uniform control share (a drawn solution the strategy also chose counts as control).
        control = round(2 * DEMO_PROBLEMS * 0.1 / 0.9)
        selection = metrics["selection"]
        assert metrics["pace"]["due"], metrics["pace"]
        assert selection["control"] == control, selection
        # No strategy set: the worker selects by the settings' default, the rule of the
        # pool's shape (#39): the demo's pool has a few solutions per problem.
        assert Settings.model_fields["select_strategy"].default == BY_POOL_SHAPE
        shape = re.match(r"your pool has ([\d.]+) unlabeled", selection["rule"])
        assert shape, selection["rule"]
        median = float(shape.group(1))
        assert 1 < median < 16  # the demo's pool: a few solutions per problem
        assert selection["strategy"] == strategy_for_pool([median]).strategy
        assert 2 * DEMO_PROBLEMS <= selection["queued"] <= 2 * DEMO_PROBLEMS + control
        assert selection["taken_meanwhile"] == 0
        assert run.labels_used == metrics["labels_trained"] < metrics["labels"]
        # The worker's own output says what the run did, not only "succeeded".
        said = f"queued generation {metrics['generation']}: {selection['queued']} solutions"
        assert f"run {run.id}: succeeded: first model; {said}" in first_out
        # Meanwhile its log said which step it was on, and how long each took.
        for step in ("grade", "train", "evaluate", "select"):
            assert f"run {run.id}: {step}\n" in first_err
            assert re.search(rf"run {run.id}: {step} done in \d+\.\d s", first_err)
        assert metrics["split"]["identity"] == "problem-hash/1 seed=0 held_out=0.2"
        assert Path(run.checkpoint_path or "").is_dir()
        assert run.checkpoint_bytes and run.checkpoint_bytes > 100_000
        assert set(run.timings or {}) >= {
            "grade",
            "data",
            "prepare",
            "train",
            "evaluate",
            "checkpoint",
            "compare",
            "prune",
            "score",
            "select",
        }
        generation = session.scalars(select(Generation)).one()
        assert generation.run_id == run.id and generation.number == 1
        assert generation.quality_control == len(questions)
        served_questions = select(GenerationQualityControl.solution_id).order_by(
            GenerationQualityControl.solution_id
        )
        assert session.scalars(served_questions).all() == questions
        queued = session.scalars(select(Solution).where(Solution.generation == 1)).all()
        assert len(queued) == generation.selected + generation.control == selection["queued"]
        assert sum(s.is_control for s in queued) == generation.control == control
        assert all(s.queue_state == QueueState.OPEN.value for s in queued)
        assert all(s.prm_score is not None and s.scored_by_run_id == run.id for s in queued)
        wrong = sum(s.answer_correct is False for s in queued if not s.is_control)
        assert generation.wrong_answers == wrong > 0
        # The new generation reaches labelers: bob gets one of its solutions next.
        bob = session.scalars(select(User).where(User.name == "bob")).one()
        served = next_lease(session.connection(), bob, RULES)
        assert served is not None
        served_solution = session.get(Solution, served.solution_id)
        assert served_solution is not None and served_solution.generation in (0, 1)
        assert session.scalar(
            select(func.count()).select_from(Solution).where(Solution.generation == 1)
        ) == len(queued)


def run_once(
    engine: Engine,
    database_url: str,
    checkpoints: Path,
    should_stop: Callable[[], bool] = lambda: False,
    **settings: str,
) -> "RunOutcome":
    """What ``python -m worker once`` does, in this process. The first test below runs the
    command itself; the others save a process start (torch and transformers to import)."""
    from worker.cycle import run_one

    options = TEST_WORKER | settings
    configured = Settings(database_url=database_url, checkpoint_dir=checkpoints, **options)
    outcome = run_one(engine, configured, force=True, should_stop=should_stop)
    assert outcome is not None, "another worker holds the lock"
    return outcome


@pytest.mark.sqlite_only
def test_a_second_run_is_judged_against_the_current_model_and_old_checkpoints_go(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    with transaction(engine) as session:
        seed(session)
    label_queued(engine)
    for _ in range(2):
        outcome = run_once(engine, database_url, tmp_path, checkpoint_keep_last="1")
        assert outcome.status == RunStatus.SUCCEEDED.value, outcome.error
    with Session(engine) as session:
        first, second = session.scalars(select(TrainingRun).order_by(TrainingRun.id)).all()
    assert first.metrics and second.metrics
    assert "current_on_this_evaluation" not in first.metrics
    judged = second.metrics["current_on_this_evaluation"]
    ours = second.metrics["evaluation"]
    assert judged["sets"] == ours["sets"], "both models are judged on the same examples"
    gate = second.metrics["gate"]
    assert second.is_current == gate["promote"]
    assert first.is_current != second.is_current
    assert gate["reason"].startswith("promoted: " if gate["promote"] else "kept the current")
    assert outcome.summary is not None and outcome.summary.startswith(gate["reason"])
    # Keep the newest one and the current one: run 1 goes unless it is still current.
    assert second.checkpoint_path and Path(second.checkpoint_path).is_dir()
    assert (first.checkpoint_path is not None) == first.is_current
    assert second.metrics["pruned_checkpoints"] == ([] if first.is_current else [first.id])
    assert not (tmp_path / f"run-{first.id}").exists() or first.is_current


def stopped_once_at(engine: Engine, database_url: str, tmp_path: Path, step: str) -> "RunOutcome":
    """A run on 20 of the demo's labels, asked to stop once the run row shows ``step``
    (SIGTERM arriving while that step runs: the run stops before the next)."""
    with transaction(engine) as session:
        seed(session)
    assert label_queued(engine, limit=20) == 20

    def during_the_step() -> bool:
        with Session(engine) as session:
            return session.scalar(select(TrainingRun.step)) == step

    return run_once(engine, database_url, tmp_path, during_the_step, train_min_labels="10")


@pytest.mark.sqlite_only
def test_a_stop_after_the_gate_ends_the_run_succeeded_with_its_model_current(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    """SIGTERM once the gate has judged the model: the run succeeded (a failed run is never
    the current one) and says what it did not get to."""
    outcome = stopped_once_at(engine, database_url, tmp_path, "compare")

    assert outcome.status == RunStatus.SUCCEEDED.value, outcome.error
    assert outcome.summary == "first model; stopped before prune"
    with Session(engine) as session:
        run = session.scalars(select(TrainingRun)).one()
        assert run.is_current and Path(run.checkpoint_path or "").is_dir()
        assert session.scalar(select(func.count()).select_from(Generation)) == 0
    metrics = run.metrics or {}
    assert metrics["stopped_after_gate"] == "stopped before prune"
    assert metrics["gate"]["promote"] and "selection" not in metrics


@pytest.mark.sqlite_only
def test_a_run_stopped_between_its_checkpoint_and_the_gate_removes_the_checkpoint(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    """No row names a checkpoint until the gate has judged it, so pruning would never find
    one left by a run that failed or stopped before: the run removes its own."""
    outcome = stopped_once_at(engine, database_url, tmp_path, "checkpoint")

    assert outcome.status == RunStatus.FAILED.value
    assert outcome.error == "stopped before compare"
    with Session(engine) as session:
        run = session.scalars(select(TrainingRun)).one()
        assert run.checkpoint_path is None and not run.is_current
        # It keeps what it got to: an admin reads why it ended beside what it had done.
        assert run.metrics is not None and run.metrics["labels"] >= 20
        assert run.metrics["training_args"]["base_model"] == "tiny"
        assert {"grade", "data", "prepare", "train", "evaluate", "checkpoint"} <= set(run.timings)
    assert not (tmp_path / f"run-{run.id}").exists()


@pytest.mark.sqlite_only
def test_no_generation_is_queued_while_the_open_one_is_mostly_unlabeled(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    with transaction(engine) as session:
        seed(session)
    assert label_queued(engine, limit=20) == 20

    outcome = run_once(engine, database_url, tmp_path, train_min_labels="10")

    assert outcome.status == RunStatus.SUCCEEDED.value, outcome.error
    with Session(engine) as session:
        run = session.scalars(select(TrainingRun)).one()
        assert session.scalar(select(func.count()).select_from(Generation)) == 0
        assert session.scalar(select(func.max(Solution.generation))) == 0
    assert run.status == RunStatus.SUCCEEDED.value and run.is_current
    metrics = run.metrics or {}
    assert not metrics["pace"]["due"] and metrics["pace"]["open_generation"] == 0
    assert metrics["selection"]["queued"] == 0
    assert metrics["selection"]["reason"].startswith("generation 0 is ")
    assert metrics["selection"]["reason"].endswith("labeled; the next is queued at 80%")
    assert outcome.summary == f"first model; nothing queued: {metrics['selection']['reason']}"


@pytest.mark.sqlite_only
def test_too_few_labels_to_train_on_make_no_run(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    """Labels on held-out problems do not count: 40 labels in all are not enough."""
    with transaction(engine) as session:
        seed(session)
    label_queued(engine, limit=40)

    outcome = run_once(engine, database_url, tmp_path, train_min_labels="40")

    assert outcome.status == RunStatus.SUCCEEDED.value, outcome.error
    with Session(engine) as session:
        run = session.scalars(select(TrainingRun)).one()
    assert run.checkpoint_path is None and not run.is_current
    metrics = run.metrics or {}
    held_out = metrics["labels"] - metrics["labels_trained"]
    assert metrics["labels"] >= 40 and held_out > 0
    assert run.labels_used == metrics["labels_trained"] < 40
    assert metrics["skipped"] == (
        f"{run.labels_used} labels to train on ({held_out} more on held-out problems); "
        "a run needs 40"
    )
    assert outcome.summary == f"skipped: {metrics['skipped']}"


def trained_problem(texts: list[str]) -> str:
    """The first of ``texts`` that the default split trains on (not held out)."""
    from worker.eval_sets import unit_hash
    from worker.split import split_key

    return next(t for t in texts if unit_hash(0, str(split_key(t))) >= 0.2)


@pytest.mark.sqlite_only
def test_evaluation_leaves_out_what_was_trained_on_and_another_split_is_not_compared(
    engine: Engine, database_url: str, tmp_path: Path, shared_data: Path
) -> None:
    """A team labels a ProcessBench problem and a best-of-N one (typeset their own way):
    they leave those evaluation sets. A run on another split is not compared on held-out
    problems, and leaves out what the current PRM trained on."""
    from worker.eval_sets import file_sets

    processbench, best_of_n = file_sets(shared_data, 6, 5)
    assert processbench is not None
    imported = [
        trained_problem([i.problem for i in processbench.test]),
        trained_problem([p.problem for p in best_of_n]),
    ]
    with transaction(engine) as session:
        seed(session)
        alice = session.scalars(select(User).where(User.name == "alice")).one()
        for text in imported:
            # Typeset otherwise: another case, a period, spaces.
            solution = make_solution(session, ["Try.", "# Answer\n\n1"], problem_text=f" {text}.")
            make_label(session, alice, solution, [[1], [-1]], finish_reason="found_error")
    label_queued(engine, labelers=("alice", "bob"))
    evaluation = {
        "eval_dir": str(shared_data),
        "eval_processbench_per_subset": "6",
        "eval_best_of_n_problems": "5",
    }

    first = run_once(engine, database_url, tmp_path, **evaluation)
    other_split = run_once(engine, database_url, tmp_path, train_split_seed="1", **evaluation)

    assert first.status == other_split.status == RunStatus.SUCCEEDED.value, other_split.error
    with Session(engine) as session:
        one, two = session.scalars(select(TrainingRun).order_by(TrainingRun.id)).all()
    metrics = one.metrics or {}
    ours = "a problem this run's PRM trained on"
    left_out = {
        (item["set"], item["reason"]): item["count"] for item in metrics["evaluation_left_out"]
    }
    pb_items = sum(i.problem == imported[0] for i in processbench.test)
    assert left_out[("processbench_test", ours)] == pb_items >= 1
    assert left_out[("best_of_n", ours)] == 1
    sets = metrics["evaluation"]["sets"]
    assert sets["processbench_test"] == 4 * 6 - pb_items and sets["best_of_n_problems"] == 4
    recorded = json.loads(Path(one.checkpoint_path or "", "metrics.json").read_text())
    assert recorded["trained_on"]["identity"] == metrics["split"]["identity"]
    assert len(recorded["trained_on"]["trained_problems"]) > 20
    assert "trained_on" not in metrics  # the run's row keeps its figures, not its problems

    later = two.metrics or {}
    assert later["split"]["identity"] == "problem-hash/1 seed=1 held_out=0.2"
    gate = later["gate"]
    assert gate["not_judged"]["step_auroc"].startswith(
        "the current PRM was judged on another split (problem-hash/1 seed=0 held_out=0.2"
    )
    assert "step_auroc" not in [j["metric"] for j in gate["judged"]]
    # The held-out problems of the new split that the current PRM trained on: left out.
    theirs = {
        item["set"]: item["count"]
        for item in later["evaluation_left_out"]
        if item["reason"] == "a problem the current PRM trained on"
    }
    assert theirs.get("held_out", 0) > 0


@pytest.mark.sqlite_only
def test_a_missing_current_checkpoint_is_an_error_not_a_first_model(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    with transaction(engine) as session:
        seed(session)
    label_queued(engine, labelers=("alice", "bob"))
    run_once(engine, database_url, tmp_path)
    with Session(engine) as session:
        current = session.scalars(select(TrainingRun)).one()
    assert current.is_current and current.checkpoint_path
    shutil.rmtree(current.checkpoint_path)

    outcome = run_once(engine, database_url, tmp_path)

    assert outcome.status == RunStatus.SUCCEEDED.value, outcome.error
    with Session(engine) as session:
        first, second = session.scalars(select(TrainingRun).order_by(TrainingRun.id)).all()
    assert first.is_current and not second.is_current
    gate = (second.metrics or {})["gate"]
    assert not gate["promote"] and gate["reason"] != "first model"
    assert gate["error"] == (
        f"the current checkpoint (run {first.id}) is missing: {current.checkpoint_path}"
    )


@pytest.mark.sqlite_only
def test_prm800k_phase1_labels_are_trained_on_beside_the_teams(
    engine: Engine, database_url: str, tmp_path: Path, shared_data: Path
) -> None:
    """STEPLABEL_TRAIN_PHASE1_LABELS: the file's training lines (here its first 12 real
    ones, and one test line that must never be read) join the team's labels."""
    import gzip

    from worker.phase1 import FILE_NAME, training_examples
    from worker.train import split_by_problem

    with gzip.open(shared_data / FILE_NAME, "rt") as lines:
        first = [next(lines) for _ in range(12)]
    test_line = json.loads(first[0]) | {"split": "test", "problem": "A test problem?"}
    phase1 = tmp_path / "phase1.jsonl.gz"
    with gzip.open(phase1, "wt") as out:
        out.writelines([*first, json.dumps(test_line) + "\n"])
    with transaction(engine) as session:
        seed(session)
    label_queued(engine)
    plain = run_once(engine, database_url, tmp_path / "plain")
    outcome = run_once(engine, database_url, tmp_path / "more", train_phase1_labels=str(phase1))

    assert plain.status == outcome.status == RunStatus.SUCCEEDED.value, outcome.error
    with Session(engine) as session:
        without, with_phase1 = session.scalars(select(TrainingRun).order_by(TrainingRun.id))
    assert with_phase1.metrics and without.metrics
    extra = training_examples(phase1)
    assert with_phase1.metrics["phase1_examples"] == len(extra) > 12
    assert "phase1_examples" not in without.metrics
    added = (
        with_phase1.metrics["train"]["labeled_steps"] - without.metrics["train"]["labeled_steps"]
    )
    # Two problems; the split holds one of them out (7.8 minutes in seconds): not trained on.
    kept, held = split_by_problem(extra, 0.2, 0)
    assert kept and held and added == len(kept)
    assert with_phase1.labels_used == without.labels_used
