"""Import a synthetic PRM800K file, export it again, and compare with ``json.dumps``.

    .venv/bin/python -m bench.export_import --lines 100000 --databases sqlite,postgres

For each database: a fresh schema (Alembic), then the import and the export, each timed in
a fresh process so that its peak memory is its own. The export must give back the input
byte for byte. The floor is the time ``json.dumps`` alone takes to write the same lines.
MB is 10^6 bytes. "peak +MiB" is how much ``ru_maxrss`` grew during the phase, over the
baseline of a fresh interpreter with the app imported; "max MiB" is the process's peak in all.
"""

import argparse
import filecmp
import json
import multiprocessing
import resource
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from app.core import schema
from app.core.db import make_engine, transaction
from app.datasets.bulk import paused_gc
from app.datasets.export import ExportFilter, write_export
from app.datasets.importing import import_prm800k
from app.datasets.reading import batched, read_files
from bench.databases import fresh_postgres_database
from bench.synthetic_prm800k import synthetic_lines

DATABASES = ("sqlite", "postgres")
DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
MAX_EXPORT_OVER_FLOOR = 3.0
MIN_EXPORT_LINES_PER_S = 10_000
MIN_IMPORT_LINES_PER_S = 3_000
FLOOR_CHUNK = 1_000


@dataclass(frozen=True)
class Measure:
    """One timed phase: seconds, peak memory (its growth over the phase, and in all), a summary."""

    seconds: float
    peak_bytes: int
    max_rss_bytes: int
    summary: str


@dataclass(frozen=True)
class DatabaseResult:
    database: str
    imported: Measure
    exported: Measure
    identical: bool


# The phases, each run in a fresh process.


def _import(url: str, source: Path) -> str:
    engine = make_engine(url)
    try:
        # The collector paused, as the command line's import and export have it.
        with transaction(engine) as session, paused_gc():
            return import_prm800k(session, read_files([source])).describe()
    finally:
        engine.dispose()


def _export(url: str, target: Path) -> str:
    engine = make_engine(url)
    try:
        with (
            transaction(engine) as session,
            target.open("w", encoding="utf-8", newline="") as out,
            paused_gc(),
        ):
            return write_export(session, out, ExportFilter()).describe()
    finally:
        engine.dispose()


def _measured(phase: Callable[[str, Path], str], url: str, path: Path) -> Measure:
    # ru_maxrss is in KiB on Linux; the baseline is taken after every import has loaded.
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    summary = phase(url, path)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return Measure(seconds, (peak - baseline) * 1024, peak * 1024, summary)


