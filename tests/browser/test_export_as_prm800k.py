"""Labels made in the browser export as PRM800K writes its lines: a phase-1 and a phase-2
task labeled in Chromium, at both widths, and every field of their export compared with the
real PRM800K lines of the same phase (shared/data/prm800k_raw_samples.jsonl): the same
fields, in the same order, each of a type (and null-ness) the real lines have there.

The admin's Progress page then counts the phase-1 label where PRM800K files it: under no
generation.
"""

import io
import json
import re
import uuid
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import select
from sqlalchemy.orm import Session

from app import prm800k
from app.datasets.export import ExportFilter, write_export
from app.models import Label, Role, Solution, TaskStyle
from tests.browser.live import ROOT, Labeler, LiveApp, SolutionSpec, queue
from tests.browser.pages import (
    EACH_SIZE,
    log_in,
    logged_in,
    press,
    status,
    step,
    task_section,
    task_swap,
)
from tests.factories import make_user
from tests.prm800k_shapes import expect_as_the_real_lines

ARTIFACTS = ROOT / "test-artifacts"

PHASE1 = SolutionSpec(
    [
        "Let $p$ be the price of a pencil and $e$ of an eraser, in cents.",
        "Then $3p + e = 124$ and $5p + e = 124$.",
        "So $p = 29$.\n\n# Answer\n\n29",
    ],
    alternatives=[
        ["Call the prices $p$ and $e$ cents."],
        ["Then $p + e = 124$."],
        ["Subtracting, $2p = 58$, so $p = 29$.\n\n# Answer\n\n29"],
    ],
    problem_text="Three pencils and an eraser cost $\\$1.24$; five pencils and an eraser cost"
    " $\\$1.82$. In cents, what does a pencil cost?",
    answer="29",
    style="phase1",
)
WRITTEN_STEP = "Then $3p + e = 124$ and $5p + e = 182$."
PHASE2 = SolutionSpec(
    [
        "We need $2^{10}$.",
        "$2^5 = 32$.",
        "So $2^{10} = 32 \\cdot 32 = 1034$.\n\n# Answer\n\n1034",
    ],
    alternatives=[[], [], ["So $2^{10} = 32^2 = 1024$.\n\n# Answer\n\n1024"]],
    problem_text="What is $2^{10}$?",
    answer="1024",
    reference_solution="$2^{10} = 1024$, so the answer is $\\boxed{1024}$.",
    verifier_score=0.0123,
)


def label_phase1(page: Page) -> None:
    """Step 1: a candidate; step 2: every candidate wrong, a step written; step 3: the
    positive candidate; then submit."""
    expect(status(page)).to_have_text("Rate candidate 1 of step 1.")
    press(page, "23")
    press(page, "11")
    textarea = step(page, 2).locator(".human-step textarea")
    expect(textarea).to_be_focused()
    textarea.fill(WRITTEN_STEP)
    textarea.press("Control+Enter")
    press(page, "32")
    expect(status(page)).to_have_text("All steps rated. Press Enter to submit.")
    with task_swap(page):
        page.keyboard.press("Enter")


def label_phase2(page: Page) -> None:
    """Positive, neutral, then the slip at step 3 and its alternative; then submit."""
    expect(status(page)).to_have_text("Rate step 1 of 3.")
    press(page, "3213")
    expect(status(page)).to_have_text("Error found at step 3. Press Enter to submit.")
    with task_swap(page):
        page.keyboard.press("Enter")
    expect(task_section(page)).to_contain_text("Nothing to label right now")


def exported(live_app: LiveApp, labeler: Labeler) -> dict[int, dict[str, Any]]:
    """The labeler's labels as exported, by solution id."""
    out = io.StringIO()
    with Session(live_app.engine) as session:
        write_export(session, out, ExportFilter(labelers=[labeler.uuid]))
        solutions = session.scalars(
            select(Label.solution_id).where(Label.labeler_id == labeler.id).order_by(Label.id)
        ).all()
    lines = out.getvalue().splitlines()
    for line in lines:
        prm800k.parse_line(line)
    return {
        solution_id: json.loads(line)
        for solution_id, line in zip(solutions, lines, strict=True)
        if solution_id is not None
    }


@pytest.mark.parametrize("size", EACH_SIZE)
def test_labels_made_here_export_as_prm800k_writes_them(
    browser: Browser, live_app: LiveApp, labeler: Labeler, page: Page, size: tuple[int, int]
) -> None:
    page.set_viewport_size({"width": size[0], "height": size[1]})
    phase1, phase2 = queue(live_app.engine, PHASE1, PHASE2)
    log_in(page, labeler)
    label_phase1(page)
    label_phase2(page)

    records = exported(live_app, labeler)
    assert set(records) == {phase1, phase2}
    assert records[phase1]["generation"] is None
    expect_as_the_real_lines(records[phase1], phase1=True)
    assert records[phase1]["label"]["steps"][1]["human_completion"]["text"] == WRITTEN_STEP
    assert isinstance(records[phase2]["generation"], int)
    expect_as_the_real_lines(records[phase2], phase1=False)

    expect_progress_to_file_phase1_under_none(browser, live_app, size)


def phase_label_counts(live_app: LiveApp) -> dict[str, int]:
    """Labels of phase-1 and of phase-2 solutions in the database."""
    with Session(live_app.engine) as session:
        styles = session.scalars(
            select(Solution.style).join(Label, Label.solution_id == Solution.id)
        ).all()
    return {style.value: styles.count(style.value) for style in TaskStyle}


def expect_progress_to_file_phase1_under_none(
    browser: Browser, live_app: LiveApp, size: tuple[int, int]
) -> None:
    """The Progress page's row "none" holds the phase-1 labels; generation 0, the rest."""
    name = f"admin-{uuid.uuid4().hex[:6]}"
    with Session(live_app.engine) as session:
        make_user(session, name, role=Role.ADMIN)
        session.commit()
    with logged_in(browser, live_app, name, size, start="/admin/progress") as admin:
        expect(admin).to_have_url(re.compile(r"/admin/progress$"))
        counts = phase_label_counts(live_app)
        rows = admin.locator(".progress-table tbody tr")
        labels = 7  # the Labels column
        # On a phone each cell is named by its column too ("Generation none"): the name ends.
        none = rows.filter(has=admin.get_by_role("rowheader", name=re.compile(r"(^|\s)none$")))
        expect(none.locator(f"td:nth-of-type({labels - 1})")).to_have_text(
            str(counts[TaskStyle.PHASE1.value])
        )
        zero = rows.filter(has=admin.get_by_role("rowheader", name=re.compile(r"(^|\s)0$")))
        expect(zero.locator(f"td:nth-of-type({labels - 1})")).to_have_text(
            str(counts[TaskStyle.PHASE2.value])
        )
        admin.screenshot(path=ARTIFACTS / f"progress-phase1-{size[0]}.png", full_page=True)
