"""A pushed JSON batch is read an item at a time (app/api/push.py ``json_items``)."""

import io
import json
import random
from typing import Any

import pytest

from app.api.push import PushError, as_jsonl, json_items

CHUNKS = (1, 2, 7, 64, 1 << 20)
"""Characters read at a time: from one (every value split at every place) to the default."""


class CountingStream(io.BytesIO):
    """A body that tells how much of it was read."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.read_bytes = 0

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        self.read_bytes += len(chunk)
        return chunk


def random_document(rng: random.Random) -> Any:
    def item() -> Any:
        return rng.choice(
            [
                {"problem": "é" * rng.randint(0, 30), "steps": [str(rng.random())] * 3},
                rng.randint(-(10**9), 10**9),
                -rng.random() * 1e10,
                rng.choice([True, False, None]),
                'a\\"]},[' * rng.randint(0, 3),
                [],
            ]
        )

    items = [item() for _ in range(rng.randint(0, 8))]
    return items if rng.random() < 0.8 else item()


@pytest.mark.parametrize("chunk", CHUNKS)
def test_the_items_are_what_the_whole_document_parses_to(chunk: int) -> None:
    rng = random.Random(chunk)
    for _ in range(200):
        document = random_document(rng)
        text = json.dumps(document, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 2]))
        expected = document if isinstance(document, list) else [document]
        assert list(json_items(io.BytesIO(text.encode()), chunk)) == expected, text


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize(
    "body",
    [b"", b"[", b"[{", b"[1,]", b"[1 2]", b"[1,", b"[1] x", b'{"a": 1} {"b": 2}', b"12 3", b"tru"],
)
def test_what_does_not_parse_is_refused(chunk: int, body: bytes) -> None:
    with pytest.raises(json.JSONDecodeError):
        list(json_items(io.BytesIO(body), chunk))


def test_a_byte_order_mark_is_no_error_and_bad_utf8_is_one() -> None:
    assert list(json_items(io.BytesIO(b'\xef\xbb\xbf[{"a": 1}]'))) == [{"a": 1}]
    with pytest.raises(UnicodeDecodeError):
        list(json_items(io.BytesIO(b'["\xff"]')))


def test_the_first_item_comes_before_the_body_is_read_whole() -> None:
    line = b'{"problem": "' + b"x" * 1000 + b'"}'
    body = CountingStream(b"[" + b",".join([line] * 10_000) + b"]")  # 10 MB
    items = json_items(body, chunk_chars=1 << 16)
    assert next(items) == {"problem": "x" * 1000}
    assert body.read_bytes <= 1 << 17
    assert sum(1 for _ in items) == 9_999


def test_a_batch_becomes_one_line_per_item_and_a_bad_one_says_so() -> None:
    converted = as_jsonl(io.BytesIO(b'[{"a": "\xc3\xa9"}, 2]'), "application/json; charset=utf-8")
    assert converted.read().decode().splitlines() == ['{"a": "é"}', "2"]
    with pytest.raises(PushError, match="not a JSON document"):
        as_jsonl(io.BytesIO(b"[1,"), "application/json")
