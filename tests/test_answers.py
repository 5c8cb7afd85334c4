import pytest

from app.answers import answer_section, final_answer, last_boxed, split_steps


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so $x = \\boxed{5}$.", "5"),
        ("$\\boxed{\\frac{1}{2}}$ and then $\\boxed{\\dfrac{3}{4}}$", "\\dfrac{3}{4}"),
        ("nested $\\boxed{\\{1, \\sqrt{2}\\}}$", "\\{1, \\sqrt{2}\\}"),
        ("$\\fbox{7}$", "7"),
        ("the answer is $\\boxed 9$.", "9"),
        ("no box here", None),
        ("unbalanced $\\boxed{1 + {2}$", None),
        ("$\\boxed{}$", None),
    ],
)
def test_last_boxed(text: str, expected: str | None) -> None:
    assert last_boxed(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("So a pencil costs 29 cents.\n\n# Answer\n\n29", "29"),
        ("# Answer\n\n\\frac{1}{2}\n", "\\frac{1}{2}"),
        ("The # Answer is not a heading here: 3", None),
        ("Done.\n\n# Answer\n\n", None),
    ],
)
def test_answer_section(text: str, expected: str | None) -> None:
    assert answer_section(text) == expected


def test_final_answer_prefers_the_answer_section_then_the_last_box() -> None:
    assert final_answer(["$\\boxed{4}$", "So it is 5.\n\n# Answer\n\n5"]) == "5"
    assert final_answer(["$\\boxed{4}$", "Therefore done."]) == "4"
    assert final_answer([]) is None


def test_split_steps_keeps_the_answer_section_on_the_last_step() -> None:
    text = "First, add.\n\n  Then divide: $x=5$.  \n\n# Answer\n\n5\n"
    assert split_steps(text) == ["First, add.", "Then divide: $x=5$.\n\n# Answer\n\n5"]
    assert split_steps("one\ntwo") == ["one", "two"]
    assert split_steps("# Answer\n\n7") == ["# Answer\n\n7"]
