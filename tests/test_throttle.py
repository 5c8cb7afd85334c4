"""Login throttling: delays that grow, never a lock that anyone can put on an account, and
counts that concurrent guesses cannot get past."""

import functools
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

from app.auth import sessions as auth
from app.auth.sessions import LoginThrottled, authenticate
from app.auth.throttle import (
    FIRST_DELAY,
    FREE_FROM_ONE_ADDRESS,
    FREE_PER_ACCOUNT,
    FREE_PER_ADDRESS,
    MAX_DELAY,
    counted_address,
    delay_after,
)
from app.auth.users import reset_password
from app.core.db import transaction
from app.main import create_app
from app.models import utc_now
from tests.factories import PASSWORD
from tests.web import add_user, csrf_from, log_in

ATTACKER = ("203.0.113.66", 50000)
OWNER = ("198.51.100.7", 50000)
GUESSES = 32


@pytest.fixture(autouse=True)
def _password_checks_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """argon2 is slow on purpose (up to a second a check on 2 busy cores), and these tests
    check the same passwords many times: each hash and password pair is checked once."""
    monkeypatch.setattr(auth, "verify_password", functools.cache(auth.verify_password))


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


def attempt(engine: Engine, at: datetime, password: str = "wrong", address: str = OWNER[0]) -> str:
    """A login attempt as alice at ``at``: "in", "wrong", or "wait" (throttled)."""
    with transaction(engine) as session:
        try:
            user = authenticate(session, "alice", password, address, at)
        except LoginThrottled:
            return "wait"
        return "in" if user else "wrong"


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


def test_many_addresses_failing_an_account_do_not_keep_its_owner_out(
    app_client: TestClient, engine: Engine
) -> None:
    add_user(engine, "alice")
    attackers = [TestClient(app_client.app, client=(f"203.0.113.{i}", 50000)) for i in range(10)]
    failures = [guess(attacker) for attacker in attackers for _ in range(5)]
    assert failures == [401] * FREE_PER_ACCOUNT
    # Her own address never failed: other addresses' failures never hold her back.
    assert try_login(app_client, PASSWORD).status_code == 303
    # An address that has failed at the account waits for the account's delay, however
    # few its own failures: many addresses get one guess each, not five.
    newcomer = TestClient(app_client.app, client=("192.0.2.99", 50000))
    assert [guess(newcomer), guess(newcomer)] == [401, 429]
    assert [guess(attacker) for attacker in attackers] == [429] * 10


def test_a_sustained_attack_never_keeps_the_owner_out(engine: Engine) -> None:
    # 50 failures from 10 addresses, then one of them retrying every 0.2 s for 100 s
    # (refused tries cost it nothing), while the owner logs in every 3 s from her address.
    add_user(engine, "alice")
    start = utc_now()
    for index in range(10):
        for _ in range(FREE_FROM_ONE_ADDRESS):
            assert attempt(engine, start, address=f"203.0.113.{index}") == "wrong"
    owners = []
    for tick in range(500):
        at = start + timedelta(seconds=tick / 5)
        assert attempt(engine, at, address="203.0.113.0") in ("wrong", "wait")
        if tick % 15 == 0:
            owners.append(attempt(engine, at, PASSWORD, address=OWNER[0]))
    assert owners == ["in"] * 34


def test_the_owners_login_keeps_the_counters_of_other_addresses(
    app_client: TestClient, engine: Engine
) -> None:
    add_user(engine, "alice")
    attacker = TestClient(app_client.app, client=ATTACKER)
    assert [guess(attacker) for _ in range(FREE_FROM_ONE_ADDRESS)] == [401] * 5
    log_in(app_client, "alice")
    assert guess(attacker) == 429


def test_the_delay_ends_by_itself(engine: Engine) -> None:
    add_user(engine, "alice")
    start = utc_now()
    assert [attempt(engine, start) for _ in range(6)] == ["wrong"] * 5 + ["wait"]
    assert attempt(engine, start + FIRST_DELAY - timedelta(seconds=1), PASSWORD) == "wait"
    assert attempt(engine, start + FIRST_DELAY) == "wrong"
    # The next wait is twice as long.
    assert attempt(engine, start + 2 * FIRST_DELAY, PASSWORD) == "wait"
    assert attempt(engine, start + 3 * FIRST_DELAY, PASSWORD) == "in"


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


def test_addresses_of_one_ipv6_network_share_their_counters(engine: Engine) -> None:
    """A host gets a whole /64 of IPv6 addresses: counted one by one, each address would be
    a new guesser. One /64 counts as one address; another network, or IPv4, does not."""
    add_user(engine, "alice")
    now = utc_now()
    network = [f"2001:db8:1:2::{index:x}" for index in range(1, FREE_FROM_ONE_ADDRESS + 2)]
    assert [attempt(engine, now, address=a) for a in network] == ["wrong"] * 5 + ["wait"]
    assert attempt(engine, now, address="2001:db8:1:3::1") == "wrong"
    assert [counted_address(a) for a in ("192.0.2.1", "::ffff:192.0.2.1", "unknown")] == [
        "192.0.2.1",
        "192.0.2.1",  # IPv4, as a dual-stack server writes it
        "unknown",
    ]
    assert counted_address("2001:DB8:1:2:aaaa::9") == "2001:db8:1:2::/64"
