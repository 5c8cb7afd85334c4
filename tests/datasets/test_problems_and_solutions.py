"""Importing MATH problems and model solutions."""

import io
import json
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.answers import last_boxed
from app.datasets.importing import import_problems, import_solutions
from app.datasets.reading import ImportLineError, read_files, read_jsonl
from app.models import Problem, Solution


def lines(*rows: object) -> io.BytesIO:
    return io.BytesIO("".join(json.dumps(row) + "\n" for row in rows).encode())


def split_problem(n: int = 1, **overrides: object) -> dict[str, object]:
    return {
        "problem": f"What is ${n}+{n}$?",
        "solution": f"${n}+{n}=\\boxed{{{2 * n}}}$",
        "answer": str(2 * n),
        "subject": "Prealgebra",
        "level": 1,
        "unique_id": f"test/prealgebra/{n}.json",
        **overrides,
    }


def test_split_and_hendrycks_formats(session: Session) -> None:
    hendrycks = {
        "problem": "Compute $\\frac{6}{3}$.",
        "level": "Level 2",
        "type": "Algebra",
        "solution": "We get $\\boxed{2}$.",
    }
    unknown_level = {**hendrycks, "problem": "Other?", "level": "Level ?"}
    summary = import_problems(
        session, read_jsonl("p", lines(split_problem(), hendrycks, unknown_level))
    )
    assert summary.added == 3
    rows = {p.text: p for p in session.scalars(select(Problem))}
    split = rows["What is $1+1$?"]
    assert (split.ground_truth_answer, split.subject, split.level) == ("2", "Prealgebra", 1)
    assert split.source_id == "test/prealgebra/1.json"
    original = rows["Compute $\\frac{6}{3}$."]
    assert (original.ground_truth_answer, original.subject, original.level) == ("2", "Algebra", 2)
    assert original.source_id is None
    assert rows["Other?"].level is None


def test_reimport_adds_nothing_and_fills_in_metadata(session: Session) -> None:
    bare = {**split_problem(), "subject": None, "level": None, "unique_id": None}
    import_problems(session, read_jsonl("p", lines(bare)))
    summary = import_problems(session, read_jsonl("p", lines(split_problem(), split_problem())))
    assert (summary.added, summary.already_present) == (0, 2)
    problem = session.scalars(select(Problem)).one()
    assert (problem.subject, problem.level, problem.source_id) == (
        "Prealgebra",
        1,
        "test/prealgebra/1.json",
    )


def test_conflicting_unique_id_is_a_line_error(session: Session) -> None:
    import_problems(session, read_jsonl("p", lines(split_problem())))
    clash = split_problem(answer="3")
    with pytest.raises(ImportLineError, match=r"^p:2: unique_id 'test/prealgebra/1.json' already"):
        import_problems(session, read_jsonl("p", lines(split_problem(2), clash)))


def test_hendrycks_line_without_a_boxed_answer_is_rejected(session: Session) -> None:
    line = {"problem": "x", "level": "Level 1", "type": "Algebra", "solution": "no box"}
    with pytest.raises(ImportLineError, match=r"^p:1: solution has no \\boxed"):
        import_problems(session, read_jsonl("p", lines(line)))


def test_real_math_files(session: Session, shared_data: Path) -> None:
    math500 = shared_data / "math500_test.jsonl"
    hendrycks = shared_data / "hendrycks_math_test_1000_rise.jsonl"
    summary = import_problems(session, read_files([math500, hendrycks]))
    assert summary.lines == 1500
    assert summary.added + summary.already_present == 1500
    count = session.scalar(select(func.count()).select_from(Problem))
    assert count == summary.added
    first = json.loads(math500.read_text().splitlines()[0])
    stored = session.scalars(select(Problem).where(Problem.source_id == first["unique_id"])).one()
    assert (stored.text, stored.ground_truth_answer) == (first["problem"], first["answer"])
    for row in map(json.loads, hendrycks.read_text().splitlines()[:50]):
        answers = session.scalars(
            select(Problem.ground_truth_answer).where(Problem.text == row["problem"])
        )
        assert last_boxed(row["solution"]) in answers.all()


