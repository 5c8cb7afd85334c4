"""Labelers submitting as fast as they can against a live server, each in a thread, with
every request and its answer kept: what the outage and backup tests check afterwards."""

import random
import threading
import time
from dataclasses import dataclass, field

import httpx

from bench.labeling_client import csrf_from, label_body, parse_task
from tests.factories import PASSWORD


@dataclass(frozen=True)
class Exchange:
    """One request: what it was, when it left and came back (time.monotonic), its answer."""

    kind: str  # "next" or "submit"
    sent_at: float
    answered_at: float
    status: int
    label_id: int | None = None
    text: str = ""


@dataclass
class Labelers:
    """``names`` label through ``url`` until ``stop()``; a 503 is sent again, as the page
    does, after a short pause."""

    url: str
    names: list[str]
    exchanges: list[Exchange] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    failures: list[BaseException] = field(default_factory=list)
    _logged_in: int = 0
    _go: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        """Start labeling, once every labeler has logged in (argon2 takes its time)."""
        for number, name in enumerate(self.names):
            thread = threading.Thread(target=self._label, args=(name, number), daemon=True)
            thread.start()
            self._threads.append(thread)
        deadline = time.monotonic() + 60
        while self._logged_in < len(self.names) and not self.failures:
            assert time.monotonic() < deadline, "the labelers could not log in"
            time.sleep(0.05)
        self._go.set()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def acknowledged(self) -> set[int]:
        """The labels the server said it stored (a 200 to a submit, first or repeated)."""
        return {e.label_id for e in self.exchanges if e.kind == "submit" and e.label_id}

    def _keep(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)

    def _label(self, name: str, seed: int) -> None:
        try:
            with httpx.Client(base_url=self.url, timeout=30) as client:
                csrf = _log_in(client, name)
                with self._lock:
                    self._logged_in += 1
                self._go.wait()
                self._loop(client, csrf, random.Random(seed))
        except BaseException as error:  # the test reports it
            self.failures.append(error)

    def _loop(self, client: httpx.Client, csrf: str, rng: random.Random) -> None:
        headers = {"X-CSRF-Token": csrf}
        while not self._stop.is_set():
            sent = time.monotonic()
            answer = client.get("/label/next", headers={"HX-Request": "true"})
            self._keep(
                Exchange("next", sent, time.monotonic(), answer.status_code, text=answer.text)
            )
            task = parse_task(answer.text) if answer.status_code == 200 else None
            if task is None:
                time.sleep(0.05)  # the database is away, or the queue is empty
                continue
            body = label_body(task, rng, found_error_share=0.3)
            while not self._stop.is_set():
                sent = time.monotonic()
                answer = client.post(
                    f"/api/tasks/{task.assignment_id}/label", json=body, headers=headers
                )
                label_id = answer.json().get("label_id") if answer.status_code == 200 else None
                self._keep(Exchange("submit", sent, time.monotonic(), answer.status_code, label_id))
                if answer.status_code != 503:
                    break
                time.sleep(0.05)  # the page waits Retry-After; a test has no time to


def _log_in(client: httpx.Client, name: str) -> str:
    page = client.get("/login")
    form = {"name": name, "password": PASSWORD, "csrf_token": csrf_from(page.text)}
    response = client.post("/login", data=form)
    assert response.status_code == 303, response.text
    return csrf_from(client.get("/me").text)
