"""``torchrun ... -m tests.worker.failing_rank RANK NAME``: ``worker once``, where a call
to ``worker.cycle.NAME`` raises on rank RANK.

A real failure on one rank alone (a GPU out of memory, a lost device) cannot be had on
demand on the CPU; this stands in for one, so the tests can check that every rank ends
and the run is recorded as failed with that rank's error.

The worker is imported under the main guard, not at the top: the grading pool imports the
main module of the process that grades (app/grading.py ``_main_module``, as multiprocessing
does for a ``-m module`` that is not a package's ``__main__``), and would load torch and
transformers for nothing, seconds on the rank's way to its first grading (BENCHMARKS.md
"The test suite's time", session 28).
"""

import gc
import os
import sys
from typing import NoReturn

FAILURE = "injected failure"


def _fail(*_args: object, **_kwargs: object) -> NoReturn:
    raise RuntimeError(f"{FAILURE} on rank {os.environ['RANK']}")


if __name__ == "__main__":
    import worker.cycle
    from worker.__main__ import main

    rank, name = sys.argv[1:3]
    if os.environ["RANK"] == rank:
        setattr(worker.cycle, name, _fail)
    gc.freeze()  # as worker/__main__.py does
    sys.exit(main(["once"]))
