"""The example lines the Imports page shows import as they say, one after another."""

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.admin.imports import IMPORT_KINDS
from app.datasets.examples import EXAMPLE_LINES
from app.datasets.importing import import_prm800k, import_problems, import_solutions
from app.datasets.reading import SourceLine
from app.models import Label, Problem, Solution


def test_each_kind_has_an_example_that_imports(session: Session) -> None:
    assert set(EXAMPLE_LINES) == set(IMPORT_KINDS)
    for kind, importer in (
        ("problems", import_problems),
        ("solutions", import_solutions),
        ("prm800k", import_prm800k),
    ):
        summary = importer(session, [SourceLine(f"{kind}.jsonl", 1, EXAMPLE_LINES[kind])])
        assert (summary.added, summary.invalid) == (1, 0), kind
    counts = [
        session.scalar(select(func.count()).select_from(t)) for t in (Problem, Solution, Label)
    ]
    # The label is of the queued solution: the same problem and steps, one row each.
    assert counts == [1, 1, 1]
