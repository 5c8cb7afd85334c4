"""Warm the feature cache while the worker waits for labels.

In ``head`` mode every run scores the same evaluation sets (ProcessBench's calibration and
test samples, the best-of-N samples) and the unlabeled pool with the same frozen backbone,
so their step features are computed once and cached (worker/features.py). Computing them
when the worker starts, rather than in the first run, keeps that run to the labels' own
work: on 2 CPU cores the sets and a demo's pool cost minutes, and labelers need longer than
that to make a run's worth of labels.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from app.core.config import Settings
from app.core.db import first_line, transaction
from app.training import note_warm_up
from worker import repository
from worker.cycle import feature_cache, training_args_from
from worker.eval_sets import file_sets
from worker.pretrained import resolve_base_model
from worker.score import Throughput, fill_cache
from worker.train import setup

logger = logging.getLogger("steplabel.worker")

CHUNK = 64
"""Solutions per step: the worker can stop between two of them."""


def evaluation_items(settings: Settings) -> list[tuple[str, list[str]]]:
    """Every (problem, steps) the runs' evaluation scores, as worker/cycle.py reads them."""
    split, samples = file_sets(
        settings.eval_dir, settings.eval_processbench_per_subset, settings.eval_best_of_n_problems
    )
    solutions = split.calibration + split.test if split else []
    return [(s.problem, s.steps) for s in solutions] + [
        (p.problem, steps) for p in samples for steps in p.samples
    ]


def pool_items(engine: Engine) -> list[tuple[str, list[str]]]:
    """The unlabeled, unqueued solutions a run scores, as worker/cycle.py reads them."""
    with transaction(engine) as session:
        return [(p.problem, p.steps) for p in repository.pool(session)]


def warm_feature_cache(
    settings: Settings, engine: Engine | None, should_stop: Callable[[], bool]
) -> int:
    """Compute the features the cache lacks for the evaluation sets, then for the pool (with
    an ``engine``); the sequences computed.

    Nothing to do outside ``head`` mode (the backbone changes as it trains). Stops early,
    between two chunks, when ``should_stop`` says so.
    """
    args = training_args_from(settings)
    if args.mode != "head":
        return 0
    items = evaluation_items(settings) + (pool_items(engine) if engine is not None else [])
    if not items:
        return 0
    args = dataclasses.replace(
        args, base_model=resolve_base_model(args.base_model, settings.model_dir)
    )
    model, tokenizer, _device = setup(args)
    cache = feature_cache(settings, model, args)
    if cache is None:  # not in head mode; checked above, said again for the type
        return 0

    def report(done: int, throughput: Throughput) -> None:
        logger.info(
            "features computed ahead of runs: %d of %d solutions (%.0f tokens/s)",
            done,
            len(items),
            throughput.tokens_per_second,
        )
        _note(engine, done, len(items))

    _note(engine, 0, len(items))
    try:
        filled = fill_cache(model, tokenizer, items, args, cache, report, should_stop, CHUNK)
    finally:
        _note(engine, len(items), len(items))  # done, or stopped: no run waits on it now
    return filled.sequences


def _note(engine: Engine | None, done: int, total: int) -> None:
    """Tell the PRM page how far the warm-up got (runs wait for it). Only a note: a
    database away for a moment loses one, and the warm-up goes on."""
    if engine is None:
        return
    try:
        with transaction(engine) as session:
            note_warm_up(session, done, total)
    except SQLAlchemyError as error:
        logger.warning("could not note the warm-up's progress: %s", first_line(error))
