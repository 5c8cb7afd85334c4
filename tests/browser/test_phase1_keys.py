"""Phase 1 by keyboard, in headless Chromium at both widths: `c` and a number continue with
another candidate of the step just rated (a number past its candidates rates nothing and
says so), `w` writes the step yourself, Enter submits after a choice (a click's too), and
`?` lists these keys. A written step shows typeset, marked as the step in use; a step with
one candidate offers no choice; the link to write a step shows once, under the step just
rated; and the status says why a step must be written.
"""

import io
import json
import re
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect
from sqlalchemy.orm import Session

from app.datasets.export import ExportFilter, write_export
from tests.browser.live import ROOT, Labeler, LiveApp, SolutionSpec, queue
from tests.browser.pages import (
    EACH_SIZE,
    log_in,
    press,
    pressed,
    status,
    step,
    task_section,
    task_swap,
)

ARTIFACTS = ROOT / "test-artifacts"
# Step 1: three candidates; step 2: two, both wrong; step 3: one.
TASK = SolutionSpec(
    [
        "Let $p$ be the price of a pencil, in cents.",
        "Then $3p = 124$.",
        "So $p = 29$.\n\n# Answer\n\n29",
    ],
    alternatives=[
        ["Call the price of a pencil $p$ cents.", "Let $e$ be the price of an eraser."],
        ["Then $5p = 124$."],
        [],
    ],
    problem_text="Three pencils and an eraser cost $\\$1.24$; five cost $\\$1.82$. In cents,"
    " what does a pencil cost?",
    answer="29",
    style="phase1",
)
WRITTEN = "Subtracting, $2p = 182 - 124 = 58$."
WRITTEN_LAST = "So $p = \\frac{58}{2} = 29$.\n\n# Answer\n\n29"


@pytest.fixture(params=EACH_SIZE)
def sized(page: Page, request: pytest.FixtureRequest) -> Page:
    width, height = request.param
    page.set_viewport_size({"width": width, "height": height})
    return page


def chosen(page: Page, number: int) -> Locator:
    """The candidate the step goes on with."""
    return step(page, number).locator("li.candidate.chosen")


def start(page: Page, live_app: LiveApp, labeler: Labeler) -> None:
    """Queue the task, log in, and wait until labeling.js has taken charge of it."""
    queue(live_app.engine, TASK)
    log_in(page, labeler)
    expect(status(page)).to_have_text("Rate candidate 1 of step 1.")


def exported_steps(live_app: LiveApp, labeler: Labeler) -> list[dict[str, Any]]:
    out = io.StringIO()
    with Session(live_app.engine) as session:
        write_export(session, out, ExportFilter(labelers=[labeler.uuid]))
    [line] = out.getvalue().splitlines()
    steps: list[dict[str, Any]] = json.loads(line)["label"]["steps"]
    return steps


def test_a_phase1_task_by_keys_alone(
    live_app: LiveApp, labeler: Labeler, sized: Page, request: pytest.FixtureRequest
) -> None:
    page = sized
    start(page, live_app, labeler)

    # Step 1: all three rated positive; the page goes on with the first, `c 3` with the third.
    press(page, "333")
    expect(chosen(page, 1)).to_have_attribute("data-candidate", "0")
    expect(status(page)).to_have_text("Rate candidate 1 of step 2.")
    page.keyboard.press("c")
    expect(status(page)).to_have_text(
        "Continue step 1 with candidate number… press 1 to 3, or Esc."
    )
    page.keyboard.press("3")
    expect(chosen(page, 1)).to_have_attribute("data-candidate", "2")
    expect(status(page)).to_have_text("Rate candidate 1 of step 2.")

    # Step 2: both wrong, so the box to write it opens, focused, and says why.
    press(page, "11")
    box = step(page, 2).locator(".human-step")
    expect(box.get_by_role("textbox")).to_be_focused()
    expect(status(page)).to_have_text(
        "Every candidate of step 2 is negative: write the step yourself."
    )
    # A wrong candidate cannot be continued with.
    page.keyboard.press("Escape")
    press(page, "c1")
    expect(status(page)).to_have_text(
        "Candidate 1 of step 2 is rated negative: continue with another, or write the step."
    )
    page.keyboard.press("w")
    expect(box.get_by_role("textbox")).to_be_focused()
    box.get_by_role("textbox").fill(WRITTEN)
    box.get_by_role("textbox").press("Control+Enter")
    # Typeset, and marked as the step in use, as a chosen candidate is.
    preview = box.locator(".human-preview")
    expect(preview).to_be_visible()
    expect(preview.locator(".katex").first).to_be_visible()
    expect(preview).to_have_class(re.compile(r"\bin-use\b"))
    expect(box.get_by_role("textbox")).to_be_hidden()
    expect(chosen(page, 2)).to_have_count(0)

    # Step 3: one candidate, nothing to choose between.
    expect(step(page, 3).get_by_role("button", name=re.compile("Continue with"))).to_have_count(0)
    page.keyboard.press("3")
    expect(status(page)).to_have_text("All steps rated. Press Enter to submit.")
    # `w` writes it instead, and `c 1` goes back to the candidate.
    page.keyboard.press("w")
    textarea = step(page, 3).get_by_role("textbox")
    expect(textarea).to_be_focused()
    textarea.fill(WRITTEN_LAST)
    textarea.press("Control+Enter")
    expect(chosen(page, 3)).to_have_count(0)
    expect(status(page)).to_have_text("All steps rated. Press Enter to submit.")
    press(page, "c1")
    expect(chosen(page, 3)).to_have_attribute("data-candidate", "0")
    press(page, "cw")  # `c` waits for a number; any other key lets it go
    expect(step(page, 3).get_by_role("textbox")).to_be_focused()
    page.keyboard.press("Escape")  # back to the keys; the box closes, a candidate is in use
    expect(step(page, 3).locator(".human-step")).to_be_hidden()
    page.screenshot(path=ARTIFACTS / f"phase1-keys-{request.node.callspec.id}.png", full_page=True)
    with task_swap(page):
        page.keyboard.press("Enter")
    expect(task_section(page)).to_contain_text("Nothing to label right now")

    steps = exported_steps(live_app, labeler)
    assert [s["chosen_completion"] for s in steps] == [2, None, 0]
    assert [s["human_completion"] and s["human_completion"]["text"] for s in steps] == [
        None,
        WRITTEN,
        None,
    ]


