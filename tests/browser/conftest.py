"""Fixtures: one headless Chromium per session, a live server per module and backend, a
labeler and a fresh browser context per test.

The server runs on a fresh migrated database (made by the factory behind the
``database_url`` fixture) for a whole module, so that a module's last test can export
what the tests before it made. Each test has its own labeler and opens the queue to its own
solutions only (``live.queue``), so no test depends on another's leftovers.

The browser tests run on SQLite alone, but for those marked ``both_backends``: a page's
requests are the app's routes, which the HTTP tests (tests/labeling, tests/admin, tests/api)
run on both backends. Measured with coverage (BENCHMARKS.md, "The test suite's time",
session 24), the browser tests on Postgres ran no SQL of app/ that the other tests do not
run on Postgres. What the browser sees that differs by backend (the database server away,
commits that order requests, a pull's horizon) is tested on both.

Without Chromium at CHROMIUM the tests are skipped, except under CI=true, where they fail.
"""

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Response, expect, sync_playwright

from app.core.db import make_engine
from tests.browser.live import SUBMIT_PATH, Labeler, LiveApp, add_labeler, running_server
from tests.conftest import DatabaseFactory

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
TIMEOUT_MS = 10_000

expect.set_options(timeout=TIMEOUT_MS)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's hook reads the group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadgroup``), each module's tests in one process: they
    share the module's server, and a module's last test reads what the others made. And
    SQLite alone for a test not marked ``both_backends`` (tests/conftest.py drops the rest)."""
    here = Path(__file__).parent
    for item in items:
        if item.path.parent == here:
            item.add_marker(pytest.mark.xdist_group(f"browser-{item.path.stem}"))
            if item.get_closest_marker("both_backends") is None:
                item.add_marker(pytest.mark.sqlite_only)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        reason = f"Chromium not found at {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; required under CI=true")
        pytest.skip(reason)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def server_module() -> str:
    """What ``python -m`` runs to serve the app; a module may override it."""
    return "uvicorn"


@pytest.fixture(scope="module")
def server_settings() -> dict[str, str]:
    """STEPLABEL_* variables the server runs with besides the tests' own; a module may
    override it."""
    return {}


@pytest.fixture(scope="module")
def live_app(
    browser: Browser,
    database_factory: DatabaseFactory,
    server_module: str,
    server_settings: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LiveApp]:
    """The app served on a fresh database, for the module's tests."""
    database_url = database_factory.new_url()
    engine = make_engine(database_url)
    try:
        workdir = tmp_path_factory.mktemp("server")  # no .env or key file from the checkout
        with running_server(database_url, workdir, server_module, server_settings) as url:
            yield LiveApp(url=url, engine=engine)
    finally:
        engine.dispose()


@pytest.fixture
def labeler(live_app: LiveApp, request: pytest.FixtureRequest) -> Labeler:
    """An approved labeler of this test alone (password PASSWORD)."""
    return add_labeler(live_app.engine, f"{request.node.originalname}-{uuid.uuid4().hex[:6]}")


@pytest.fixture
def page(browser: Browser, live_app: LiveApp, labeler: Labeler) -> Iterator[Page]:
    """A page in a fresh browser context (no cookies, no localStorage) for the labeler.

    Every submit the server acknowledges as a new label, from any page of the context, is
    added to ``live_app.labels_made``, whatever becomes of the test.
    """
    context = browser.new_context(base_url=live_app.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    submits: list[Response] = []

    def keep_submit(response: Response) -> None:
        if response.request.method == "POST" and SUBMIT_PATH.search(response.url):
            submits.append(response)

    context.on("response", keep_submit)
    yield context.new_page()
    for response in submits:
        if response.ok and response.json()["created"]:
            payload = json.loads(response.request.post_data or "{}")
            live_app.labels_made.append((labeler.uuid, payload["finish_reason"]))
    context.close()
