"""One worker cycle: grade answers, train the PRM, evaluate it, keep it or not, select.

Steps: grade the final answers; read the training examples (a run below
``train_min_labels`` labels stops there); prepare the base model (a pretrained one is
prepared on first use); train; assess the new PRM on the fixed sets (held-out labeled
problems, ProcessBench, independent samples); save its checkpoint; assess the current PRM
on the same examples and let the gate decide which stays current; prune old checkpoints;
then, if the labelers are far enough into the open generation, score the pool with the
current PRM and queue the next generation.

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
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.config import Settings
from app.db import transaction
from app.grading import answer_groups, grade_solutions
from app.models import RunStatus, TrainingRun
from worker import evaluate, repository, runs
from worker.assess import Assessment, EvalSets, assess, compare, gate_order
from worker.checkpoint import directory_bytes, load_checkpoint, remove_checkpoint, save_checkpoint
from worker.data import training_examples
from worker.distributed import SINGLE, RankFailed, Ranks
from worker.eval_sets import file_sets, with_answer_groups
from worker.features import FeatureCache, cache_for
from worker.model import PRM, TrainingArgs, training_args_for
from worker.pretrained import resolve_base_model
from worker.repository import PoolSolution
from worker.score import score_solutions
from worker.select import Candidate, SelectionPlan, select, uncertainty_of
from worker.train import Example, fit, setup, split_by_problem

P = ParamSpec("P")
T = TypeVar("T")
Loaded = tuple[PRM, Any, TrainingArgs]
"""A PRM, its tokenizer and the arguments it was trained with."""


class Stopped(Exception):
    """SIGTERM arrived: the cycle ended between two steps."""


def training_args_from(settings: Settings) -> TrainingArgs:
    """The run's training arguments: the settings that are set, defaults for the rest."""
    precision = {"auto": None, "fp32": False, "bf16": True}[settings.train_precision]
    return training_args_for(
        settings.prm_base_model,
        mode=None if settings.train_mode == "auto" else settings.train_mode,
        learning_rate=settings.train_learning_rate,
        epochs=settings.train_epochs,
        batch_size=settings.train_batch_size,
        max_length=settings.train_max_length,
        warmup_ratio=settings.train_warmup_ratio,
        weight_decay=settings.train_weight_decay,
        gradient_checkpointing=settings.train_gradient_checkpointing,
        bf16=precision,
        backbone_depth=settings.train_backbone_depth,
        held_out_fraction=settings.train_held_out_fraction,
        seed=settings.train_seed,
    )


