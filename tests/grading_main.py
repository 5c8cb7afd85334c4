"""``python -m tests.grading_main``: grades with the shared pool, as a bench run with
``python -m`` does, and prints as JSON its verdicts, its own process id and the ids of the
pool's workers. At its top it imports ``tests.grading_main_imports``, which stands for a
heavy import (torch, say) and writes down each process that imports it: a grading worker
that imported the main module's imports anew would be written down there too."""

import json
import os

from tests import grading_main_imports  # noqa: F401  what each importer writes down

if __name__ == "__main__":
    from app import grading

    verdicts = grading.equivalences([(r"\frac{2}{4}", "0.5"), ("x^2", "x^3")])
    pool = grading._live_pool()
    workers = {pool.submit(os.getpid).result() for _ in range(4 * grading.POOL_WORKERS)}
    grading.shutdown_pool()
    print(json.dumps({"verdicts": verdicts, "main": os.getpid(), "workers": sorted(workers)}))
