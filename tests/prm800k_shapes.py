"""Whether a PRM800K line is shaped as the real ones: the same fields, in the same order,
each of a type (and null-ness) that the real lines of its phase have there.

The real lines are shared/data/prm800k_raw_samples.jsonl; without them the caller is
skipped.
"""

import json
from typing import Any

import pytest

from bench import SHARED_DATA

REAL_LINES = SHARED_DATA / "prm800k_raw_samples.jsonl"


def shapes(value: Any, path: str = "") -> set[tuple[str, str]]:
    """Each field of a JSON value as (path, type): an object's type names its keys in
    order, a list's items share the path ``[]``; a scalar's type is its JSON type."""
    if isinstance(value, dict):
        found = {(path, "object " + ",".join(value))}
        for key, item in value.items():
            found |= shapes(item, f"{path}.{key}")
        return found
    if isinstance(value, list):
        return {(path, "array")}.union(*(shapes(item, path + "[]") for item in value))
    scalar = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string"}
    return {(path, scalar[type(value)])}


def real_shapes(phase1: bool) -> set[tuple[str, str]]:
    """Every field of the real lines of a phase, with each type they have there (phase 2:
    the regular lines, not the screening one)."""
    if not REAL_LINES.exists():
        pytest.skip(f"the real PRM800K lines are not at {REAL_LINES}")
    lines = [json.loads(line) for line in REAL_LINES.read_text().splitlines()]
    chosen = [
        line
        for line in lines
        if (line["generation"] is None) == phase1 and not line["is_initial_screening_question"]
    ]
    assert chosen, "the sample holds lines of both phases"
    return set().union(*(shapes(line) for line in chosen))


def expect_as_the_real_lines(record: dict[str, Any], *, phase1: bool) -> None:
    """The record has the real lines' fields, no other, each of a type they have there."""
    ours, real = shapes(record), real_shapes(phase1)
    assert {path for path, _ in ours} == {path for path, _ in real}
    assert ours - real == set(), f"not as in PRM800K's phase {1 if phase1 else 2}"