def feature_cache(settings: Settings, model: PRM, args: TrainingArgs) -> FeatureCache | None:
    """The model's feature cache in ``head`` mode, kept beside the checkpoints."""
    return cache_for(model, args, settings.checkpoint_dir / "feature-cache")


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
        self.args = training_args_from(settings)

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
        minimum = self.settings.train_min_labels
        if label_count < minimum:
            self.metrics["skipped"] = f"{label_count} labels to train on; a run needs {minimum}"
            self._finish(label_count, checkpoint=None, decision=None)
            return
        train, held_out = split_by_problem(examples, self.args.held_out_fraction, self.args.seed)
        with self.step("prepare"):
            self.args = dataclasses.replace(self.args, base_model=self._base_model())
            self.metrics["training_args"] = dataclasses.asdict(self.args)
            sets = self._eval_sets(held_out, {e.problem for e in train})
        with self.step("train"):
            model, tokenizer, _device = setup(self.args)
            cache = feature_cache(self.settings, model, self.args) if self.ranks.is_main else None
            stats = fit(
                model, tokenizer, train, self.args, should_stop=self.should_stop, cache=cache
            )
            self.metrics["train"] = _plain(stats)
        if stats.stopped:
            raise Stopped("stopped during training")
        with self.step("evaluate"):
            assessment = self._assess((model, tokenizer, self.args), sets, cache)
        with self.step("checkpoint"):
            checkpoint = self._save_checkpoint(model, tokenizer, label_count)
        with self.step("compare"):
            current_path = self._current_checkpoint()
            # Rank 0 judges it; the other ranks load it only if it goes on scoring the pool.
            current = _load(current_path) if self.ranks.is_main else None
            decision = self._gate(assessment, current, sets, label_count)
        self._finish(label_count, checkpoint=checkpoint, decision=decision)
        with self.step("prune"):
            self._prune()
        with self.step("score"):
            pace = self._pace()
            if decision.promote:
                scorer: Loaded | None = (model, tokenizer, self.args)
            else:
                scorer = current if self.ranks.is_main else _load(current_path)
            scored = self._score_pool(scorer) if pace.due and scorer else None
        with self.step("select"):
            self._select(scored, pace)
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
    def _base_model(self) -> str:
        """The base model's directory, prepared first if it is a pretrained name."""
        return resolve_base_model(self.args.base_model, self.settings.model_dir)

    @_on_main_rank
    def _eval_sets(self, held_out: list[Example], trained_problems: set[str]) -> EvalSets:
        processbench, samples = file_sets(
            self.settings.eval_dir,
            self.settings.eval_processbench_per_subset,
            self.settings.eval_best_of_n_problems,
        )
        with transaction(self.engine) as session:
            imported = repository.imported_samples(session, trained_problems)
        return EvalSets(
            held_out=held_out,
            processbench=processbench,
            best_of_n=with_answer_groups(samples, answer_groups),
            imported=with_answer_groups(imported, answer_groups),
        )

    @_on_main_rank
    def _assess(self, loaded: Loaded, sets: EvalSets, cache: FeatureCache | None) -> Assessment:
        model, tokenizer, args = loaded
        assessment = assess(model, tokenizer, args, sets, cache, seed=self.args.seed)
        self.metrics["evaluation"] = assessment.figures
        return assessment

    @_on_main_rank
    def _save_checkpoint(self, model: Any, tokenizer: Any, label_count: int) -> Path:
        checkpoint = self.settings.checkpoint_dir / f"run-{self.run_id}"
        save_checkpoint(checkpoint, model, tokenizer, self.args, self.metrics, label_count)
        self.metrics["checkpoint_bytes"] = directory_bytes(checkpoint)
        return checkpoint

    @_on_main_rank
    def _current_checkpoint(self) -> Path | None:
        with transaction(self.engine) as session:
            return repository.current_checkpoint(session)

    @_on_main_rank
    def _gate(
        self, new: Assessment, current: Loaded | None, sets: EvalSets, label_count: int
    ) -> evaluate.GateDecision:
        """Judge the current PRM on this run's sets, then let the gate decide."""
        comparisons = []
        if current is not None:
            model, tokenizer, args = current
            cache = feature_cache(self.settings, model, args)
            theirs = assess(model, tokenizer, args, sets, cache, seed=self.args.seed)
            self.metrics["current_on_this_evaluation"] = theirs.figures
            comparisons = compare(new, theirs, gate_order(self.settings.gate_metric))
        decision = evaluate.gate(
            comparisons,
            labels_used=label_count,
            min_labels=self.settings.train_min_labels,
            has_current=current is not None,
            seed=self.args.seed,
        )
        self.metrics["gate"] = decision.as_dict()
        return decision

    @_on_main_rank
    def _prune(self) -> None:
        """Delete the checkpoints that are not current, pinned or among the newest kept."""
        with transaction(self.engine) as session:
            stored = repository.stored_checkpoints(session)
            candidates = repository.to_prune(stored, self.settings.checkpoint_keep_last)
            doomed = [c for c in candidates if repository.forget_checkpoint(session, c.run_id)]
        # Deleted once the rows say so: a crash in between leaves a stray directory, never
        # a run that points at a checkpoint that is gone.
        for checkpoint in doomed:
            remove_checkpoint(checkpoint.path)
        self.metrics["pruned_checkpoints"] = [c.run_id for c in doomed]

    @_on_main_rank
    def _pace(self) -> repository.Pace:
        with transaction(self.engine) as session:
            pace = repository.generation_pace(session, self.settings)
            self.metrics["pool"] = repository.pool_summary(session, self.settings)
        self.metrics["pace"] = dataclasses.asdict(pace)
        return pace

    def _score_pool(self, scorer: Loaded) -> list[Candidate]:
        """Score the unlabeled, unqueued solutions with the current checkpoint."""
        model, tokenizer, args = scorer
        pool = self._pool()
        cache = feature_cache(self.settings, model, args) if self.ranks.world_size == 1 else None
        scores = self.ranks.map_sharded(
            pool,
            lambda share: score_solutions(
                model, tokenizer, [(p.problem, p.steps) for p in share], args, cache
            ),
        )
        return self._record_scores(pool, scores)

    @_on_main_rank
    def _pool(self) -> list[PoolSolution]:
        with transaction(self.engine) as session:
            return repository.pool(session)

    @_on_main_rank
    def _record_scores(self, pool: list[PoolSolution], scores: list[Any]) -> list[Candidate]:
        with transaction(self.engine) as session:
            repository.record_scores(session, self.run_id, pool, scores)
        self.metrics["pool_scored"] = len(pool)
        return [
            Candidate(
                p.id,
                p.problem_id,
                s.score,
                p.answer_correct,
                uncertainty_of(np.array(s.member_step_scores)),
            )
            for p, s in zip(pool, scores, strict=True)
        ]

    @_on_main_rank
    def _select(self, candidates: list[Candidate] | None, pace: repository.Pace) -> None:
        if candidates is None:
            reason = pace.reason if not pace.due else "no current PRM to choose with"
            self.metrics["selection"] = {"queued": 0, "reason": reason}
            return
        plan = SelectionPlan(
            strategy=self.settings.select_strategy,
            per_problem=self.settings.select_per_problem,
            wrong_share=self.settings.select_wrong_share,
            global_top_k=self.settings.select_global_top_k,
            max_size=self.settings.generation_max_size,
            seed=self.run_id,
        )
        chosen = select(candidates, plan)
        correctness = {c.solution_id: c.answer_correct for c in candidates}
        self.metrics["selection"] = {
            "strategy": plan.strategy,
            "queued": len(chosen),
            "yield": evaluate.selection_yield([correctness[i] for i in chosen]),
            "pool_wrong_share": evaluate.selection_yield(list(correctness.values())),
            "reason": pace.reason,
        }
        if not chosen:
            return
        with transaction(self.engine) as session:
            number = repository.queue_generation(session, self.run_id, chosen, correctness)
        self.metrics["generation"] = number

    @_on_main_rank
    def _finish(
        self, label_count: int, checkpoint: Path | None, decision: evaluate.GateDecision | None
    ) -> None:
        with transaction(self.engine) as session:
            run = self._run(session)
            run.labels_used = label_count
            run.checkpoint_path = str(checkpoint) if checkpoint else None
            run.checkpoint_bytes = self.metrics.get("checkpoint_bytes")
            if decision is not None and decision.promote:
                runs.make_current(session, run)
            run.metrics = _plain(self.metrics)
            run.timings = dict(self.timings)

    @_on_main_rank
    def _save_metrics(self) -> None:
        with transaction(self.engine) as session:
            run = self._run(session)
            run.metrics = _plain(self.metrics)
            run.timings = dict(self.timings)


def _load(checkpoint: Path | None) -> Loaded | None:
    """A checkpoint's PRM, tokenizer and training arguments; None for no checkpoint."""
    if checkpoint is None:
        return None
    model, tokenizer, args, _meta = load_checkpoint(checkpoint)
    return model, tokenizer, args


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
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
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
