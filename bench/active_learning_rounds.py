"""bench/active_learning.py's rounds: each seed's seed set, then each strategy's rounds of
selection, labeling and retraining up to the largest budget, run here or side by side in
worker processes, and kept per seed for ``--resume``.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import random
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch

from app.core.config import Strategy
from bench.active_learning_data import Data, load
from bench.active_learning_learner import Judged, Learner, Progress, Snapshot, judged, snapshot
from bench.bon32 import BON32
from bench.seed_store import SeedStore
from worker.select import Candidate, SelectionPlan, select

REFERENCE: Strategy = "uniform"
"""The strategy the others are measured against."""


@dataclass(frozen=True)
class Schedule:
    seed_size: int
    budgets: tuple[int, ...]
    batch: int | None
    """Labels per round; None: each round goes to the next budget."""

    @property
    def sizes(self) -> tuple[int, ...]:
        """Where every strategy is judged: the seed set, then each budget."""
        return (self.seed_size, *self.budgets)

    def next_size(self, labeled: int) -> int:
        budget = next(b for b in self.budgets if b > labeled)
        return budget if self.batch is None else min(budget, labeled + self.batch)


@dataclass
class Run:
    """One strategy from one seed set: what it labeled, in order, and its PRM at each size."""

    seed: int
    strategy: Strategy
    labeled: list[int]
    judged: dict[int, Judged]
    selector: str = "retrain"
    """bench/active_learning.py's ``SELECTORS``: who picks each round."""
    rescorings: int = 0
    """How often the selector scored the pool again after the seed set (0: fixed)."""
    seconds: float = 0.0
    """Selecting, training and scoring the pool, all rounds (the seed set's not counted)."""
    rounds: int = 0
    snapshots: dict[int, Snapshot] = field(default_factory=dict)
    """``judged``, judged: filled in the main process (a snapshot's statistics are
    closures, which do not travel between processes)."""

    @property
    def arm(self) -> str:
        return arm_name(self.strategy, self.selector)


def arm_name(strategy: Strategy, selector: str) -> str:
    """A strategy with its selector, as the rows name it: the retrained one (this bench's
    loop, the worker's) by the strategy's name alone; uniform reads no score, so it has one."""
    return strategy if selector == "retrain" or strategy == REFERENCE else f"{strategy}, fixed"


def arms(options: argparse.Namespace) -> list[tuple[Strategy, str]]:
    """Every (strategy, selector) a seed runs: uniform once, the others once per selector."""
    return [
        (strategy, selector)
        for strategy in options.strategies
        for selector in options.selectors
        if strategy != REFERENCE or selector == options.selectors[0]
    ]


@dataclass(frozen=True)
class Start:
    """A seed's labeled seed set, its PRM's snapshot and its scores of the rest of the pool."""

    seed: int
    labeled: list[int]
    judged: Judged
    candidates: list[Candidate]
    seconds: float


def plan_for(
    strategy: Strategy, size: int, options: argparse.Namespace, seed: int
) -> SelectionPlan:
    """One round's plan: ``size`` solutions over the whole pool, or K per problem up to it."""
    if options.per_problem:
        return SelectionPlan(
            strategy, options.per_problem, options.wrong_share, max_size=size, seed=seed
        )
    return SelectionPlan(strategy, wrong_share=options.wrong_share, global_top_k=size, seed=seed)


def start(learner: Learner, data: Data, seed: int, options: argparse.Namespace) -> Start:
    started = time.perf_counter()
    labeled = seed_set(data, seed, options.schedule.seed_size, options.corpus == BON32)
    learner.fit([data.examples[i] for i in labeled])
    unlabeled = sorted(set(range(len(data.pool))) - set(labeled))
    candidates = learner.candidates(data, unlabeled)
    seconds = time.perf_counter() - started
    return Start(seed, labeled, judged(learner, data, labeled, options.judge), candidates, seconds)


def seed_set(data: Data, seed: int, size: int, one_per_problem: bool) -> list[int]:
    """The seed's uniform seed set: ``size`` pool solutions, or in the paper's shape
    (``one_per_problem``) one solution of each of ``size`` problems."""
    rng = random.Random(seed)
    if not one_per_problem:
        return rng.sample(range(len(data.pool)), size)
    by_problem: dict[int, list[int]] = {}
    for index, problem in enumerate(data.problems):
        by_problem.setdefault(problem, []).append(index)
    if size > len(by_problem):
        raise ValueError(f"a seed set of {size} problems, of {len(by_problem)}")
    return [rng.choice(by_problem[p]) for p in rng.sample(sorted(by_problem), size)]


