"""Time every admin GET request of the app on a PRM800K-size project in Postgres.

    .venv/bin/python -m bench.dashboard [--labels 100000] [--repeat 5]

A fresh Postgres database is migrated and filled with COPY (bench/synthetic_project.py):
100,000 labels with about 1,000,000 step ratings by 50 labelers, 10% of the solutions
labeled by two to four labelers, generations, QC solutions with gold labels, screening
labels and training runs. After VACUUM ANALYZE, every GET route under /admin and /api/admin
that the app's OpenAPI schema lists (so pages added later are timed too) is requested as a
logged-in admin: path parameters get real ids (PATH_IDS), routes that take a
``generation`` filter are timed with one as well, and routes that take a time ``window``
with each window. The first request of each is the cold one: the app keeps no cache, so
every later one does the same work, with the database's pages warm. Target: under 1 s each.
"""

import argparse
import os
import re
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from app.admin.throughput import DEFAULT_WINDOW, WINDOWS
from app.core import schema
from app.core.config import get_settings
from app.core.db import dispose_engines, make_engine
from app.main import create_app
from bench.databases import fresh_postgres_database
from bench.synthetic_project import ProjectShape, fill_project
from tests.web import log_in

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
TARGET_S = 1.0
ADMIN_PREFIXES = ("/admin", "/api/admin")
PATH_PARAMETER = re.compile(r"{(\w+)(?::\w+)?}")

# Each path parameter an admin route may take, and the id that makes its request the
# heaviest realistic one. A route with a parameter missing here stops the benchmark.
PATH_IDS = {
    "problem_id": "SELECT problem_id FROM labels GROUP BY problem_id ORDER BY count(*) DESC "
    "LIMIT 1",
    "solution_id": "SELECT solution_id FROM labels WHERE solution_id IS NOT NULL "
    "AND NOT is_quality_control AND NOT is_initial_screening GROUP BY solution_id "
    "ORDER BY count(DISTINCT labeler_id) DESC, solution_id LIMIT 1",
    "label_id": "SELECT max(id) FROM labels",
    "labeler_id": "SELECT labeler_id FROM labels GROUP BY labeler_id ORDER BY count(*) DESC "
    "LIMIT 1",
    "user_id": "SELECT labeler_id FROM labels GROUP BY labeler_id ORDER BY count(*) DESC LIMIT 1",
    "run_id": "SELECT max(id) FROM training_runs",
    "generation": "SELECT max(generation) FROM labels",
    "number": "SELECT max(number) FROM generations",
}


@dataclass(frozen=True)
class Timing:
    path: str
    status: int
    seconds: list[float]
    size: int

    @property
    def cold(self) -> float:
        return self.seconds[0]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def worst(self) -> float:
        return max(self.seconds)


def admin_get_paths(engine: Engine) -> list[str]:
    """Every admin GET route of the app, as its OpenAPI schema lists them, with real ids in
    its path, plus a ``generation`` filter where the route takes one."""
    schema_paths = create_app().openapi()["paths"]
    paths = []
    with engine.connect() as connection:

        def value_of(name: str) -> str:
            if name not in PATH_IDS:
                raise SystemExit(f"no id for {{{name}}}: add a query for it to PATH_IDS")
            return str(connection.execute(text(PATH_IDS[name])).scalar())

        for template, operations in schema_paths.items():
            if "get" not in operations or not template.startswith(ADMIN_PREFIXES):
                continue
            path = PATH_PARAMETER.sub(lambda match: value_of(match.group(1)), template)
            paths.append(path)
            for parameter in operations["get"].get("parameters", []):
                if parameter["in"] == "query" and parameter["name"] == "generation":
                    paths.append(f"{path}?generation={value_of('generation')}")
                elif parameter["in"] == "query" and parameter["name"] == "window":
                    other_windows = [key for key in WINDOWS if key != DEFAULT_WINDOW]
                    paths.extend(f"{path}?window={key}" for key in other_windows)
    return paths


