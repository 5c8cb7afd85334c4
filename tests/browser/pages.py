"""What the browser tests do on the pages and where they look: locators and key presses."""

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from tests.browser.conftest import TIMEOUT_MS
from tests.browser.live import Labeler, LiveApp
from tests.factories import PASSWORD

SIZES = {"1280x900": (1280, 900), "390x844": (390, 844)}
"""The window sizes (width, height) the pages are checked at: a desktop's and a phone's."""
EACH_SIZE = [pytest.param(size, id=name) for name, size in SIZES.items()]
"""SIZES as a test's parameters."""


def log_in(page: Page, labeler: Labeler) -> None:
    """Log in through the form, reached as a stranger from the labeling page."""
    page.goto("/label/next")
    expect(page).to_have_url(re.compile(r"/login\?next=%2Flabel%2Fnext$"))
    submit_login(page, labeler.name, PASSWORD)
    expect(page).to_have_url(re.compile(r"/label/next$"))


def submit_login(page: Page, name: str, password: str) -> None:
    """Fill in the login form the page shows and send it."""
    page.get_by_label("Name").fill(name)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


@contextmanager
def logged_in(
    browser: Browser,
    live_app: LiveApp,
    name: str,
    size: tuple[int, int],
    *,
    password: str = PASSWORD,
    start: str = "/login",
) -> Iterator[Page]:
    """A fresh browser context of ``size`` (width, height) in which ``name`` has logged in
    through the form, reached at ``start``; the page is where the login led.

    The context starts with the cookies of the user's last login on this server, if any
    (nothing else: no localStorage): where that login still stands, ``start`` leads on as
    the form would have, without the form and its password check (up to a second on a
    busy machine, and most of what a browser test's setup took); where it has ended, the
    form it leads to is filled in.
    """
    cookies = live_app.login_cookies.get(name, [])
    context = browser.new_context(
        base_url=live_app.url,
        viewport={"width": size[0], "height": size[1]},
        storage_state={"cookies": cookies, "origins": []},
    )
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = context.new_page()
        page.goto(start)
        if urlparse(page.url).path == "/login":
            submit_login(page, name, password)
            page.wait_for_url(lambda address: "/login" not in address)
            live_app.login_cookies[name] = list(context.cookies())
        yield page
    finally:
        context.close()


SETTLED = """() => document.fonts.ready.then(
  () => !document.querySelector(".htmx-request")
)"""


def settle(page: Page) -> None:
    """Wait until a page that has loaded is as a reader sees it: its fonts (KaTeX's among
    them) loaded and no htmx request in flight.

    Not Playwright's "networkidle", which waits for half a second without a request after
    every page (12 of the 25 seconds the admin pages' width check took, issue 42): the
    pages load nothing after their load event but fonts and htmx's requests."""
    page.wait_for_function(SETTLED)


def task_section(page: Page) -> Locator:
    return page.locator("#task")


def status(page: Page) -> Locator:
    return page.locator("#task .status")


def step(page: Page, number: int) -> Locator:
    """The step numbered from 1, as the page numbers them."""
    return page.locator(f"#task li.step[data-step='{number - 1}']")


def flag(container: Locator) -> Locator:
    """The step's Unsure button."""
    return container.get_by_role("button", name="unsure")


def pressed(container: Locator) -> Locator:
    """The pressed rating buttons of a step (not of its alternatives) or of an alternative."""
    return container.locator(
        ":scope > .step-controls > .rating [aria-pressed='true'],"
        ":scope > .rating [aria-pressed='true']"
    )


def wait_for_task(page: Page, steps: int) -> str:
    """Wait until labeling.js has taken charge of a fresh task; returns its id."""
    expect(status(page)).to_have_text(f"Rate step 1 of {steps}.")
    task_id = task_section(page).get_attribute("data-task-id")
    assert task_id is not None
    return task_id


def press(page: Page, keys: str) -> None:
    """Press each character as a key, in order."""
    for key in keys:
        page.keyboard.press(key)


@dataclass
class Swap:
    """The task ids before and after a submit swapped a new task section in (None: none)."""

    before: str | None
    after: str | None = None


@contextmanager
def task_swap(page: Page) -> Iterator[Swap]:
    """Wait, after the block submits, until a fresh task section has replaced this one, and
    check that it holds another task (or none): the one just submitted is done."""
    section = task_section(page)
    swap = Swap(before=section.get_attribute("data-task-id"))
    handle = section.element_handle()
    yield swap
    page.wait_for_function("section => !section.isConnected", arg=handle)
    swap.after = task_section(page).get_attribute("data-task-id")
    assert swap.after != swap.before, f"task {swap.before} came back after its submit"
