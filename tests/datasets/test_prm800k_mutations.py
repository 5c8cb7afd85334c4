"""Every field of the real PRM800K lines set to null, dropped, or moved past the next key.

Each changed line either imports and exports byte for byte, or is refused as ``FILE:LINE``
naming the field (or the object around it, together with the key), with nothing written.
Any other exception fails the test: an import must never end in a traceback.
"""

import copy
import io
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.datasets.export import ExportFilter, write_export
from app.datasets.importing import import_prm800k
from app.datasets.reading import ImportLineError, read_jsonl
from app.models import Label, LabelStep, Problem, Solution, StepCompletion, User

SOURCE = "changed.jsonl"
KINDS = ("null", "drop", "move")
TABLES = (Label, LabelStep, StepCompletion, Problem, Solution, User)
KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Change:
    line: int
    """1-based, in prm800k_raw_samples.jsonl."""
    path: KeyPath
    """The key changed: the keys and list indexes that lead to it."""
    kind: str

    @property
    def field(self) -> str:
        return ".".join(str(part) for part in self.path)

    def parent(self, record: dict[str, Any]) -> Any:
        for part in self.path[:-1]:
            record = record[part]
        return record

    def apply(self, record: dict[str, Any]) -> dict[str, Any]:
        changed = copy.deepcopy(record)
        parent = self.parent(changed)
        key = self.path[-1]
        if self.kind == "null":
            parent[key] = None
        elif self.kind == "drop":
            del parent[key]
        else:
            keys = list(parent)
            at = keys.index(key)
            keys[at], keys[at + 1] = keys[at + 1], keys[at]
            items = {name: parent.pop(name) for name in list(parent)}
            parent.update((name, items[name]) for name in keys)
        return changed


def key_paths(value: Any, path: KeyPath = ()) -> Iterator[tuple[KeyPath, bool]]:
    """The path of every key in ``value``, and whether another key follows it."""
    if isinstance(value, dict):
        keys = list(value)
        for at, key in enumerate(keys):
            yield (*path, key), at + 1 < len(keys)
            yield from key_paths(value[key], (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from key_paths(item, (*path, index))


def changes(records: list[dict[str, Any]]) -> list[Change]:
    return [
        Change(number, path, kind)
        for number, record in enumerate(records, start=1)
        for path, has_next in key_paths(record)
        for kind in KINDS
        if kind != "move" or has_next
    ]


def row_count(session: Session) -> int:
    return sum(session.scalar(select(func.count()).select_from(t)) or 0 for t in TABLES)


def exported(session: Session) -> str:
    out = io.StringIO()
    write_export(session, out, ExportFilter())
    return out.getvalue()


def names_the_field(message: str, change: Change) -> bool:
    """The error's location is the field, or an object around it whose message names it."""
    prefix = f"{SOURCE}:1: "
    if not message.startswith(prefix):
        return False
    location = message.removeprefix(prefix).split(": ", 1)[0]
    if location == change.field:
        return True
    around = change.path[:-1]
    parents = {".".join(str(part) for part in around[:n]) for n in range(len(around) + 1)}
    return location in parents and str(change.path[-1]) in message


def outcome(session: Session, change: Change, text: str) -> tuple[bool, str | None]:
    """Whether ``text`` was imported, and what went wrong, if anything."""
    try:
        import_prm800k(session, read_jsonl(SOURCE, io.BytesIO(text.encode())))
    except ImportLineError as error:
        if row_count(session):
            return False, f"refused ({error}) but wrote rows"
        return False, None if names_the_field(str(error), change) else f"refused as: {error}"
    back = exported(session)
    return True, None if back == text else f"imported, but exported as {back!r}"


def test_every_field_null_dropped_or_moved(session: Session, shared_data: Path) -> None:
    lines = (shared_data / "prm800k_raw_samples.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    cases = changes(records)
    started = time.perf_counter()
    failures: list[str] = []
    imported: set[Change] = set()
    for change in cases:
        text = json.dumps(change.apply(records[change.line - 1])) + "\n"
        savepoint = session.begin_nested()
        try:
            was_imported, problem = outcome(session, change, text)
        finally:
            savepoint.rollback()
        if was_imported:
            imported.add(change)
        if problem is not None:
            failures.append(f"line {change.line} {change.kind} {change.field}: {problem}")
    elapsed = time.perf_counter() - started
    print(f"{len(cases)} cases, {len(imported)} imported and exported back, {elapsed:.1f} s")
    assert not failures, "\n".join(failures[:20])
    # Issue 16: a step that chose no completion may have none (null), as in a give_up line.
    no_completions = [
        change
        for change in cases
        if change.kind == "null"
        and change.path[-1] == "completions"
        and change.parent(records[change.line - 1])["chosen_completion"] is None
    ]
    assert no_completions and set(no_completions) <= imported