def grow(
    learner: Learner,
    data: Data,
    strategy: Strategy,
    begun: Start,
    options: argparse.Namespace,
    progress: Progress,
    selector: str = "retrain",
) -> Run:
    """Label round after round by ``strategy`` from the seed set up to the largest budget:
    each round picked by the PRM retrained on every label so far (``retrain``), or by the
    seed set's PRM's one scoring of the pool (``fixed``, the paper's selector), while the
    PRM that is judged is retrained on every label either way."""
    schedule: Schedule = options.schedule
    run = Run(
        begun.seed, strategy, list(begun.labeled), {len(begun.labeled): begun.judged}, selector
    )
    candidates = begun.candidates
    while len(run.labeled) < schedule.budgets[-1]:
        started = time.perf_counter()
        size = schedule.next_size(len(run.labeled)) - len(run.labeled)
        plan = plan_for(strategy, size, options, run.seed * 10_000 + run.rounds)
        chosen = select(candidates, plan)
        if len(chosen) != size or set(chosen) & set(run.labeled):
            raise RuntimeError(f"{strategy} chose {len(chosen)} of {size}, or labeled ones")
        run.labeled += chosen
        taken = set(run.labeled)
        unlabeled = [c.solution_id for c in candidates if c.solution_id not in taken]
        if selector == "fixed":
            candidates = [c for c in candidates if c.solution_id not in taken]
            # The judged PRM needs training only where it is judged; the selector, never.
            if len(run.labeled) in schedule.budgets:
                learner.fit([data.examples[i] for i in run.labeled])
        else:
            learner.fit([data.examples[i] for i in run.labeled])
            if len(run.labeled) < schedule.budgets[-1]:
                candidates = learner.candidates(data, unlabeled)
                run.rescorings += 1
        seconds = time.perf_counter() - started
        run.seconds += seconds
        run.rounds += 1
        figures = ""
        if len(run.labeled) in schedule.budgets:
            reading = judged(learner, data, run.labeled, options.judge)
            run.judged[len(run.labeled)] = reading
            figures = _figures(snapshot(reading, data, options.judge))
        progress.line(
            f"seed {run.seed} {run.arm}: {len(run.labeled)} labels, round {seconds:.1f} s{figures}"
        )
    return run


def _figures(shot: Snapshot) -> str:
    return f", F1 {_number(shot.value('f1'))}, AUROC {_number(shot.value('auroc'))}"


def seed_runs(
    learner: Learner, data: Data, seed: int, options: argparse.Namespace, progress: Progress
) -> tuple[float, list[Run]]:
    """Every strategy from one seed's seed set, and the seconds the seed set took."""
    begun = start(learner, data, seed, options)
    shot = snapshot(begun.judged, data, options.judge)
    progress.line(
        f"seed {seed}: seed set of {len(begun.labeled)} in {begun.seconds:.1f} s" + _figures(shot)
    )
    runs = [grow(learner, data, s, begun, options, progress, sel) for s, sel in arms(options)]
    return begun.seconds, runs


_IN_WORKER: dict[str, Any] = {}
"""A worker process's learner, data, options and progress, loaded once by ``_start_worker``."""


def _start_worker(options: argparse.Namespace, started: float) -> None:
    torch.set_num_threads(1)
    _IN_WORKER.update(
        learner=Learner.load(options),
        data=load(options),
        options=options,
        progress=Progress(started=started),
    )
    # Kept for the process's life: frozen, out of the collector's full passes in the seeds'
    # runs and at exit, as in worker/__main__.py.
    gc.freeze()


def _seed_in_worker(seed: int) -> tuple[float, list[Run]]:
    return seed_runs(seed=seed, **_IN_WORKER)