def test_solutions_by_unique_id_text_and_steps(session: Session) -> None:
    import_problems(session, read_jsonl("p", lines(split_problem(1), split_problem(2))))
    rows = [
        {
            "unique_id": "test/prealgebra/1.json",
            "steps": ["$1+1=2$.\n\n# Answer\n\n2"],
            "score": 0.9,
        },
        {
            "problem": "What is $2+2$?",
            "solution": "Add them.\n\n$2+2=5$.\n\n# Answer\n\n5\n",
            "generator": "gpt-4",
        },
        {"problem": "A brand new problem?", "steps": ["It is $\\boxed{7}$."], "answer": "7.0"},
    ]
    summary = import_solutions(session, read_jsonl("s", lines(*rows)))
    assert (summary.added, summary.created) == (3, {"problems": 1})
    by_problem = {s.problem.text: s for s in session.scalars(select(Solution))}
    first = by_problem["What is $1+1$?"]
    assert (first.answer, first.verifier_score) == ("2", 0.9)
    second = by_problem["What is $2+2$?"]
    assert second.steps == ["Add them.", "$2+2=5$.\n\n# Answer\n\n5"]
    assert (second.answer, second.generator) == ("5", "gpt-4")
    assert by_problem["A brand new problem?"].answer == "7.0"
    again = import_solutions(session, read_jsonl("s", lines(*rows)))
    assert (again.added, again.already_present) == (0, 3)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"unique_id": "test/none.json", "steps": ["a"]},
            "no problem has unique_id 'test/none.json'",
        ),
        ({"steps": ["a"]}, "give the problem"),
        ({"problem": "p", "steps": ["a"], "solution": "a"}, "give exactly one of"),
        ({"problem": "p", "steps": ["a", " "]}, "empty step"),
        ({"problem": "p", "steps": "a"}, "steps: Input should be a valid array"),
    ],
)
def test_bad_solution_lines(session: Session, row: dict[str, object], message: str) -> None:
    with pytest.raises(ImportLineError, match=f"^s:2: .*{message}"):
        import_solutions(session, read_jsonl("s", lines({"problem": "ok", "steps": ["x"]}, row)))


def test_processbench_lines(session: Session, shared_data: Path) -> None:
    path = shared_data / "processbench_math.jsonl"
    summary = import_solutions(session, read_files([path]))
    assert summary.added == 1000
    first = json.loads(path.read_text().splitlines()[0])
    stored = session.scalars(select(Solution).where(Solution.source_id == first["id"])).one()
    assert stored.steps == first["steps"]
    assert stored.generator == first["generator"]
    assert stored.answer == last_boxed("\n".join(first["steps"]))


def test_solutions_join_the_queue_with_their_alternatives(session: Session) -> None:
    rows = [
        {
            "problem": "What is $3 \\cdot 4$?",
            "steps": ["$3 \\cdot 4 = 11$.", "So $11$.\n\n# Answer\n\n11"],
            "alternatives": [["$3 \\cdot 4 = 12$."]],
        }
    ]
    import_solutions(session, read_jsonl("s", lines(*rows)), generation=3)
    import_solutions(
        session, read_jsonl("t", lines({"problem": "x?", "steps": ["y"]})), queue=False
    )
    queued, not_queued = session.scalars(select(Solution).order_by(Solution.id)).all()
    assert (queued.queue_state, queued.generation) == ("open", 3)
    assert queued.alternatives == [["$3 \\cdot 4 = 12$."]]
    assert (not_queued.queue_state, not_queued.generation) == ("not_queued", None)


def test_more_alternatives_than_steps_is_a_line_error(session: Session) -> None:
    row = {"problem": "p", "steps": ["a"], "alternatives": [["b"], ["c"]]}
    with pytest.raises(ImportLineError, match="alternatives are given for 2 steps"):
        import_solutions(session, read_jsonl("s", lines(row)))