@contextmanager
def admin_client(database_url: str, shape: ProjectShape) -> Iterator[TestClient]:
    """The app on ``database_url``, in process, logged in as the project's admin."""
    previous = os.environ.get("STEPLABEL_DATABASE_URL")
    os.environ["STEPLABEL_DATABASE_URL"] = database_url
    get_settings.cache_clear()
    try:
        with TestClient(create_app()) as client:
            log_in(client, shape.admin_name, shape.admin_password)
            yield client
    finally:
        dispose_engines()
        if previous is None:
            os.environ.pop("STEPLABEL_DATABASE_URL", None)
        else:
            os.environ["STEPLABEL_DATABASE_URL"] = previous
        get_settings.cache_clear()


def time_requests(client: TestClient, paths: list[str], repeat: int) -> list[Timing]:
    timings = []
    for path in paths:
        seconds = []
        for _ in range(repeat):
            started = time.perf_counter()
            response = client.get(path)
            seconds.append(time.perf_counter() - started)
        timings.append(Timing(path, response.status_code, seconds, len(response.content)))
    return timings


def report(timings: list[Timing]) -> bool:
    """Print the table; True when every request answered 200 under the target."""
    width = max(len(timing.path) for timing in timings)
    print(f"{'request':<{width}}  status  cold ms  median ms  max ms      bytes")
    ok = True
    for timing in timings:
        missed = timing.status != 200 or timing.cold >= TARGET_S or timing.worst >= TARGET_S
        ok &= not missed
        print(
            f"{timing.path:<{width}}  {timing.status:>6}  {timing.cold * 1000:>7.0f}  "
            f"{timing.median * 1000:>9.0f}  {timing.worst * 1000:>6.0f}  {timing.size:>9,}"
            + ("  MISSED" if missed else "")
        )
    verdict = "met" if ok else "missed"
    print(f"target: every request under {TARGET_S * 1000:.0f} ms with status 200: {verdict}")
    return ok


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    defaults = ProjectShape()
    parser = argparse.ArgumentParser(description="Time the admin dashboard's GET requests.")
    parser.add_argument("--labels", type=int, default=defaults.labels, help="labels to make")
    parser.add_argument("--labelers", type=int, default=defaults.labelers, help="labelers")
    parser.add_argument(
        "--overlap", type=float, default=defaults.overlap, help="share of shared solutions"
    )
    parser.add_argument("--generations", type=int, default=defaults.generations)
    parser.add_argument("--repeat", type=int, default=5, help="requests per path")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL, help="server to use")
    parser.add_argument("--keep-database", action="store_true", help="do not drop it")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    shape = ProjectShape(
        labels=args.labels,
        labelers=args.labelers,
        overlap=args.overlap,
        generations=args.generations,
        seed=args.seed,
    )
    print(f"machine: os.cpu_count()={os.cpu_count()}, Python {sys.version.split()[0]}")
    with fresh_postgres_database(
        args.postgres_url, "steplabel_dashboard", args.keep_database
    ) as database_url:
        schema.upgrade(database_url)
        started = time.perf_counter()
        rows = fill_project(database_url, shape)
        filled = time.perf_counter() - started
        print(", ".join(f"{table} {count:,}" for table, count in rows.items()))
        print(f"filled with COPY, vacuumed and analyzed in {filled:.1f} s")
        engine = make_engine(database_url)
        try:
            with engine.connect() as connection:
                print(connection.execute(text("SELECT version()")).scalar())
            paths = admin_get_paths(engine)
        finally:
            engine.dispose()
        print(f"load average before timing: {os.getloadavg()[0]:.2f}")
        with admin_client(database_url, shape) as client:
            timings = time_requests(client, paths, args.repeat)
        print(f"load average after timing: {os.getloadavg()[0]:.2f}")
    return 0 if report(timings) else 1


if __name__ == "__main__":
    raise SystemExit(main())
