"""Pull 10,000 labels through the JSON API as PRM800K JSONL, side by side with Potato's
in-server export of 10,000 annotations on the same machine.

    .venv/bin/python -m bench.api_export --labels 10000 --repeats 7 \\
        --potato /tmp/potato-venv/bin/potato

steplabel: a fresh database per backend, the labels imported (synthetic PRM800K lines of
realistic size, bench/synthetic_prm800k.py), the server started as ``make serve`` starts
it (uvicorn, one process), an admin's export token, then ``GET /api/v1/labels`` timed from
the request to the last byte, and ``steplabel remote pull`` timed as a whole process. The
pull must give back the imported file byte for byte.

Potato (installed apart, e.g. ``python -m venv /tmp/potato-venv`` and ``pip install
potato-annotation==2.12.1``, never into this project): a task of 10,000 items, each with
one radio annotation, across 10 annotators' stored states, its server started with
``potato start``, then ``POST /admin/api/export`` in the JSONL format timed the same way
(the export is written on the server, and the request returns once it is).

Each figure: the median of ``--repeats`` runs after one warm-up, with the minimum and
maximum. All the servers run on this machine at once, and the runs take turns, round after
round, so that the load of a shared machine falls on each alike.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy.orm import Session

from app.auth import tokens
from app.auth.users import create_user
from app.core import schema
from app.core.db import make_engine, transaction
from app.datasets.importing import import_prm800k
from app.datasets.reading import read_files
from app.models import Role
from bench.export_import import DEFAULT_POSTGRES_URL, fresh_database, write_synthetic

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 120.0
POTATO_USERS = 10
POTATO_KEY = "bench-admin-key"


@dataclass(frozen=True)
class Timing:
    what: str
    seconds: list[float]
    detail: str

    def row(self) -> str:
        median = statistics.median(self.seconds)
        low, high = min(self.seconds), max(self.seconds)
        return f"| {self.what} | {median:.3f} | {low:.3f}-{high:.3f} | {self.detail} |"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"no answer from {url}:\n{log.read_text()[-3000:]}")


@contextmanager
def _serving(command: list[str], env: dict[str, str], cwd: Path, probe: str) -> Iterator[None]:
    log = cwd / "server.log"
    with log.open("wb") as output:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=output, stderr=output)
    try:
        _wait(probe, process, log)
        yield
    finally:
        process.terminate()
        process.wait(timeout=30)


# steplabel


def _prepare(url: str, source: Path) -> str:
    """Migrate, import the labels, make an admin's export token; the token."""
    schema.upgrade(url)
    engine = make_engine(url)
    try:
        with transaction(engine) as session:
            import_prm800k(session, read_files([source]))
        with Session(engine) as session:
            admin = create_user(session, "bench-admin", Role.ADMIN, "bench-password-1")
            _token, secret = tokens.create_token(
                session, admin, "bench", tokens.parse_scopes("export")
            )
            session.commit()
        return secret
    finally:
        engine.dispose()


@contextmanager
def steplabel_server(
    kind: str, source: Path, workdir: Path
) -> Iterator[tuple[str, str, dict[str, str]]]:
    """A server over a fresh ``kind`` database holding ``source``'s labels: (its URL, an
    export token, the environment it runs in)."""
    with fresh_database(kind, DEFAULT_POSTGRES_URL, workdir) as url:
        secret = _prepare(url, source)
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("STEPLABEL_")}
        env |= {
            "STEPLABEL_DATABASE_URL": url,
            "STEPLABEL_SECRET_KEY": "bench-" + "k" * 40,
            "PYTHONPATH": str(ROOT),
        }
        command = [sys.executable, "-m", "uvicorn", "app.main:app", "--port", str(port)]
        command += ["--no-proxy-headers", "--log-level", "warning"]
        with _serving(command, env, workdir, f"{base}/healthz"):
            yield base, secret, env


def api_pull(base: str, secret: str, target: Path) -> Callable[[], object]:
    """One pull of every label through the API, written to ``target``."""
    headers = {"Authorization": f"Bearer {secret}"}

    def request() -> None:
        with (
            httpx.stream("GET", f"{base}/api/v1/labels", headers=headers, timeout=300) as response,
            target.open("wb") as out,
        ):
            response.raise_for_status()
            for chunk in response.iter_bytes():
                out.write(chunk)

    return request


def cli_pull(base: str, secret: str, env: dict[str, str], target: Path) -> Callable[[], object]:
    """``steplabel remote pull`` as a process of its own."""
    command = [sys.executable, "-c", "from app.cli import main; main()", "remote", "pull"]
    command += [str(target), "--url", base]

    def process() -> None:
        subprocess.run(command, env=env | {"STEPLABEL_TOKEN": secret}, check=True,
                       capture_output=True)  # fmt: skip

    return process


