"""One worker cycle: grade answers, train the PRM, evaluate it, score the pool, select.

Each step runs outside any long transaction and records itself on the run row, so the
dashboard can follow a run and a crash leaves the step it died in. Between steps the
cycle checks ``should_stop`` (SIGTERM) and stops cleanly.

Under torchrun every rank runs the cycle: the methods marked ``@_on_main_rank`` (all the
database work, evaluating, writing the checkpoint) run on rank 0 alone and hand their
result to the others, every rank trains, and the pool is scored in shares.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Concatenate, NamedTuple, ParamSpec, TypeVar

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
    RunStatus,
    Solution,
    TrainingRun,
)
from worker import evaluate, runs
from worker.data import training_examples
from worker.distributed import SINGLE, RankFailed, Ranks
from worker.model import training_args_for
from worker.score import SolutionScore, score_solutions
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

P = ParamSpec("P")
T = TypeVar("T")


class Stopped(Exception):
    """SIGTERM arrived: the cycle ended between two steps."""


class PoolSolution(NamedTuple):
    """An unlabeled, unqueued solution, as rank 0 hands it to every rank to score."""

    id: int
    problem_id: int
    problem: str
    steps: list[str]
    answer_correct: bool | None


def _on_main_rank(
    method: Callable[Concatenate[Cycle, P], T],
) -> Callable[Concatenate[Cycle, P], T]:
    """The method runs on rank 0 alone; every rank returns its result (Ranks.on_main)."""

    def on_main(cycle: Cycle, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return cycle.ranks.on_main(functools.partial(method, cycle, *args, **kwargs))

    return on_main


class Cycle:
    """The steps of one run, with their timings kept on the run row."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        run_id: int,
        should_stop: Callable[[], bool],
        ranks: Ranks = SINGLE,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.run_id = run_id
        self.should_stop = should_stop
        self.ranks = ranks
        self.timings: dict[str, float] = {}
        self.metrics: dict[str, Any] = {}
        self.args = training_args_for(settings.prm_base_model)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        if self._begin(name):
            raise Stopped(f"stopped before {name}")
        started = time.perf_counter()
        yield
        self.timings[name] = round(time.perf_counter() - started, 3)

    @_on_main_rank
    def _begin(self, name: str) -> bool:
        """Whether to stop (rank 0 decides for all); otherwise the run row shows the step."""
        if self.should_stop():
            return True
        with transaction(self.engine) as session:
            runs.mark_step(session, self._run(session), name, self.timings)
        return False

    def _run(self, session: Session) -> TrainingRun:
        run = session.get(TrainingRun, self.run_id)
        assert run is not None
        return run

    def run(self) -> None:
        with self.step("grade"):
            self.metrics["graded"] = self._grade()
        with self.step("data"):
            examples, label_count = self._training_examples()
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
            checkpoint = self._save_checkpoint(model, tokenizer, label_count)
        with self.step("compare"):
            # The held-out set grows with the labels: judge the current checkpoint on this
            # run's held-out set, not by the figures it got on its own.
            current_path = self._current_checkpoint()
            # Rank 0 judges it; the other ranks load it only if it goes on scoring the pool.
            current = _load(current_path) if self.ranks.is_main else None
            becomes_current = self._compare(current, held_out or train)
            if not becomes_current and current is None:
                current = _load(current_path)
        self._finish(label_count, checkpoint=checkpoint, current=becomes_current)
        scorer = current if current is not None and not becomes_current else (model, tokenizer)
        with self.step("score"):
            scored = self._score_pool(*scorer)
        with self.step("select"):
            self._select(scored)
        self._save_metrics()

    @_on_main_rank
    def _grade(self) -> int:
        with transaction(self.engine) as session:
            return grade_solutions(session).graded

    @_on_main_rank
    def _training_examples(self) -> tuple[list[Example], int]:
        with transaction(self.engine) as session:
            return training_examples(session, self.settings)

    @_on_main_rank
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

    @_on_main_rank
    def _save_checkpoint(self, model: Any, tokenizer: Any, label_count: int) -> Path:
        checkpoint = self.settings.checkpoint_dir / f"run-{self.run_id}"
        save_checkpoint(checkpoint, model, tokenizer, self.args, self.metrics, label_count)
        return checkpoint

    @_on_main_rank
    def _current_checkpoint(self) -> Path | None:
        """The current run's checkpoint directory, if there is one."""
        with transaction(self.engine) as session:
            path = session.scalar(
                select(TrainingRun.checkpoint_path).where(TrainingRun.is_current.is_(True))
            )
        return None if path is None or not Path(path).exists() else Path(path)

    @_on_main_rank
    def _compare(self, current: tuple[Any, Any] | None, held_out: list[Example]) -> bool:
        """Whether the new checkpoint replaces ``current``, judged on this held-out set."""
        current_metrics = None if current is None else evaluate_steps(*current, held_out, self.args)
        self.metrics["current_checkpoint_on_this_held_out"] = current_metrics
        return current_metrics is None or is_improvement(self.metrics, current_metrics)

    def _score_pool(self, model: Any, tokenizer: Any) -> list[Candidate]:
        """Score the unlabeled, unqueued solutions with the current checkpoint."""
        pool = self._pool()
        scores = self.ranks.map_sharded(
            pool,
            lambda share: score_solutions(
                model, tokenizer, [(p.problem, p.steps) for p in share], self.args
            ),
        )
        return self._record_scores(pool, scores)

    @_on_main_rank
    def _pool(self) -> list[PoolSolution]:
        with transaction(self.engine) as session:
            rows = session.execute(
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
        return [
            PoolSolution(r.id, r.problem_id, r.text, r.steps, r.answer_correct)
            for r in rows
            if r.steps
        ]

    @_on_main_rank
    def _record_scores(
        self, pool: list[PoolSolution], scores: list[SolutionScore]
    ) -> list[Candidate]:
        with transaction(self.engine) as session:
            session.execute(
                update(Solution),
                [
                    {
                        "id": p.id,
                        "prm_score": s.score,
                        "prm_min_step": s.min_step,
                        "prm_step_scores": s.step_scores,
                        "scored_by_run_id": self.run_id,
                    }
                    for p, s in zip(pool, scores, strict=True)
                ],
            )
        self.metrics["pool_scored"] = len(pool)
        return [
            Candidate(p.id, p.problem_id, s.score, p.answer_correct)
            for p, s in zip(pool, scores, strict=True)
        ]

    @_on_main_rank
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

    @_on_main_rank
    def _finish(self, label_count: int, checkpoint: Path | None, current: bool) -> None:
        with transaction(self.engine) as session:
            run = self._run(session)
            run.labels_used = label_count
            run.checkpoint_path = str(checkpoint) if checkpoint else None
            if current:
                runs.make_current(session, run)
            run.metrics = _plain(self.metrics)
            run.timings = dict(self.timings)

    @_on_main_rank
    def _save_metrics(self) -> None:
        with transaction(self.engine) as session:
            run = self._run(session)
            run.metrics = _plain(self.metrics)
            run.timings = dict(self.timings)


def _load(checkpoint: Path | None) -> tuple[Any, Any] | None:
    """A checkpoint's model and tokenizer; None for no checkpoint."""
    return None if checkpoint is None else load_checkpoint(checkpoint)[:2]


def _next_generation(session: Session) -> int:
    highest = max(
        session.scalar(select(func.max(Generation.number))) or 0,
        session.scalar(select(func.max(Solution.generation))) or 0,
    )
    return int(highest) + 1


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


@dataclasses.dataclass(frozen=True)
class RunOutcome:
    """How a run ended, as every rank knows it."""

    id: int
    status: str
    error: str | None = None
    ranks_in_step: bool = True
    """False after a failure under torchrun: a rank may have failed inside a collective
    that the others still wait in, so no rank may start another one; the worker ends."""


def _claim(engine: Engine, settings: Settings, force: bool) -> int | None:
    with transaction(engine) as session:
        run = runs.claim_run(session, settings, force=force)
        return run.id if run else None


def _end_run(engine: Engine, run_id: int, error: str | None) -> RunOutcome:
    with transaction(engine) as session:
        run = session.get(TrainingRun, run_id)
        assert run is not None
        runs.finish_run(session, run, error=error)
        return RunOutcome(run.id, run.status, run.error)


def _fail_if_running(engine: Engine, run_id: int, error: str) -> None:
    with transaction(engine) as session:
        runs.fail_if_running(session, run_id, error)


def run_one(
    engine: Engine,
    settings: Settings,
    *,
    force: bool,
    should_stop: Callable[[], bool],
    ranks: Ranks = SINGLE,
) -> RunOutcome | None:
    """Claim a run (or start one, with ``force``) and do it; None if there was none.

    Under torchrun every rank calls this: rank 0 claims and records, every rank returns
    the outcome.
    """
    run_id = ranks.on_main(lambda: _claim(engine, settings, force))
    if run_id is None:
        return None
    scope = f"run-{run_id}"
    try:
        with ranks.failures_watched(scope, lambda error: _fail_if_running(engine, run_id, error)):
            Cycle(engine, settings, run_id, should_stop, ranks).run()
        error = None
    except Stopped as stop:  # every rank stops at the same point, as rank 0 decided
        error = str(stop)
    except Exception as failure:  # a failed run is recorded with its error
        if ranks.world_size > 1:
            return _failed_on_some_rank(engine, run_id, ranks, scope, failure)
        error = traceback.format_exc(limit=8)  # and the worker goes on
    return ranks.on_main(lambda: _end_run(engine, run_id, error))


def _failed_on_some_rank(
    engine: Engine, run_id: int, ranks: Ranks, scope: str, failure: Exception
) -> RunOutcome:
    """A run failed under torchrun: rank 0 records what every rank reported.

    A rank may have failed inside a collective that the others still wait in, so nothing
    goes through collectives any more: the other ranks report through the store.
    """
    error = traceback.format_exc(limit=8)
    if not ranks.is_main:
        if not isinstance(failure, RankFailed):  # rank 0 knows its own failures
            ranks.report_failure(scope, error)
        return RunOutcome(run_id, RunStatus.FAILED.value, error, ranks_in_step=False)
    ended = _end_run(engine, run_id, ranks.with_reported_failures(scope, error))
    return dataclasses.replace(ended, ranks_in_step=False)
