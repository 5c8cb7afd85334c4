"""``torchrun ... -m tests.worker.failing_rank RANK NAME``: ``worker once``, where a call
to ``worker.cycle.NAME`` raises on rank RANK.

A real failure on one rank alone (a GPU out of memory, a lost device) cannot be had on
demand on the CPU; this stands in for one, so the tests can check that every rank ends
and the run is recorded as failed with that rank's error.
"""

import gc
import os
import sys
from typing import NoReturn

import worker.cycle
from worker.__main__ import main

FAILURE = "injected failure"


def _fail(*_args: object, **_kwargs: object) -> NoReturn:
    raise RuntimeError(f"{FAILURE} on rank {os.environ['RANK']}")


if __name__ == "__main__":
    rank, name = sys.argv[1:3]
    if os.environ["RANK"] == rank:
        setattr(worker.cycle, name, _fail)
    gc.freeze()  # as worker/__main__.py does
    sys.exit(main(["once"]))