def every_seed(
    learner: Learner, data: Data, options: argparse.Namespace, progress: Progress
) -> list[tuple[float, list[Run]]]:
    """``seed_runs`` for each seed, in order: here, or side by side in ``--workers``
    processes. A seed's runs depend on nothing but the seed (every draw is seeded from it,
    every head retrained from the same start), so the figures are the same either way, and
    with ``--resume`` the seeds a stopped run finished are taken from its folder."""
    store = SeedStore(options.resume, deciding_options(options)) if options.resume else None
    finished = {}
    if store is not None:
        found = {seed: store.load(seed) for seed in range(options.seeds)}
        finished = {seed: runs for seed, runs in found.items() if runs is not None}
        progress.line(f"{len(finished)} of {options.seeds} seeds from {options.resume}")
    todo = [seed for seed in range(options.seeds) if seed not in finished]
    for seed, runs in zip(todo, _run_seeds(learner, data, options, progress, todo), strict=True):
        finished[seed] = runs
        if store is not None:
            store.save(seed, runs)
    return [finished[seed] for seed in range(options.seeds)]


def _run_seeds(
    learner: Learner,
    data: Data,
    options: argparse.Namespace,
    progress: Progress,
    seeds: list[int],
) -> Iterator[tuple[float, list[Run]]]:
    """Each seed's ``seed_runs`` as it finishes, in order."""
    if options.workers == 1 or len(seeds) < 2:
        for seed in seeds:
            yield seed_runs(learner, data, seed, options, progress)
        return
    # Spawned, not forked: a fork would inherit the warm-up's thread pool mid-state.
    with ProcessPoolExecutor(
        min(options.workers, len(seeds)),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(options, progress.started),
    ) as pool:
        yield from pool.map(_seed_in_worker, seeds)


RESULT_NEUTRAL = ("seeds", "workers", "resume", "json", "plot", "cache_dir")
"""Options that change no seed's runs: how many seeds, how they run, where output goes."""


def deciding_options(options: argparse.Namespace) -> dict[str, Any]:
    """The options a seed's runs depend on, as ``--resume`` compares them."""
    return {k: v for k, v in sorted(vars(options).items()) if k not in RESULT_NEUTRAL}


def compare(data: Data, options: argparse.Namespace, progress: Progress) -> dict[str, Any]:
    """Every strategy from every seed's seed set; the runs and the setup's timings."""
    learner = Learner.load(options)
    progress.line(f"the PRM: {options.model}, {learner.described}")
    warmed = learner.warm(data, progress, options.judge)
    progress.line(f"features of {warmed.sequences} new sequences in {warmed.seconds:.1f} s")
    # Past the warm-up the backbone never runs: the rounds train a linear head on cached
    # features, whose tiny matrix products two threads slow ninefold on a busy machine.
    threads = torch.get_num_threads()
    if learner.args.mode == "head":
        torch.set_num_threads(1)
    runs: dict[str, list[Run]] = {arm_name(s, sel): [] for s, sel in arms(options)}
    starts = []
    # A seed's runs share its seed set's reading (one object, after a worker's pickling
    # too): judge it once, so that they share its snapshot and its bootstrap memo.
    shots: dict[int, Snapshot] = {}

    def judge(reading: Judged) -> Snapshot:
        if id(reading) not in shots:
            shots[id(reading)] = snapshot(reading, data, options.judge)
        return shots[id(reading)]

    for seconds, of_seed in every_seed(learner, data, options, progress):
        starts.append(round(seconds, 1))
        for run in of_seed:
            run.snapshots = {n: judge(reading) for n, reading in run.judged.items()}
            runs[run.arm].append(run)
    whole = None
    if len(data.pool) > options.schedule.budgets[-1]:
        # Uniform's curve goes on to the whole pool, the same labels for every seed: how
        # far past the largest budget it would take uniform to catch up stays measurable.
        everything = list(range(len(data.pool)))
        learner.fit([data.examples[i] for i in everything])
        whole = snapshot(judged(learner, data, everything, options.judge), data, options.judge)
        progress.line(f"the whole pool, {len(everything)} labels: F1 {_number(whole.value('f1'))}")
    torch.set_num_threads(threads)
    setup = {
        **data.notes,
        "judged_on": options.judge,
        "model": options.model,
        "mode": learner.args.mode,
        "device": learner.described,
        "feature_sequences_computed": warmed.sequences,
        "feature_seconds": round(warmed.seconds, 1),
        "workers": options.workers,
        "seed_set_seconds": starts,
    }
    return {"runs": runs, "setup": setup, "whole_pool": whole}


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
