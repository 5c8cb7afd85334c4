"""The seeded demo in headless Chromium: a demo labeler's second task has a planted slip, and
rating it negative shows the other ways to write the step, whose ratings the export carries.

The module's server gets the demo (``steplabel seed-demo``) on its fresh database, and the
labeler is the demo's ``alice``, logging in with the password the seed gave her.
"""

import io
import json
import re

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select
from sqlalchemy.orm import Session

from app import prm800k
from app.datasets.demo import SlippedStep, demo_problems, demo_slips
from app.datasets.demo_seed import DEMO_PROBLEMS, QUEUED_PER_PROBLEM, SeedReport, seed
from app.datasets.export import ExportFilter, write_export
from app.models import Assignment, Solution, User
from tests.browser.live import ROOT, Labeler, LiveApp, labels_of, ratings
from tests.browser.pages import (
    press,
    pressed,
    status,
    step,
    submit_login,
    task_section,
    task_swap,
)

LABELER = "alice"
SCREENSHOT = ROOT / "test-artifacts" / "labeling-demo-alternatives.png"


@pytest.fixture(scope="module")
def demo(live_app: LiveApp) -> SeedReport:
    with Session(live_app.engine) as session:
        report = seed(session)
        session.commit()
    return report


def log_in_as(page: Page, name: str, password: str) -> None:
    page.goto("/label/next")
    submit_login(page, name, password)
    expect(page).to_have_url(re.compile(r"/label/next$"))


def current_solution(page: Page, live_app: LiveApp) -> Solution:
    """The solution of the task on the page, once labeling.js has taken charge of it."""
    expect(status(page)).to_have_text(re.compile(r"^Rate step 1 of \d+\.$"))
    task_id = int(task_section(page).get_attribute("data-task-id") or 0)
    with Session(live_app.engine) as session:
        solution = session.scalars(
            select(Solution).join(Assignment).where(Assignment.id == task_id)
        ).one()
        session.expunge(solution)
    return solution


def test_a_demo_labeler_rates_the_alternatives_at_the_slip(
    live_app: LiveApp, demo: SeedReport, page: Page
) -> None:
    [password] = [password for name, _, password in demo.passwords if name == LABELER]
    slips = demo_slips(demo_problems(count=DEMO_PROBLEMS), per_problem=QUEUED_PER_PROBLEM)
    log_in_as(page, LABELER, password)

    # The first task has no slip and no alternatives: every step positive.
    first = current_solution(page, live_app)
    assert slips[tuple(first.steps or [])] is None and not any(first.alternatives or [])
    with task_swap(page):
        press(page, "3" * len(first.steps or []))
        page.keyboard.press("Enter")

    # The second has a slip, and the alternatives show once it is rated negative.
    second = current_solution(page, live_app)
    slip = slips[tuple(second.steps or [])]
    assert isinstance(slip, SlippedStep)
    number = slip.index + 1
    alternatives = step(page, number).locator(".alternatives")
    expect(alternatives).to_be_hidden()
    press(page, "3" * slip.index + "1")
    expect(alternatives).to_be_visible()
    expect(status(page)).to_have_text(f"Rate alternative 1 of step {number}.")
    expect(step(page, number + 1)).to_be_hidden()
    shown = (second.alternatives or [])[slip.index]
    items = alternatives.locator("li.alternative")
    expect(items).to_have_count(len(slip.alternatives))
    # As careful labelers do: the step without the slip positive, the other slip negative.
    keys = {1: "3", -1: "1"}
    press(page, "".join(keys[slip.alternatives[text]] for text in shown))
    expect(status(page)).to_have_text(f"Error found at step {number}. Press Enter to submit.")
    for index, text in enumerate(shown):
        rating = {1: "positive", -1: "negative"}[slip.alternatives[text]]
        expect(pressed(items.nth(index))).to_have_attribute("aria-label", rating)
    SCREENSHOT.parent.mkdir(exist_ok=True)
    page.screenshot(path=SCREENSHOT, full_page=True)
    with task_swap(page):
        page.keyboard.press("Enter")

    with Session(live_app.engine) as session:
        user = session.scalars(select(User).where(User.name == LABELER)).one()
        labeler = Labeler(id=user.id, name=user.name, uuid=user.uuid)
    [label] = [
        label for label in labels_of(live_app.engine, labeler) if label.solution_id == second.id
    ]
    assert label.finish_reason == "found_error"
    assert ratings(label)[-1] == [-1, *(slip.alternatives[text] for text in shown)]

    # The PRM800K export: the step shown first, then its alternatives, each with its rating.
    out = io.StringIO()
    with Session(live_app.engine) as session:
        write_export(session, out, ExportFilter(labelers=[labeler.uuid]))
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    [record] = [r for r in records if r["label"]["finish_reason"] == "found_error"]
    assert prm800k.Record.model_validate(record)
    assert record["label"]["steps"][slip.index] == {
        "completions": [
            {"text": (second.steps or [])[slip.index], "rating": -1, "flagged": None},
            *(
                {"text": text, "rating": slip.alternatives[text], "flagged": False}
                for text in shown
            ),
        ],
        "human_completion": None,
        "chosen_completion": None,
    }
