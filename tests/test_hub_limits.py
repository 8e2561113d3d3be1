"""Rate limits: a 429 (or a 503 with ``Retry-After``) from the Hub or its CDN is waited out,
as long as the server asks, within the call's timeout, and counted; past that, a
`RemoteError` that names the rate limit. (The loopback fixture's `sleep` records the waits
instead of making them.)"""

from __future__ import annotations

import email.utils
import time

import pytest
from helpers import build, tensor
from loopback import Site

from safetensors_header import RemoteError, open_file, read_header

SMALL = build({"w": tensor("U8", [8192], 0, 8192)}, bytes(range(256)) * 32)
PATH = "org/repo/resolve/main/model.safetensors"


@pytest.fixture
def hub(loopback_hub: Site) -> Site:
    loopback_hub.linked[PATH] = SMALL
    return loopback_hub


def _waits(site: Site) -> list[float]:
    return site.delays  # type: ignore[attr-defined, no-any-return]


def test_429_is_waited_out_as_long_as_asked_and_counted(hub: Site) -> None:
    hub.failures = [(429, {"Retry-After": "2"}), (429, {"Retry-After": "3"})]
    header = read_header("hf://org/repo/model.safetensors", retries=0)  # (not retries)
    assert list(header.tensors) == ["w"]
    assert _waits(hub) == [2.0, 3.0]
    assert [hit.status for hit in hub.hits] == [429, 429, 302]


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"Retry-After": "7"}, 7.0),
        (
            {"RateLimit": '"api";r=0;t=55', "RateLimit-Policy": '"fixed window";"api";q=500;w=300'},
            55.0,
        ),
        ({"RateLimit": '"resolvers";r=0;t=4', "Retry-After": "9"}, 9.0),
    ],
    ids=["retry-after", "ratelimit", "retry-after-first"],
)
def test_the_wait_the_server_asks_for(hub: Site, headers: dict[str, str], wait: float) -> None:
    hub.failures = [(429, headers)]
    read_header("hf://org/repo/model.safetensors", timeout=60)
    assert _waits(hub) == [wait]


def test_a_date_in_retry_after(hub: Site) -> None:
    when = email.utils.formatdate(time.time() + 5, usegmt=True)
    hub.failures = [(429, {"Retry-After": when})]
    read_header("hf://org/repo/model.safetensors")
    [wait] = _waits(hub)
    # A date has whole seconds, and the request took some time: 5 s, less up to 4 of them
    # on a busy machine (the backoff without a date would be 0.25).
    assert 1 <= wait <= 6


def test_429_without_a_wait_backs_off(hub: Site) -> None:
    hub.failures = [429, 429, 429]
    read_header("hf://org/repo/model.safetensors")
    assert _waits(hub) == [0.25, 0.5, 1.0]


def test_503_with_retry_after_is_a_rate_limit_and_without_it_a_retry(hub: Site) -> None:
    hub.failures = [(503, {"Retry-After": "4"})]
    read_header("hf://org/repo/model.safetensors", retries=0)
    assert _waits(hub) == [4.0]
    hub.failures = [503]
    with pytest.raises(RemoteError, match="503 Service Unavailable") as info:
        read_header("hf://org/repo/model.safetensors", retries=0)
    assert "1 attempt, no retries" in str(info.value)


def test_a_wait_past_the_timeout_is_not_made(hub: Site) -> None:
    hub.failures = [(429, {"Retry-After": "1"}), (429, {"Retry-After": "30"})]
    with pytest.raises(RemoteError, match="Too Many Requests") as info:
        read_header("hf://org/repo/model.safetensors", timeout=5)
    error = info.value
    assert error.status == 429
    assert "rate limit" in str(error)
    assert "waited 1 time, 1 s in all" in str(error)
    assert "asks for 30 s more, more than the call's timeout of 5 s leaves" in str(error)
    assert _waits(hub) == [1.0]  # the 30 s never slept
    assert len(hub.hits) == 2


def test_a_wait_longer_than_any_is_not_made(hub: Site) -> None:
    hub.failures = [(429, {"Retry-After": "3600"})]
    with pytest.raises(RemoteError, match="longer than the 300 s a wait may be"):
        open_file("hf://org/repo/model.safetensors", timeout=None)
    assert _waits(hub) == []


def test_waits_are_bounded_in_number(hub: Site) -> None:
    hub.failures = [(429, {"Retry-After": "0"})] * 20
    with pytest.raises(RemoteError, match="after the 8 waits a request may make"):
        read_header("hf://org/repo/model.safetensors", timeout=120)
    assert len(_waits(hub)) == 8
    assert len(hub.hits) == 9


@pytest.mark.parametrize("asked", ["0", "Thu, 01 Jan 1970 00:00:00 GMT"], ids=["0", "past"])
def test_a_wait_asked_for_is_never_shorter_than_the_backoff(hub: Site, asked: str) -> None:
    """Retry-After: 0, or a date that has passed: each wait is the backoff's (0.25 s,
    doubled each time), never a request again at once."""
    hub.failures = [(429, {"Retry-After": asked})] * 3
    header = read_header("hf://org/repo/model.safetensors", timeout=60)
    assert list(header.tensors) == ["w"]
    assert _waits(hub) == [0.25, 0.5, 1.0]
    # A wait asked for that is longer than the backoff is waited as asked.
    hub.failures = [(429, {"Retry-After": "0"}), (429, {"Retry-After": "2"})]
    _waits(hub).clear()
    read_header("hf://org/repo/model.safetensors", timeout=60)
    assert _waits(hub) == [0.25, 2.0]


def test_the_cdn_rate_limit_in_the_middle_of_a_read(hub: Site) -> None:
    file = open_file("hf://org/repo/model.safetensors", part_size=1024, max_workers=1)
    cdn = hub.cdn
    assert cdn is not None
    cdn.failures = [(429, {"Retry-After": "1"})]
    assert bytes(file.read_tensor("w")) == SMALL[-8192:]
    assert _waits(hub) == [1.0]
    assert [hit.status for hit in cdn.hits][:3] == [206, 429, 206]
    assert len(hub.hits) == 1  # a rate limit is not a refused signature