# Potato


def _potato_task(task: Path, items: int) -> None:
    """A Potato task of ``items`` items, each annotated once (radio), in stored states."""
    (task / "data").mkdir(parents=True)
    config = {
        "annotation_task_name": "steplabel-bench",
        "task_dir": ".",
        "output_annotation_dir": "annotation_output",
        "data_files": ["data/items.jsonl"],
        "item_properties": {"id_key": "id", "text_key": "text"},
        "annotation_schemes": [
            {
                "annotation_type": "radio",
                "name": "correctness",
                "description": "Is the step correct?",
                "labels": ["positive", "neutral", "negative"],
            }
        ],
        "admin_api_key": POTATO_KEY,
        "user_config": {"allow_all_users": True},
    }
    # JSON is YAML: no YAML writer needed here.
    (task / "config.yaml").write_text(json.dumps(config, indent=2))
    with (task / "data" / "items.jsonl").open("w") as out:
        for i in range(items):
            out.write(json.dumps({"id": f"step-{i}", "text": f"Step {i}: {i} + {i} = {2 * i}."}))
            out.write("\n")
    ratings = ("positive", "neutral", "negative")
    for user in range(POTATO_USERS):
        folder = task / "annotation_output" / f"labeler{user}"
        folder.mkdir(parents=True)
        values = {
            f"step-{i}": [[{"schema": "correctness", "name": ratings[i % 3]}, "true"]]
            for i in range(user, items, POTATO_USERS)
        }
        state = {"user_id": f"labeler{user}", "instance_id_to_label_to_value": values}
        (folder / "user_state.json").write_text(json.dumps(state))


@contextmanager
def potato_server(potato: Path, items: int, workdir: Path) -> Iterator[Callable[[], object]]:
    """Potato serving a task of ``items`` annotations; yields one timed in-server export."""
    task = workdir / "potato-task"
    _potato_task(task, items)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    out = task / "exported"

    def export() -> None:
        response = httpx.post(
            f"{base}/admin/api/export",
            headers={"X-API-Key": POTATO_KEY},
            json={"format": "jsonl", "output": str(out)},
            timeout=300,
        )
        response.raise_for_status()
        records = response.json()["stats"]["num_records"]
        if records != items:
            raise AssertionError(f"Potato exported {records} annotations, not {items}")

    with _serving([str(potato), "start", "config.yaml", "-p", str(port)], dict(os.environ),
                  task, f"{base}/"):  # fmt: skip
        yield export


def side_by_side(runs: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Each run once to warm up, then ``repeats`` rounds of every run in turn, so that the
    load of a shared machine falls on them alike."""
    for run in runs.values():
        run()
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - start)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--potato", type=Path, help="Potato's `potato` command, if installed")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="steplabel-api-bench-") as folder:
        workdir = Path(folder)
        source = workdir / "labels.jsonl"
        write_synthetic(source, args.labels)
        size = f"{source.stat().st_size / 1e6:.1f} MB"
        timings = []
        with ExitStack() as servers:
            runs: dict[str, Callable[[], object]] = {}
            pulled: dict[str, Path] = {}
            for kind in args.databases.split(","):
                base, secret, env = servers.enter_context(steplabel_server(kind, source, workdir))
                pulled[kind] = workdir / f"pulled-{kind}.jsonl"
                runs[f"steplabel {kind}: GET /api/v1/labels"] = api_pull(base, secret, pulled[kind])
                runs[f"steplabel {kind}: `steplabel remote pull` process"] = cli_pull(
                    base, secret, env, workdir / f"cli-{kind}.jsonl"
                )
            if args.potato is not None:
                export = servers.enter_context(potato_server(args.potato, args.labels, workdir))
                runs["Potato 2.12.1: POST /admin/api/export (jsonl)"] = export
            seconds = side_by_side(runs, args.repeats)
        for kind, path in pulled.items():
            if path.read_bytes() != source.read_bytes():
                raise AssertionError(f"{kind}: the pull is not the imported file")
        for name, measured in seconds.items():
            potato = name.startswith("Potato")
            data = f"{args.labels:,} annotations" if potato else f"{args.labels:,} labels, {size}"
            timings.append(Timing(name, measured, data))
    print(f"| what | median s | min-max s | data |  ({args.repeats} runs after a warm-up)")
    print("|---|---|---|---|")
    for timing in timings:
        print(timing.row())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
