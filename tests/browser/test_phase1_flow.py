"""A phase-1 task in headless Chromium, from the first candidate to the PRM800K export.

The labeler rates every candidate of each step, goes on with one, writes a step where no
candidate is right (and one beside a positive candidate that does not follow their path),
and submits; the export writes the written steps as PRM800K's phase 1 did.
"""

import io
import json
import re
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect
from sqlalchemy.orm import Session

from app import prm800k
from app.datasets.export import ExportFilter, write_export
from bench import SHARED_DATA
from tests.browser.live import ROOT, Labeler, LiveApp, SolutionSpec, labels_of, queue
from tests.browser.pages import log_in, press, status, step, task_section, task_swap

PHASE1 = SolutionSpec(
    [
        "Let $p$ be the price of a pencil and $e$ of an eraser, in cents.",
        "Then $3p + e = 1.24$ and $5p + e = 1.82$.",
        "So $p = 29$.\n\n# Answer\n\n29",
    ],
    alternatives=[
        ["Call the prices $p$ and $e$ cents."],
        ["Then $p + e = 124$.", "Then $3p = 124$."],
        ["Subtracting, $2p = 58$, so $p = 29$.\n\n# Answer\n\n29"],
    ],
    problem_text="Three pencils and an eraser cost $\\$1.24$; five pencils and an eraser cost"
    " $\\$1.82$. In cents, what does a pencil cost?",
    answer="29",
    style="phase1",
)
WRITTEN_STEP_2 = "Then $3p + e = 124$ and $5p + e = 182$."
WRITTEN_STEP_3 = "Subtracting the first from the second, $2p = 58$: $p = 29$.\n\n# Answer\n\n29"
SCREENSHOT = ROOT / "test-artifacts" / "labeling-phase1-written-step.png"


def human_box(page: Page, number: int) -> tuple[Locator, Locator, Locator]:
    """The step's box to write it in, its text box and its character count."""
    box = step(page, number).locator(".human-step")
    return box, box.locator("textarea"), box.locator(".note-count")


def test_phase1_with_written_steps_exports_as_prm800k(
    live_app: LiveApp, labeler: Labeler, page: Page
) -> None:
    [solution] = queue(live_app.engine, PHASE1)
    log_in(page, labeler)
    expect(status(page)).to_have_text("Rate candidate 1 of step 1.")

    # Step 1: the second candidate is the positive one, so the page goes on with it.
    press(page, "23")
    expect(step(page, 1).locator("li.candidate.chosen")).to_have_attribute("data-candidate", "1")
    expect(status(page)).to_have_text("Rate candidate 1 of step 2.")
    # Its own first candidate, neutral, can be chosen instead.
    step(page, 1).get_by_role("button", name="Continue with this").first.click()
    expect(step(page, 1).locator("li.candidate.chosen")).to_have_attribute("data-candidate", "0")

    # Step 2: every candidate is wrong, so the labeler writes the step.
    box, textarea, counter = human_box(page, 2)
    expect(box).to_be_hidden()
    press(page, "111")
    expect(box).to_be_visible()
    expect(textarea).to_be_focused()
    expect(status(page)).to_have_text(
        "Every candidate of step 2 is negative: write the step yourself."
    )
    expect(counter).to_have_text("0 / 5,000 characters")
    textarea.fill("x" * 5001)  # as a paste: a maxlength would cut it here, silently
    assert textarea.input_value() == "x" * 5001
    expect(counter).to_have_text("5,001 / 5,000 characters: 1 too many")
    expect(counter).to_have_class(re.compile(r"\bover\b"))
    textarea.press("Control+Enter")
    refusal = "Your step has 5,001 characters, more than the 5,000 allowed: shorten it to use it."
    expect(status(page)).to_have_text(refusal)
    assert textarea.evaluate("box => box.validationMessage") == refusal
    expect(step(page, 3)).to_be_hidden()
    textarea.fill(WRITTEN_STEP_2)
    textarea.press("Control+Enter")
    expect(step(page, 3)).to_be_visible()
    expect(box.locator(".human-preview")).to_have_class(re.compile(r"\bin-use\b"))

    # A reload keeps the written step, in its box and typeset as the step in use.
    page.reload()
    expect(status(page)).to_have_text("Rate candidate 1 of step 3.")
    expect(human_box(page, 2)[1]).to_have_value(WRITTEN_STEP_2)
    expect(human_box(page, 2)[0].locator(".human-preview .katex").first).to_be_visible()

    # Step 3: a candidate is positive, but it does not follow the written step: write it.
    press(page, "33")
    expect(status(page)).to_have_text("All steps rated. Press Enter to submit.")
    box, textarea, _ = human_box(page, 3)
    expect(box).to_be_hidden()
    step(page, 3).get_by_role("button", name=re.compile("write the step yourself", re.I)).click()
    expect(textarea).to_be_focused()
    textarea.fill(WRITTEN_STEP_3)
    textarea.press("Control+Enter")
    expect(step(page, 3).locator("li.candidate.chosen")).to_have_count(0)
    expect(status(page)).to_have_text("All steps rated. Press Enter to submit.")
    SCREENSHOT.parent.mkdir(exist_ok=True)
    page.screenshot(path=SCREENSHOT, full_page=True)
    with task_swap(page):
        page.keyboard.press("Enter")
    expect(task_section(page)).to_contain_text("Nothing to label right now")

    [label] = labels_of(live_app.engine, labeler)
    assert (label.solution_id, label.finish_reason) == (solution, "solution")
    # The labeler's history lists it (in another tab: this one's submit is read after).
    my_work = page.context.new_page()
    my_work.goto("/me")
    history = my_work.locator("#history tbody tr")
    expect(history).to_have_count(1)
    expect(history.locator("td")).to_contain_text(["Three pencils", "task", "solution", "3"])
    my_work.screenshot(path=SCREENSHOT.with_name("my-work-1280x900.png"), full_page=True)
    out = io.StringIO()
    with Session(live_app.engine) as session:
        write_export(session, out, ExportFilter(labelers=[labeler.uuid]))
    [line] = out.getvalue().splitlines()
    record: dict[str, Any] = json.loads(line)
    assert prm800k.parse_line(line).label.finish_reason == "solution"
    expect_as_prm800k_phase1(record)
    expect_keys_as_the_real_line(record)


