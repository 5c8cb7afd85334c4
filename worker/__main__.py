"""``python -m worker``: the PRM worker. ``python -m worker once``: one cycle, then exit.

The loop wakes every STEPLABEL_WORKER_POLL_SECONDS, runs a cycle when an admin asked for
one or the schedule is due (STEPLABEL_TRAIN_EVERY_MINUTES, STEPLABEL_TRAIN_MIN_NEW_LABELS),
and stops cleanly on SIGTERM or Ctrl-C between two steps of a cycle.
"""

import argparse
import logging
import signal
import sys
import threading
from types import FrameType

from app.config import SettingsError, get_settings
from app.db import get_engine
from app.models import RunStatus
from app.schema import SchemaOutOfDate, check_current
from worker.cycle import run_one

logger = logging.getLogger("steplabel.worker")
_stop = threading.Event()


def _request_stop(signum: int, _frame: FrameType | None) -> None:
    logger.info("signal %s: stopping after the current step", signum)
    _stop.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m worker", description=__doc__)
    parser.add_argument("mode", nargs="?", choices=["loop", "once"], default="loop")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        settings = get_settings()
        engine = get_engine()
        check_current(engine)
    except (SettingsError, SchemaOutOfDate) as error:
        print(error, file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _request_stop)
    signal.signal(signal.SIGINT, _request_stop)
    if args.mode == "once":
        run = run_one(engine, settings, force=True, should_stop=_stop.is_set)
        if run is None:
            print("another worker is training now; nothing done", file=sys.stderr)
            return 0
        print(f"run {run.id}: {run.status}" + (f"\n{run.error}" if run.error else ""))
        return 0 if run.status == RunStatus.SUCCEEDED.value else 1
    logger.info("worker started: polling every %ss", settings.worker_poll_seconds)
    while not _stop.is_set():
        run = run_one(engine, settings, force=False, should_stop=_stop.is_set)
        if run is not None:
            logger.info("run %s %s", run.id, run.status)
            continue
        _stop.wait(settings.worker_poll_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
