"""The labeling page's layout in headless Chromium, at 1280x900 and at phone width 390x844:
what covers what, what scrolls, and how steps, candidates, answers and dialogs read.

Each size leaves a screenshot in test-artifacts/ to look at.
"""

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.browser.live import ROOT, Labeler, LiveApp, SolutionSpec, queue
from tests.browser.pages import log_in, press, status, step, task_swap, wait_for_task

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
ARTIFACTS = ROOT / "test-artifacts"

# A long task, as PRM800K has them: many steps, display math, the answer in the last one.
LONG = SolutionSpec(
    [
        "Let $p$ be the price of a pencil and $e$ the price of a jumbo eraser, in cents.",
        "Then $$3p + e = 124 \\quad\\text{and}\\quad 5p + e = 182.$$",
        "Subtracting the first equation from the second eliminates $e$:",
        "$$(5p + e) - (3p + e) = 182 - 124 = 58.$$",
        "So $2p = 58$.",
        "Dividing both sides by $2$, $p = 29$.",
        "Check: $3 \\cdot 29 + e = 124$ gives $e = 37$, and $5 \\cdot 29 + 37 = 182$.",
        "Both equations hold.",
        "So a pencil costs $29$ cents.\n\n# Answer\n\n29",
    ],
    problem_text=(
        "Three pencils and a jumbo eraser cost $\\$1.24$. Five pencils and a jumbo eraser cost"
        " $\\$1.82$. No prices include tax. In cents, what is the cost of a pencil?"
    ),
    answer="29",
)
# Wider than a phone: a long sum on a line of its own, and a long unbroken number.
WIDE = SolutionSpec(
    [
        "We expand: $$(a_1 + a_2 + a_3 + a_4 + a_5 + a_6 + a_7 + a_8)^2"
        " = a_1^2 + a_2^2 + a_3^2 + a_4^2 + a_5^2 + a_6^2 + a_7^2 + a_8^2 + 2\\sum_{i<j} a_i a_j$$",
        "The ratio is $\\frac{123456789012345678901234567890}{98765432109876543210987654321}$.",
        "So it is $8$.\n\n# Answer\n\n8",
    ],
    problem_text="What is $(a_1 + \\dots + a_8)^2$, in full?",
    answer="8",
)
PHASE1 = SolutionSpec(
    [
        "Let $p$ and $e$ be the prices, in cents.",
        "So a pencil costs $29$ cents.\n\n# Answer\n\n29",
    ],
    alternatives=[
        [],
        ["A pencil costs $29$ cents.", "The pencil costs 30 cents.\n\n# Answer\n\n30"],
    ],
    problem_text=LONG.problem_text,
    answer="29",
    style="phase1",
)

# A problem that fills a phone's screen by itself.
LONG_PROBLEM = SolutionSpec(
    ["We count them.", "There are $12$.\n\n# Answer\n\n12"],
    problem_text=" ".join([LONG.problem_text or ""] * 6),
    answer="12",
)

# The long task as a phase-1 one: a second candidate for every step.
PHASE1_LONG = SolutionSpec(
    LONG.steps,
    alternatives=[[f"In other words: {text}"] for text in LONG.steps],
    problem_text=LONG.problem_text,
    answer="29",
    style="phase1",
)


def footer(page: Page) -> Locator:
    return page.locator("#task .task-footer")


def expect_clear_of_the_footer(page: Page, item: Locator) -> None:
    """The item is on screen, and the sticky footer covers none of it, the outline that
    highlights it included."""
    expect(item).to_be_in_viewport()
    item_box, footer_box = item.bounding_box(), footer(page).bounding_box()
    assert item_box is not None and footer_box is not None
    outline = item.evaluate(
        "item => { const style = getComputedStyle(item); return style.outlineStyle === 'none'"
        " ? 0 : parseFloat(style.outlineWidth) + parseFloat(style.outlineOffset); }"
    )
    bottom = item_box["y"] + item_box["height"] + outline
    assert bottom <= footer_box["y"], (item_box, outline, footer_box)