def candidates(texts: list[str], ratings: list[int]) -> list[dict[str, object]]:
    return [
        {"text": text, "rating": rating, "flagged": False}
        for text, rating in zip(texts, ratings, strict=True)
    ]


def expect_as_prm800k_phase1(record: dict[str, Any]) -> None:
    """The record is shaped as PRM800K's phase-1 lines, written steps and all."""
    steps, alternatives = PHASE1.steps, PHASE1.alternatives or []
    assert record["generation"] is None
    assert record["question"] == {"problem": PHASE1.problem_text, "ground_truth_answer": "29"}
    label = record["label"]

    def human(text: str) -> dict[str, object]:
        return {"text": text, "rating": None, "source": "human", "flagged": False}

    assert label["steps"] == [
        {
            "completions": candidates([steps[0], *alternatives[0]], [0, 1]),
            "human_completion": None,
            "chosen_completion": 0,
        },
        {
            "completions": candidates([steps[1], *alternatives[1]], [-1, -1, -1]),
            "human_completion": human(WRITTEN_STEP_2),
            "chosen_completion": None,
        },
        {
            "completions": candidates([steps[2], *alternatives[2]], [1, 1]),
            "human_completion": human(WRITTEN_STEP_3),
            "chosen_completion": None,
        },
    ]


def expect_keys_as_the_real_line(record: dict[str, Any]) -> None:
    """Key for key, in order, as the real phase-1 line with a written step has them."""
    samples = SHARED_DATA / "prm800k_raw_samples.jsonl"
    if not samples.exists():
        pytest.skip(f"the real PRM800K lines are not at {samples}")
    real = json.loads(samples.read_text().splitlines()[0])
    real_step = real["label"]["steps"][1]
    ours = record["label"]["steps"][1]
    assert (real_step["chosen_completion"], real_step["human_completion"]["rating"]) == (None, None)
    assert list(ours) == list(real_step)
    assert list(ours["human_completion"]) == list(real_step["human_completion"])
    assert list(record) == list(real) and list(record["question"]) == list(real["question"])