def test_enter_submits_after_a_click_on_a_candidate(
    live_app: LiveApp, labeler: Labeler, sized: Page
) -> None:
    page = sized
    start(page, live_app, labeler)
    press(page, "333")
    press(page, "11")
    textarea = step(page, 2).get_by_role("textbox")
    textarea.fill(WRITTEN)
    textarea.press("Control+Enter")
    press(page, "3")
    expect(status(page)).to_have_text("All steps rated. Press Enter to submit.")
    step(page, 1).get_by_role("button", name=re.compile("Continue with")).nth(1).click()
    expect(chosen(page, 1)).to_have_attribute("data-candidate", "1")
    with task_swap(page):
        page.keyboard.press("Enter")
    assert [s["chosen_completion"] for s in exported_steps(live_app, labeler)] == [1, None, 0]


def test_the_choice_is_offered_once_and_a_neutral_candidate_is_taken(
    live_app: LiveApp, labeler: Labeler, sized: Page
) -> None:
    page = sized
    start(page, live_app, labeler)
    write_own = page.locator("#task .write-own")
    press(page, "213")  # a neutral, a negative, a positive: the positive is taken
    expect(chosen(page, 1)).to_have_attribute("data-candidate", "2")
    expect(write_own.locator("visible=true")).to_have_count(1)
    expect(step(page, 1).locator(".write-own")).to_be_visible()
    press(page, "21")  # a neutral and a negative: the neutral is taken, no box opens
    expect(chosen(page, 2)).to_have_attribute("data-candidate", "0")
    expect(step(page, 2).locator(".human-step")).to_be_hidden()
    expect(status(page)).to_have_text("Rate candidate 1 of step 3.")
    # The link to write a step shows under the step just rated, not under every step.
    expect(write_own.locator("visible=true")).to_have_count(1)
    expect(step(page, 2).locator(".write-own")).to_be_visible()


def test_the_keys_list_has_the_phase1_keys(
    live_app: LiveApp, labeler: Labeler, sized: Page
) -> None:
    page = sized
    start(page, live_app, labeler)
    page.keyboard.press("?")
    keys = page.locator("#task .keys-dialog")
    expect(keys).to_be_visible()
    expect(keys.locator("dt")).to_contain_text(["c then 1 … 9", "w"])
    expect(keys).to_contain_text("continue the step just rated with candidate N")
    expect(keys).to_contain_text("write the step just rated yourself")


def test_c_and_a_number_past_the_candidates_rates_nothing_and_says_so(
    live_app: LiveApp, labeler: Labeler, page: Page
) -> None:
    """`c 3` after a step of two candidates: 3 is also the key that rates, but it chooses
    nothing and rates nothing (not the next step's candidate); the status says why."""
    start(page, live_app, labeler)
    press(page, "333")
    press(page, "32")  # step 2: a positive and a neutral; the page goes on with the first
    expect(status(page)).to_have_text("Rate candidate 1 of step 3.")
    for number in "309":
        press(page, "c" + number)
        expect(status(page)).to_have_text(
            f"Step 2 has 2 candidates, no candidate {number}: nothing was rated or chosen."
            " Press c and 1 to 2 to choose one."
        )
        expect(chosen(page, 2)).to_have_attribute("data-candidate", "0")
        expect(pressed(step(page, 3).locator("li.candidate").first)).to_have_count(0)
    # The next key is a key again: 3 rates step 3.
    page.keyboard.press("3")
    expect(status(page)).to_have_text("All steps rated. Press Enter to submit.")
    with task_swap(page):
        page.keyboard.press("Enter")
    steps = exported_steps(live_app, labeler)
    assert [s["chosen_completion"] for s in steps] == [0, 0, 0]