def expect_no_sideways_scroll(page: Page) -> None:
    """The page is no wider than the window."""
    width, viewport = page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
    assert width <= viewport, (width, viewport)


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1280x900", "390x844"])
def test_the_footer_never_covers_the_step_being_rated(
    live_app: LiveApp, labeler: Labeler, page: Page, size: dict[str, int]
) -> None:
    page.set_viewport_size(size)
    queue(live_app.engine, LONG)
    log_in(page, labeler)
    steps = len(LONG.steps)
    wait_for_task(page, steps)

    # Each key reveals the next step; the page scrolls it into view, above the footer.
    for number in range(2, steps + 1):
        page.keyboard.press("3")
        expect(status(page)).to_have_text(f"Rate step {number} of {steps}.")
        expect_clear_of_the_footer(page, step(page, number))
    page.keyboard.press("End")
    # A function, not an expression: Playwright polls an expression with eval, which the
    # page's Content-Security-Policy refuses.
    page.wait_for_function(
        "() => innerHeight + scrollY >= document.scrollingElement.scrollHeight - 1"
    )
    expect_clear_of_the_footer(page, step(page, steps))
    expect_no_sideways_scroll(page)
    page.screenshot(path=ARTIFACTS / f"labeling-page-{size['width']}x{size['height']}.png")


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1280x900", "390x844"])
def test_the_next_task_opens_with_its_first_step_clear_of_the_footer(
    live_app: LiveApp, labeler: Labeler, page: Page, size: dict[str, int]
) -> None:
    # The next task comes in without a reload, from the top of the page: a long problem
    # must not leave its first step, highlighted, under the footer.
    page.set_viewport_size(size)
    queue(live_app.engine, LONG, LONG_PROBLEM)
    log_in(page, labeler)
    wait_for_task(page, len(LONG.steps))
    with task_swap(page):
        press(page, "1")
        page.keyboard.press("Enter")
    wait_for_task(page, len(LONG_PROBLEM.steps))
    expect_clear_of_the_footer(page, step(page, 1))
    page.screenshot(path=ARTIFACTS / f"labeling-next-task-{size['width']}x{size['height']}.png")


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1280x900", "390x844"])
def test_the_footer_never_covers_the_candidates_being_rated(
    live_app: LiveApp, labeler: Labeler, page: Page, size: dict[str, int]
) -> None:
    page.set_viewport_size(size)
    queue(live_app.engine, PHASE1_LONG)
    log_in(page, labeler)
    steps = len(PHASE1_LONG.steps)
    for number in range(1, steps + 1):
        expect(status(page)).to_have_text(f"Rate candidate 1 of step {number}.")
        current = step(page, number)
        # The candidate being rated, and the step's own Unsure button below its candidates.
        expect_clear_of_the_footer(page, current.locator("li.candidate.current"))
        expect_clear_of_the_footer(page, current.locator(":scope > .step-controls"))
        expect_no_sideways_scroll(page)
        press(page, "33")
    expect(status(page)).to_have_text("All steps rated. Press Enter to submit.")
    page.screenshot(path=ARTIFACTS / f"labeling-phase1-{size['width']}x{size['height']}.png")


def test_nothing_scrolls_sideways_at_phone_width(
    live_app: LiveApp, labeler: Labeler, page: Page
) -> None:
    page.set_viewport_size(PHONE)
    queue(live_app.engine, WIDE)
    log_in(page, labeler)
    wait_for_task(page, 3)
    press(page, "33")
    expect(status(page)).to_have_text("Rate step 3 of 3.")
    expect(step(page, 1).locator(".katex-display")).to_be_visible()
    expect_no_sideways_scroll(page)
    page.screenshot(path=ARTIFACTS / "labeling-page-390x844-wide-math.png", full_page=True)

    page.keyboard.press("?")
    expect(page.locator("#task .keys-dialog")).to_be_visible()
    expect_no_sideways_scroll(page)
    page.screenshot(path=ARTIFACTS / "labeling-keys-390x844.png")


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1280x900", "390x844"])
def test_dialogs_open_on_their_heading(
    live_app: LiveApp, labeler: Labeler, page: Page, size: dict[str, int]
) -> None:
    page.set_viewport_size(size)
    queue(live_app.engine, LONG)
    log_in(page, labeler)
    wait_for_task(page, len(LONG.steps))
    for key, name in (("?", "keys"), ("g", "reason")):
        page.keyboard.press(key)
        dialog = page.locator(f"#task .{name}-dialog")
        dialog_box = dialog.bounding_box()
        heading_box = dialog.get_by_role("heading").bounding_box()
        assert dialog_box is not None and heading_box is not None
        # No empty band above the heading: the dialog's padding, and no more.
        assert heading_box["y"] - dialog_box["y"] <= 20, (dialog_box, heading_box)
        page.screenshot(path=ARTIFACTS / f"labeling-{name}-{size['width']}x{size['height']}.png")
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()


