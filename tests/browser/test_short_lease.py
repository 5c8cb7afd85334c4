"""The labeling page under the shortest lease the settings allow (one minute)."""

import re

import pytest
from playwright.sync_api import Page

from tests.browser.live import Labeler, LiveApp, SolutionSpec, queue
from tests.browser.pages import log_in, task_section, wait_for_task

SOLUTION = SolutionSpec(["Add $1$ and $1$.", "So it is $2$.\n\n# Answer\n\n2"], answer="2")
HEARTBEAT_PATH = re.compile(r"/api/tasks/\d+/heartbeat$")


@pytest.fixture(scope="module")
def server_settings() -> dict[str, str]:
    return {"STEPLABEL_LEASE_MINUTES": "1"}


def test_the_heartbeat_comes_well_within_a_short_lease(
    live_app: LiveApp, labeler: Labeler, page: Page
) -> None:
    """A page open on its task beats at a third of the lease (20 s of a minute), not at a
    fixed 5 minutes, by which time a one-minute lease has long gone to another labeler."""
    queue(live_app.engine, SOLUTION)
    page.clock.install()
    log_in(page, labeler)
    wait_for_task(page, 2)
    assert task_section(page).get_attribute("data-lease-minutes") == "1"

    with page.expect_request(HEARTBEAT_PATH) as beat:
        page.clock.fast_forward("00:21")
    response = beat.value.response()
    assert response is not None and response.status == 204
