"""One worker cycle: grade answers, train the PRM, evaluate it, score the pool, select.

Each step runs outside any long transaction and records itself on the run row, so the
dashboard can follow a run and a crash leaves the step it died in. Between steps the
cycle checks ``should_stop`` (SIGTERM) and stops cleanly.
"""

import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, exists, func, select, update
from sqlalchemy.orm import Session

from app.config import Settings
from app.db import transaction
from app.grading import grade_solutions
from app.labeling.quality import add_quality_control_to_generation
from app.models import (
    Generation,
    Label,
    Problem,
    QueueState,
    Solution,
    TrainingRun,
)
from worker import evaluate, runs
from worker.data import training_examples
from worker.model import training_args_for
from worker.score import score_solutions
from worker.select import Candidate, select_convincing
from worker.train import (
    Example,
    evaluate_steps,
    fit,
    is_improvement,
    load_checkpoint,
    save_checkpoint,
    setup,
    split_by_problem,
)

MIN_EXAMPLES = 8
"""Fewer labeled examples than this teach nothing: the run ends without a checkpoint."""


class Stopped(Exception):
    """SIGTERM arrived: the cycle ended between two steps."""


class Cycle:
    """The steps of one run, with their timings kept on the run row."""

    def __init__(
        self, engine: Engine, settings: Settings, run_id: int, should_stop: Callable[[], bool]
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.run_id = run_id
        self.should_stop = should_stop
        self.timings: dict[str, float] = {}
        self.metrics: dict[str, Any] = {}
        self.args = training_args_for(settings.prm_base_model)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        if self.should_stop():
            raise Stopped(f"stopped before {name}")
        with transaction(self.engine) as session:
            runs.mark_step(session, self._run(session), name, self.timings)
        started = time.perf_counter()
        yield
        self.timings[name] = round(time.perf_counter() - started, 3)

    def _run(self, session: Session) -> TrainingRun:
        run = session.get(TrainingRun, self.run_id)
        assert run is not None
        return run

    def run(self) -> None:
        with self.step("grade"), transaction(self.engine) as session:
            graded = grade_solutions(session)
            self.metrics["graded"] = graded.graded
        with self.step("data"), transaction(self.engine) as session:
            examples, label_count = training_examples(session, self.settings)
            self.metrics.update(examples=len(examples), labels=label_count)
        if len(examples) < MIN_EXAMPLES:
            self.metrics["skipped"] = f"needs {MIN_EXAMPLES} labeled examples, has {len(examples)}"
            self._finish(label_count, checkpoint=None, current=False)
            return
        train, held_out = split_by_problem(examples, self.args.held_out_fraction, self.args.seed)
        with self.step("train"):
            model, tokenizer, _device = setup(self.args)
            stats = fit(model, tokenizer, train, self.args, should_stop=self.should_stop)
            self.metrics["train"] = _plain(stats)
        if stats.stopped:
            raise Stopped("stopped during training")
        with self.step("evaluate"):
            self.metrics.update(self._evaluate(model, tokenizer, held_out or train))
        with self.step("checkpoint"):
            checkpoint = self.settings.checkpoint_dir / f"run-{self.run_id}"
            save_checkpoint(checkpoint, model, tokenizer, self.args, self.metrics, label_count)
        with self.step("compare"):
            # The held-out set grows with the labels: judge the current checkpoint on this
            # run's held-out set, not by the figures it got on its own.
            current = _current_model(self.engine)
            current_metrics = (
                None if current is None else evaluate_steps(*current, held_out or train, self.args)
            )
            self.metrics["current_checkpoint_on_this_held_out"] = current_metrics
            becomes_current = current_metrics is None or is_improvement(
                self.metrics, current_metrics
            )
        self._finish(label_count, checkpoint=checkpoint, current=becomes_current)
        scorer = (model, tokenizer) if becomes_current else current
        if scorer is None:
            return
        with self.step("score"):
            scored = self._score_pool(*scorer)
        with self.step("select"):
            self._select(scored)
        self._save_metrics()

    def _evaluate(self, model: Any, tokenizer: Any, held_out: list[Example]) -> dict[str, Any]:
        metrics = dict(evaluate_steps(model, tokenizer, held_out, self.args))
        scores = score_solutions(
            model, tokenizer, [(e.problem, e.steps) for e in held_out], self.args
        )
        metrics.update(
            evaluate.first_error_f1([e.labels for e in held_out], [s.step_scores for s in scores])
        )
        metrics.update(self._best_of_n(model, tokenizer, {e.problem for e in held_out}))
        return metrics

    def _best_of_n(self, model: Any, tokenizer: Any, problems: set[str]) -> dict[str, Any]:
        with transaction(self.engine) as session:
            rows = session.execute(
                select(
                    Solution.problem_id,
                    Problem.text,
                    Solution.steps,
                    Solution.answer,
                    Solution.answer_correct,
                )
                .join(Problem, Problem.id == Solution.problem_id)
                .where(Solution.answer_correct.is_not(None), Problem.text.in_(problems))
            ).all()
        rows = [row for row in rows if row.steps]
        scores = score_solutions(model, tokenizer, [(r.text, r.steps) for r in rows], self.args)
        return evaluate.best_of_n(
            evaluate.GradedSolution(r.problem_id, s.score, r.answer, bool(r.answer_correct))
            for r, s in zip(rows, scores, strict=True)
        )

    def _score_pool(self, model: Any, tokenizer: Any) -> list[Candidate]:
        """Score the unlabeled, unqueued solutions with the current checkpoint."""
        with transaction(self.engine) as session:
            pool = session.execute(
                select(
                    Solution.id,
                    Solution.problem_id,
                    Problem.text,
                    Solution.steps,
                    Solution.answer_correct,
                )
                .join(Problem, Problem.id == Solution.problem_id)
                .where(
                    Solution.queue_state == QueueState.NOT_QUEUED.value,
                    ~exists().where(Label.solution_id == Solution.id),
                )
                .order_by(Solution.id)
            ).all()
        pool = [row for row in pool if row.steps]
        scores = score_solutions(model, tokenizer, [(r.text, r.steps) for r in pool], self.args)
        with transaction(self.engine) as session:
            session.execute(
                update(Solution),
                [
                    {
                        "id": r.id,
                        "prm_score": s.score,
                        "prm_min_step": s.min_step,
                        "prm_step_scores": s.step_scores,
                        "scored_by_run_id": self.run_id,
                    }
                    for r, s in zip(pool, scores, strict=True)
                ],
            )
        self.metrics["pool_scored"] = len(pool)
        return [
            Candidate(r.id, r.problem_id, s.score, r.answer_correct)
            for r, s in zip(pool, scores, strict=True)
        ]

    def _select(self, candidates: list[Candidate]) -> None:
        chosen = select_convincing(
            candidates,
            self.settings.select_per_problem,
            self.settings.select_wrong_share,
            self.settings.select_global_top_k,
        )
        correctness = {c.solution_id: c.answer_correct for c in candidates}
        selected_yield = evaluate.selection_yield([correctness[i] for i in chosen])
        self.metrics.update(selected=len(chosen), selection_yield=selected_yield)
        if not chosen:
            return
        with transaction(self.engine) as session:
            number = _next_generation(session)
            generation = Generation(
                number=number,
                run_id=self.run_id,
                selected=len(chosen),
                wrong_answers=sum(correctness[i] is False for i in chosen),
            )
            session.add(generation)
            session.execute(
                update(Solution)
                .where(Solution.id.in_(chosen))
                .values(generation=number, queue_state=QueueState.OPEN.value)
            )
            generation.quality_control = add_quality_control_to_generation(session, number)
        self.metrics["generation"] = number

    def _finish(self, label_count: int, checkpoint: Path | None, current: bool) -> None:
        with transaction(self.engine) as session:
            run = self._run(session)
            run.labels_used = label_count
            run.checkpoint_path = str(checkpoint) if checkpoint else None
            if current:
                runs.make_current(session, run)
            run.metrics = _plain(self.metrics)
            run.timings = dict(self.timings)

    def _save_metrics(self) -> None:
        with transaction(self.engine) as session:
            run = self._run(session)
            run.metrics = _plain(self.metrics)
            run.timings = dict(self.timings)


def _next_generation(session: Session) -> int:
    highest = max(
        session.scalar(select(func.max(Generation.number))) or 0,
        session.scalar(select(func.max(Solution.generation))) or 0,
    )
    return int(highest) + 1


def _current_model(engine: Engine) -> tuple[Any, Any] | None:
    with transaction(engine) as session:
        path = session.scalar(
            select(TrainingRun.checkpoint_path).where(TrainingRun.is_current.is_(True))
        )
    if path is None or not Path(path).exists():
        return None
    model, tokenizer, _args, _meta = load_checkpoint(Path(path))
    return model, tokenizer


def _plain(value: Any) -> Any:
    """Metrics as JSON values (dataclasses and numpy scalars become plain ones)."""
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(v) for k, v in vars(value).items()}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value


def run_one(
    engine: Engine, settings: Settings, *, force: bool, should_stop: Callable[[], bool]
) -> TrainingRun | None:
    """Claim a run (or start one, with ``force``) and do it; None if there was none."""
    with transaction(engine) as session:
        run = runs.claim_run(session, settings, force=force)
        run_id = run.id if run else None
    if run_id is None:
        return None
    try:
        Cycle(engine, settings, run_id, should_stop).run()
        error = None
    except Stopped as stop:
        error = str(stop)
    except Exception:  # a failed run is recorded with its error, and the worker goes on
        error = traceback.format_exc(limit=8)
    with transaction(engine) as session:
        run = session.get(TrainingRun, run_id)
        assert run is not None
        runs.finish_run(session, run, error=error)
        return run
