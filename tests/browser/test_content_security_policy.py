"""The pages under the Content-Security-Policy, in Chromium: nothing refused, and what
inline handlers once did still works."""

import re
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect
from sqlalchemy.orm import Session

from app.models import Role
from tests.browser.conftest import TIMEOUT_MS
from tests.browser.live import Labeler, LiveApp, SolutionSpec, queue
from tests.browser.pages import log_in, settle, submit_login, wait_for_task
from tests.factories import PASSWORD, make_user

ADMIN_PAGES = [
    "/admin",
    "/admin/agreement",
    "/admin/progress",
    "/admin/throughput",
    "/admin/qc",
    "/admin/users",
    "/admin/imports",
    "/admin/prm",
    "/admin/data",
    "/guidelines",
]


def refusals(page: Page) -> list[str]:
    """The console's reports of what the policy refused, from now on."""
    refused: list[str] = []

    def keep(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            refused.append(message.text)

    page.on("console", keep)
    return refused


@pytest.fixture
def admin_page(browser: Browser, live_app: LiveApp) -> Iterator[Page]:
    name = f"admin-{uuid.uuid4().hex[:6]}"
    with Session(live_app.engine) as session:
        make_user(session, name, role=Role.ADMIN)
        session.commit()
    context = browser.new_context(base_url=live_app.url)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto("/login")
    submit_login(page, name, PASSWORD)
    expect(page).to_have_url(re.compile(r"/admin$"))
    yield page
    context.close()


def test_the_admin_pages_run_under_the_policy(admin_page: Page) -> None:
    refused = refusals(admin_page)
    for path in ADMIN_PAGES:
        response = admin_page.goto(path)
        assert response is not None and response.ok, path
        settle(admin_page)
    assert refused == []


def test_the_new_user_form_empties_itself_after_a_success(admin_page: Page) -> None:
    refused = refusals(admin_page)
    admin_page.goto("/admin/users")
    name = admin_page.get_by_label("Name", exact=True)
    name.fill(f"new-{uuid.uuid4().hex[:6]}")
    admin_page.get_by_role("button", name="Create", exact=True).click()
    expect(admin_page.locator("#result")).to_contain_text("Created labeler")
    expect(name).to_have_value("")
    assert refused == []


def test_the_labeling_page_runs_under_the_policy(
    page: Page, live_app: LiveApp, labeler: Labeler
) -> None:
    refused = refusals(page)
    queue(live_app.engine, SolutionSpec(["Add: $2+2=4$.", "So $4$.\n\n# Answer\n\n4"]))
    log_in(page, labeler)
    wait_for_task(page, 2)
    expect(page.locator("#task .katex").first).to_be_visible()
    assert refused == []
