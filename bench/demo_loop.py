"""The demo's loop as a new user meets it: how long the worker takes, and what its first run
shows.

    .venv/bin/python -m bench.demo_loop                   # SmolLM2-135M, the CPU default
    .venv/bin/python -m bench.demo_loop --model tiny      # seconds, for a quick look

A fresh SQLite database gets the demo (``steplabel seed-demo``: its problems, the queue,
the pool and the users); the demo's two labelers, simulated, label ``--labels`` (60) tasks
in turn through the labeling code (queue, lease, submission rules) as a careful labeler
would: every step +1 up to the demo's planted slip, which gets -1 (``demo_slips``), and
where the slip's step has alternatives, +1 for the one without the slip and -1 for the one
slipped another way; a solution the demo did not plant a slip in, but whose answer is graded
wrong, -1 at its last step; a phase-1 task has every candidate rated +1 and goes on with
the first. Then the worker does what ``make run``'s worker does: it computes the features
of its evaluation sets and of the pool while it waits for labels (timed: the first start's
warm-up), then one run (timed: what a labeler waits for). The run's figures are printed as
the PRM page shows them.

The checkpoints and feature cache go to a temporary directory, so the warm-up starts from
nothing, as on a fresh machine (``--checkpoint-dir`` keeps them, and a second call then
shows a warm start). Evaluation sets come from ../shared/data (``--data``), with the
worker's default sizes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from app.auth.sessions import Login
from app.core import schema
from app.core.config import Settings
from app.core.db import make_engine, transaction
from app.datasets import demo
from app.datasets.demo_seed import DEMO_PROBLEMS, QUEUED_PER_PROBLEM, seed
from app.grading import grade_solutions
from app.labeling import repository
from app.labeling.service import next_lease, queue_rules, submit_label
from app.labeling.submission import SubmissionInput
from app.models import Solution, TaskStyle, TrainingRun, User, utc_now
from bench import SHARED_DATA
from worker.cycle import run_one
from worker.warm import warm_feature_cache

LABELERS = ("alice", "bob")


def simulated_label(
    steps: Sequence[str],
    alternatives: Sequence[Sequence[str]],
    slip: demo.SlippedStep | None,
    phase1: bool,
) -> Any:
    """What the simulated labeler sends for a task (see the module docstring); ``slip`` is
    its first error, None if it has none."""
    choices = [*alternatives, *[[]] * (len(steps) - len(alternatives))]
    if phase1:
        rated = [
            {"rating": 1, "alternative_ratings": [1] * len(others), "chosen": 0}
            for others in choices
        ]
        return {"steps": rated, "finish_reason": "solution", "total_time": 60_000}
    if slip is None:
        rated = [{"rating": 1} for _ in steps]
    else:
        at_slip = [slip.alternatives[text] for text in choices[slip.index]]
        rated = [{"rating": 1} for _ in range(slip.index)]
        rated.append({"rating": -1, "alternative_ratings": at_slip})
    return {
        "steps": rated,
        "finish_reason": "solution" if slip is None else "found_error",
        "total_time": 60_000,
    }


def first_error(
    steps: Sequence[str], wrong: bool, slips: dict[tuple[str, ...], demo.SlippedStep | None]
) -> demo.SlippedStep | None:
    """The planted slip, or for a solution the demo knows nothing of, its last step (with
    no alternatives known) if its answer is wrong."""
    if tuple(steps) in slips:
        return slips[tuple(steps)]
    return demo.SlippedStep(len(steps) - 1, {}) if wrong and steps else None


def label(engine: Engine, settings: Settings, count: int) -> int:
    """The demo labelers label ``count`` tasks in turn (fewer if the queue runs dry)."""
    problems = demo.demo_problems(count=DEMO_PROBLEMS)
    slips = demo.demo_slips(problems, per_problem=QUEUED_PER_PROBLEM)
    labeled, active = 0, list(LABELERS)
    while active and labeled < count:
        name = active[labeled % len(active)]
        with transaction(engine) as session:
            labeler = session.scalars(select(User).where(User.name == name)).one()
            connection = session.connection()
            # As the labeling pages do (app/labeling/service.py), with this run's settings.
            login = Login(labeler.id, labeler.session_version, {})
            rules = queue_rules(connection, settings)
            _, lease = next_lease(connection, login, utc_now(), rules)
            if lease is None:
                active.remove(name)
                continue
            _, task = repository.labeler_and_task(connection, labeler.id, lease.id)
            solution = session.get(Solution, lease.solution_id)
            if task is None or solution is None:
                raise RuntimeError(f"assignment {lease.id} lost its task")
            steps = task.steps or []
            slip = first_error(steps, solution.answer_correct is False, slips)
            phase1 = task.style == TaskStyle.PHASE1.value
            body = simulated_label(steps, task.alternatives or [], slip, phase1)
            answer = SubmissionInput.model_validate(body)
            one = dataclasses.replace(rules, overlap=1)  # as this loop always stored them
            submit_label(connection, login, lease.id, answer, utc_now(), one)
            labeled += 1
    return labeled


def figure(estimate: dict[str, Any] | None) -> str:
    if not estimate or estimate.get("status", "ok") != "ok" or "value" not in estimate:
        return str((estimate or {}).get("status", "n/a"))
    return f"{estimate['value']:.3f} [{estimate['low']:.3f}, {estimate['high']:.3f}]"


def report(run: TrainingRun, warm_seconds: float, run_seconds: float) -> dict[str, Any]:
    metrics = run.metrics or {}
    evaluation = metrics.get("evaluation", {})
    best_of_n = evaluation.get("best_of_n", {})
    return {
        "status": run.status,
        "warm_up_seconds": round(warm_seconds, 1),
        "run_seconds": round(run_seconds, 1),
        "labels_used": run.labels_used,
        "timings": run.timings,
        "sets": evaluation.get("sets"),
        "step_auroc": figure(evaluation.get("step_auroc")),
        "processbench_f1": figure(evaluation.get("processbench", {}).get("f1")),
        "best_of_n": {pick: figure(best_of_n.get(pick)) for pick in ("prm", "majority", "random")},
        "gate": metrics.get("gate", {}).get("reason"),
        "selection": metrics.get("selection"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.demo_loop", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--model", default="smollm2-135m", help="the worker's base model")
    parser.add_argument("--labels", type=int, default=60)
    parser.add_argument("--data", type=Path, default=SHARED_DATA, help="evaluation files")
    parser.add_argument("--checkpoint-dir", type=Path, help="default: a temporary directory")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")  # the warm-up's
    with tempfile.TemporaryDirectory(prefix="steplabel-demo-loop-") as scratch:
        settings = Settings(
            database_url=f"sqlite:///{scratch}/demo.sqlite3",
            checkpoint_dir=options.checkpoint_dir or Path(scratch) / "checkpoints",
            prm_base_model=options.model,
            eval_dir=options.data,
        )
        result = loop(settings, options.labels)
    print(json.dumps(result, indent=2))
    if options.json:
        options.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["status"] == "succeeded" else 1


def loop(settings: Settings, labels: int) -> dict[str, Any]:
    schema.upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    with transaction(engine) as session:
        print(seed(session).describe().split("\n")[0], file=sys.stderr)
        grade_solutions(session)  # the simulated labelers go by the graded answers
    print(f"labeled {label(engine, settings, labels)} tasks", file=sys.stderr)
    started = time.perf_counter()
    computed = warm_feature_cache(settings, engine, lambda: False)
    warm_seconds = time.perf_counter() - started
    print(f"warm-up: {computed} sequences in {warm_seconds:.0f} s", file=sys.stderr)
    started = time.perf_counter()
    outcome = run_one(engine, settings, force=True, should_stop=lambda: False)
    run_seconds = time.perf_counter() - started
    if outcome is None:
        raise RuntimeError("no run: another worker holds the lock")
    with transaction(engine) as session:
        run = session.get(TrainingRun, outcome.id)
        if run is None:
            raise RuntimeError(f"run {outcome.id} is gone")
        return report(run, warm_seconds, run_seconds)


if __name__ == "__main__":
    sys.exit(main())
