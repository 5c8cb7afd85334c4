"""Login throttling: delays that grow, never a lock that anyone can put on an account, and
counts that concurrent guesses cannot get past."""

import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.auth import LoginThrottled, authenticate
from app.db import transaction
from app.main import create_app
from app.models import utc_now
from app.throttle import (
    FIRST_DELAY,
    FREE_FROM_ONE_ADDRESS,
    FREE_PER_ADDRESS,
    MAX_DELAY,
    delay_after,
)
from app.users import reset_password
from tests.factories import PASSWORD
from tests.web import add_user, csrf_from, log_in

ATTACKER = ("203.0.113.66", 50000)
OWNER = ("198.51.100.7", 50000)
GUESSES = 32


@pytest.fixture
def app_client(engine: Engine) -> Iterator[TestClient]:
    with TestClient(create_app(), client=OWNER) as client:
        yield client


def try_login(client: TestClient, password: str) -> httpx.Response:
    token = csrf_from(client.get("/login").text)
    form = {"name": "alice", "password": password, "csrf_token": token}
    return client.post("/login", data=form, follow_redirects=False)


def guess(client: TestClient, password: str = "wrong") -> int:
    return try_login(client, password).status_code


def test_the_delay_doubles_up_to_its_cap() -> None:
    free = FREE_FROM_ONE_ADDRESS
    assert delay_after(free - 1, free) is None
    assert delay_after(free, free) == FIRST_DELAY
    assert delay_after(free + 1, free) == 2 * FIRST_DELAY
    assert delay_after(free + 100, free) == MAX_DELAY


def test_failing_someones_password_does_not_lock_them_out(
    app_client: TestClient, engine: Engine
) -> None:
    add_user(engine, "alice")
    attacker = TestClient(app_client.app, client=ATTACKER)
    statuses = [guess(attacker) for _ in range(FREE_FROM_ONE_ADDRESS + 3)]
    assert statuses == [401] * FREE_FROM_ONE_ADDRESS + [429] * 3
    throttled = try_login(attacker, PASSWORD)
    waiting = re.search(r"try again in (\d+) seconds", throttled.text)
    assert waiting is not None
    # 30 seconds from the last failure, less the moments since (a loaded machine is slow).
    assert 20 <= int(waiting.group(1)) <= 30
    assert throttled.headers["Retry-After"] == waiting.group(1)
    log_in(app_client, "alice")  # from her own address, at once


def test_an_admins_password_reset_lifts_the_delay(app_client: TestClient, engine: Engine) -> None:
    add_user(engine, "alice")
    for _ in range(FREE_FROM_ONE_ADDRESS):
        assert guess(app_client) == 401
    assert guess(app_client, password=PASSWORD) == 429
    with Session(engine) as session:
        reset_password(session, "alice", "the new password")
        session.commit()
    assert guess(app_client, password="the new password") == 303


def test_a_successful_login_forgets_the_accounts_failures(
    app_client: TestClient, engine: Engine
) -> None:
    add_user(engine, "alice")
    for _ in range(FREE_FROM_ONE_ADDRESS - 1):
        assert guess(app_client) == 401
    log_in(app_client, "alice")
    app_client.cookies.clear()
    assert [guess(app_client) for _ in range(FREE_FROM_ONE_ADDRESS)] == [401] * 5


def test_the_delay_ends_by_itself(engine: Engine) -> None:
    add_user(engine, "alice")
    start = utc_now()

    def attempt(at: datetime, password: str = "wrong") -> str:
        with transaction(engine) as session:
            try:
                user = authenticate(session, "alice", password, OWNER[0], at)
            except LoginThrottled:
                return "wait"
            return "in" if user else "wrong"

    assert [attempt(start) for _ in range(6)] == ["wrong"] * 5 + ["wait"]
    assert attempt(start + FIRST_DELAY - timedelta(seconds=1), PASSWORD) == "wait"
    assert attempt(start + FIRST_DELAY) == "wrong"
    # The next wait is twice as long.
    assert attempt(start + 2 * FIRST_DELAY, PASSWORD) == "wait"
    assert attempt(start + 3 * FIRST_DELAY, PASSWORD) == "in"


def concurrent_guesses(engine: Engine, names: list[str], address: str) -> list[str]:
    """Each name guessed once, all at the same moment, from threads of their own."""
    start = threading.Barrier(len(names))
    now = utc_now()  # one clock for all, so that no delay runs out during the test

    def one_guess(name: str) -> str:
        start.wait()
        with transaction(engine) as session:
            try:
                authenticate(session, name, "wrong", address, now)
            except LoginThrottled:
                return "throttled"
            return "checked"

    with ThreadPoolExecutor(len(names)) as pool:
        return list(pool.map(one_guess, names))


def test_concurrent_guesses_at_one_account_check_no_more_than_the_limit(engine: Engine) -> None:
    add_user(engine, "alice")
    outcomes = concurrent_guesses(engine, ["alice"] * GUESSES, ATTACKER[0])
    assert outcomes.count("checked") == FREE_FROM_ONE_ADDRESS


def test_concurrent_guesses_from_one_address_check_no_more_than_its_limit(
    engine: Engine,
) -> None:
    names = [f"user{index}" for index in range(GUESSES)]
    outcomes = concurrent_guesses(engine, names, ATTACKER[0])
    assert outcomes.count("checked") == FREE_PER_ADDRESS