def in_fresh_process(phase: Callable[[str, Path], str], url: str, path: Path) -> Measure:
    """Run ``phase`` in a newly spawned interpreter and return its measure."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(_measured, phase, url, path).result()


# Input, floor and databases


def write_synthetic(path: Path, count: int) -> float:
    """Write ``count`` synthetic lines to ``path``; returns the seconds it took."""
    start = time.perf_counter()
    with path.open("w", encoding="utf-8", newline="") as out:
        for line in synthetic_lines(count):
            out.write(line)
            out.write("\n")
    return time.perf_counter() - start


def dumps_floor(path: Path) -> float:
    """Seconds ``json.dumps`` takes to serialize every line of ``path`` (decoding untimed)."""
    total = 0.0
    with path.open("rb") as lines:
        for chunk in batched(lines, FLOOR_CHUNK):
            records = [json.loads(line) for line in chunk]
            start = time.perf_counter()
            for record in records:
                json.dumps(record)
            total += time.perf_counter() - start
    return total


@contextmanager
def fresh_database(kind: str, postgres_url: str, workdir: Path) -> Iterator[str]:
    """The URL of an empty database, removed afterwards."""
    if kind == "sqlite":
        path = workdir / "bench.sqlite3"
        try:
            yield f"sqlite:///{path}"
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    with fresh_postgres_database(postgres_url, "steplabel_bench") as url:
        yield url


def bench_database(kind: str, postgres_url: str, source: Path, workdir: Path) -> DatabaseResult:
    exported_path = workdir / f"export-{kind}.jsonl"
    with fresh_database(kind, postgres_url, workdir) as url:
        schema.upgrade(url)
        imported = in_fresh_process(_import, url, source)
        print(f"{kind} import: {imported.summary}", flush=True)
        exported = in_fresh_process(_export, url, exported_path)
        print(f"{kind} export: {exported.summary}", flush=True)
    identical = filecmp.cmp(source, exported_path, shallow=False)
    if identical:
        exported_path.unlink()  # a mismatching export stays, for a diff
    return DatabaseResult(kind, imported, exported, identical)


# Report

HEADER = (
    "database", "phase", "lines", "seconds", "lines/s", "MB/s", "peak +MiB", "max MiB",
    "x floor", "check",
)  # fmt: skip


def _print_row(cells: tuple[str, ...]) -> None:
    # A Markdown table, so that BENCHMARKS.md can take it as printed.
    widths = [max(len(name), 10) for name in HEADER]
    print(
        "| "
        + " | ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True))
        + " |"
    )


def _phase_cells(
    database: str, phase: str, measure: Measure, lines: int, size: int
) -> tuple[str, ...]:
    return (
        database,
        phase,
        f"{lines:,}",
        f"{measure.seconds:.2f}",
        f"{lines / measure.seconds:,.0f}",
        f"{size / 1e6 / measure.seconds:.1f}",
        f"{measure.peak_bytes / 2**20:.0f}",
        f"{measure.max_rss_bytes / 2**20:.0f}",
    )


def report_table(results: list[DatabaseResult], floor: float, lines: int, size: int) -> None:
    print()
    _print_row(HEADER)
    _print_row(tuple("-" * max(len(name), 10) for name in HEADER))
    floor_cells = _phase_cells("python", "json.dumps", Measure(floor, 0, 0, ""), lines, size)
    _print_row((*floor_cells[:6], "-", "-", "1.0x", "-"))
    for result in results:
        imported = _phase_cells(result.database, "import", result.imported, lines, size)
        _print_row((*imported, "-", "-"))
        over = f"{result.exported.seconds / floor:.1f}x"
        check = "OK" if result.identical else "MISMATCH"
        exported = _phase_cells(result.database, "export", result.exported, lines, size)
        _print_row((*exported, over, check))


def report_targets(results: list[DatabaseResult], floor: float, lines: int) -> None:
    print()
    for result in results:
        over = result.exported.seconds / floor
        export_rate = lines / result.exported.seconds
        import_rate = lines / result.imported.seconds
        targets = (
            (f"export <= {MAX_EXPORT_OVER_FLOOR:.0f}x json.dumps", f"{over:.1f}x",
             over <= MAX_EXPORT_OVER_FLOOR),
            (f"export >= {MIN_EXPORT_LINES_PER_S:,} lines/s", f"{export_rate:,.0f}",
             export_rate >= MIN_EXPORT_LINES_PER_S),
            (f"import >= {MIN_IMPORT_LINES_PER_S:,} lines/s", f"{import_rate:,.0f}",
             import_rate >= MIN_IMPORT_LINES_PER_S),
        )  # fmt: skip
        for target, value, met in targets:
            print(f"{result.database:<9} {target:<30} {value:>8}  {'met' if met else 'MISSED'}")


# Command line


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Time PRM800K import and export.")
    parser.add_argument("--lines", type=int, default=100_000, help="synthetic lines to write")
    parser.add_argument(
        "--databases",
        type=_database_list,
        default=list(DATABASES),
        help="comma-separated: sqlite, postgres (default both)",
    )
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL, help="server to use")
    parser.add_argument("--workdir", type=Path, help="where files go (default: a temp dir)")
    return parser.parse_args(argv)


def _database_list(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = sorted(set(names) - set(DATABASES))
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(DATABASES)}, got {value!r}")
    return names


@contextmanager
def working_directory(path: Path | None) -> Iterator[Path]:
    """``path`` (kept afterwards), or a temporary directory (removed)."""
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="steplabel-bench-") as temporary:
        yield Path(temporary)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with working_directory(args.workdir) as workdir:
        source = workdir / "synthetic_prm800k.jsonl"
        seconds = write_synthetic(source, args.lines)
        size = source.stat().st_size
        print(f"wrote {args.lines:,} lines, {size / 1e6:.1f} MB in {seconds:.1f} s: {source}")
        floor = dumps_floor(source)
        results = [
            bench_database(kind, args.postgres_url, source, workdir) for kind in args.databases
        ]
    report_table(results, floor, args.lines, size)
    report_targets(results, floor, args.lines)
    return 0 if all(result.identical for result in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