def test_the_answer_of_a_step_shows_under_a_label(
    live_app: LiveApp, labeler: Labeler, page: Page
) -> None:
    queue(live_app.engine, LONG)
    log_in(page, labeler)
    steps = len(LONG.steps)
    wait_for_task(page, steps)
    press(page, "3" * (steps - 1))
    last = step(page, steps).locator(".step-text")
    expect(last).to_be_visible()
    expect(last).not_to_contain_text("#")
    expect(last).to_contain_text("So a pencil costs")
    expect(last.locator(".step-answer-label")).to_have_text("Answer:")
    expect(last.locator(".step-answer .katex annotation")).to_have_text("29")


def test_phase1_candidates_are_numbered_once(
    live_app: LiveApp, labeler: Labeler, page: Page
) -> None:
    queue(live_app.engine, PHASE1)
    log_in(page, labeler)
    expect(status(page)).to_have_text("Rate candidate 1 of step 1.")
    page.keyboard.press("3")
    expect(status(page)).to_have_text("Rate candidate 1 of step 2.")
    # No list marker ("1.") inside an item that shows one already ("1. 1.").
    double = page.evaluate(
        """() => [...document.querySelectorAll('#task li')].filter(item => {
            const marked = element => getComputedStyle(element).display === 'list-item'
                && getComputedStyle(element).listStyleType !== 'none';
            const outer = item.parentElement.closest('li');
            return marked(item) && outer !== null && marked(outer);
        }).length"""
    )
    assert double == 0
    candidates = step(page, 2).locator("li.candidate")
    expect(candidates.locator(".candidate-label")).to_have_text(
        ["Candidate 1 of 3", "Candidate 2 of 3", "Candidate 3 of 3"]
    )
    expect(candidates.nth(2)).not_to_contain_text("#")
    expect(candidates.nth(2).locator(".step-answer-label")).to_have_text("Answer:")
    page.screenshot(path=ARTIFACTS / "labeling-phase1-1280x900.png", full_page=True)


def test_phase1_candidates_keep_their_inner_padding(
    live_app: LiveApp, labeler: Labeler, page: Page
) -> None:
    """ ".steps li" outranked ".candidate" and took the candidates' padding away: a chosen
    candidate's outline sat on its text."""
    queue(live_app.engine, PHASE1)
    log_in(page, labeler)
    expect(status(page)).to_have_text("Rate candidate 1 of step 1.")
    padding = (
        step(page, 1)
        .locator("li.candidate")
        .first.evaluate(
            "item => ['Top', 'Right', 'Bottom', 'Left'].map("
            "side => parseFloat(getComputedStyle(item)['padding' + side]))"
        )
    )
    root = page.evaluate("parseFloat(getComputedStyle(document.documentElement).fontSize)")
    assert padding == [0.4 * root] * 4


def test_the_guidelines_put_the_reference_answer_below_the_problem(
    live_app: LiveApp, labeler: Labeler, page: Page
) -> None:
    queue(live_app.engine, LONG)
    log_in(page, labeler)
    wait_for_task(page, len(LONG.steps))
    problem = page.locator("#task .problem")
    text_box = problem.locator("> .math-text").bounding_box()
    reference_box = problem.locator(".reference").bounding_box()
    assert text_box is not None and reference_box is not None
    assert reference_box["y"] >= text_box["y"] + text_box["height"]

    page.goto("/guidelines")
    guidelines = page.locator("article.guidelines")
    expect(guidelines).to_contain_text("The reference answer, below the problem, is our current")
    expect(guidelines).not_to_contain_text("above the problem")
