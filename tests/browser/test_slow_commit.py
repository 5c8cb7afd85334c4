"""Requests that follow each other at once, when the database takes its time to commit.

The page submits as soon as the labeler has pressed the keys, and asks for the next task as
soon as the server answers the submit. Each request must see what the one before it did,
however long a commit takes: the server commits before it answers (``DbSession`` in
app/core/db.py). On Postgres, a server that answered first would refuse the submit (no such
task yet) and serve the submitted task again as the next one.
"""

import time

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import Engine, event, exists, select
from sqlalchemy.orm import Session

from app.models import Assignment
from tests.browser.live import SUBMIT_PATH, Labeler, LiveApp, SolutionSpec, labels_of, queue
from tests.browser.pages import log_in, press, task_swap, wait_for_task
from tests.browser.slow_commit import SLOW_COMMIT_S, delay_commit

pytestmark = pytest.mark.both_backends  # commits that order the requests: each backend's own

SOLUTION = SolutionSpec(["Add $1$ and $1$.", "So it is $2$.\n\n# Answer\n\n2"], answer="2")


@pytest.fixture(scope="module")
def server_module() -> str:
    return "tests.browser.slow_commit"


def wait_for_assignment(engine: Engine, labeler: Labeler) -> None:
    """Wait until the labeler's task is committed, as a labeler slower than a test is."""
    deadline = time.monotonic() + 5 * SLOW_COMMIT_S
    query = select(exists().where(Assignment.labeler_id == labeler.id))
    while time.monotonic() < deadline:
        with Session(engine) as session:
            if session.scalar(query):
                return
        time.sleep(SLOW_COMMIT_S / 10)
    raise AssertionError("the labeler's task was never committed")


def test_submit_right_after_the_page_loads(live_app: LiveApp, labeler: Labeler, page: Page) -> None:
    queue(live_app.engine, SOLUTION)
    log_in(page, labeler)
    wait_for_task(page, 2)
    press(page, "33")
    with page.expect_response(SUBMIT_PATH) as submitted:
        page.keyboard.press("Enter")
    assert submitted.value.ok, f"the submit was refused: {submitted.value.json()}"
    expect(page.locator(".flash")).to_have_text("Saved.")


def test_next_task_after_a_submit(live_app: LiveApp, labeler: Labeler, page: Page) -> None:
    queue(live_app.engine, SOLUTION, SOLUTION)
    log_in(page, labeler)
    wait_for_task(page, 2)
    wait_for_assignment(live_app.engine, labeler)
    press(page, "33")
    with task_swap(page):
        page.keyboard.press("Enter")
    expect(page.locator(".flash")).to_have_text("Saved.")
    assert [label.finish_reason for label in labels_of(live_app.engine, labeler)] == ["solution"]


def test_only_the_server_commits_slowly() -> None:
    """Importing the module (as this one does, in every test process) adds no delay: once it
    slowed each test's labels by a second."""
    assert not event.contains(Engine, "commit", delay_commit)
