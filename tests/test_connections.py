"""Connections kept across calls: counted by the servers, as they accept them.

Over HTTP/1.1 and HTTPS on loopback (`kept_site`): sequential calls to one host share one
connection; threads never share one at once; a child process after a fork opens its own; a
connection the server closed while idle is replaced, and a request on one that it closes
as the request arrives is sent again on a new one (once, without using a retry); a redirect
to another host opens a connection of its own, and the token is never sent on it.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import build, tensor
from loopback import Site

from safetensors_header import read_checkpoint, read_header
from safetensors_header._sources import http_wire

pytestmark = pytest.mark.usefixtures("kept_site")


def _file(name: str) -> bytes:
    return build({name: tensor("F32", [2], 0, 8)}, data=bytes(8))


def test_sequential_headers_to_one_host_share_a_connection(kept_site: Site) -> None:
    kept_site.files["model.safetensors"] = _file("w")
    for _ in range(50):
        assert list(read_header(kept_site.url("model.safetensors")).tensors) == ["w"]
    assert len(kept_site.done(50)) == 50
    assert kept_site.connections <= 2, kept_site.connections
    assert len({hit.peer for hit in kept_site.hits}) == kept_site.connections


def test_checkpoints_of_four_shards_share_their_connections(kept_site: Site) -> None:
    shards = {f"model-0000{i}-of-00004.safetensors": f"layer{i}.w" for i in range(1, 5)}
    for name, tensor_name in shards.items():
        kept_site.files[name] = _file(tensor_name)
    weight_map = {tensor_name: name for name, tensor_name in shards.items()}
    index = {"metadata": {"total_size": 32}, "weight_map": weight_map}
    kept_site.files["model.safetensors.index.json"] = json.dumps(index).encode()
    for _ in range(10):
        checkpoint = read_checkpoint(kept_site.url("model.safetensors.index.json"))
        assert checkpoint.problems == ()
        assert sorted(checkpoint.tensors) == sorted(weight_map)
    assert len(kept_site.done(50)) == 50
    assert kept_site.connections <= 8, kept_site.connections


def test_threads_never_share_a_connection_at_once(kept_site: Site) -> None:
    # A file of its own for each thread: a reply read on another thread's connection
    # would be another file's header.
    for number in range(8):
        kept_site.files[f"{number}.safetensors"] = _file(f"t{number}")

    def reads(number: int) -> list[list[str]]:
        url = kept_site.url(f"{number}.safetensors")
        return [list(read_header(url).tensors) for _ in range(10)]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(reads, range(8)))
    assert results == [[[f"t{number}"]] * 10 for number in range(8)]
    hits = kept_site.done(80)
    assert len(hits) == 80
    # At most one a thread (each waits for its reply before it asks again), and kept: fewer
    # connections than requests by far.
    assert kept_site.connections <= 8, kept_site.connections
    # One request at a time on a connection: the server saw each connection's requests one
    # after another (http.server answers a connection's requests in order).
    by_peer: dict[int, int] = {}
    for hit in hits:
        by_peer[hit.peer] = by_peer.get(hit.peer, 0) + 1
    assert sum(by_peer.values()) == 80
    assert len(by_peer) == kept_site.connections


def test_a_child_after_fork_opens_its_own_connection(kept_site: Site) -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    kept_site.files["model.safetensors"] = _file("w")
    url = kept_site.url("model.safetensors")
    read_header(url)
    assert kept_site.connections == 1
    assert http_wire.CONNECTIONS.idle  # one idle connection, the parent's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (fork with threads: 3.12+)
        pid = os.fork()
    if pid == 0:  # the child: its header read on a connection of its own, else exit 1
        code = 1
        try:
            if not http_wire.CONNECTIONS.idle and list(read_header(url).tensors) == ["w"]:
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert kept_site.connections == 2
    read_header(url)  # the parent's connection, still its own and still open
    hits = kept_site.done(3)
    assert kept_site.connections == 2
    assert hits[0].peer == hits[2].peer != hits[1].peer


def test_a_connection_the_server_closed_while_idle_is_replaced(kept_site: Site) -> None:
    kept_site.files["model.safetensors"] = _file("w")
    kept_site.idle_timeout = 0.2
    read_header(kept_site.url("model.safetensors"), retries=0)
    time.sleep(0.6)  # the server has closed it meanwhile
    read_header(kept_site.url("model.safetensors"), retries=0)
    assert kept_site.connections == 2
    assert len(kept_site.done(2)) == 2


def test_a_redirect_to_another_host_opens_its_own_connection_without_the_token(
    kept_site: Site,
) -> None:
    kept_site.files["model.safetensors"] = _file("w")
    url = kept_site.url("away/model.safetensors")  # 302 to localhost: another origin
    token = {"Authorization": "Bearer secret", "X-Api-Key": "k"}
    for _ in range(5):
        assert list(read_header(url, headers=token).tensors) == ["w"]
    hits = kept_site.done(10)
    here = [hit for hit in hits if hit.host.startswith("127.0.0.1")]
    there = [hit for hit in hits if hit.host.startswith("localhost")]
    assert len(here) == len(there) == 5
    assert all(hit.authorization == "Bearer secret" for hit in here)
    assert all(hit.authorization is None and "x-api-key" not in hit.headers for hit in there)
    # One connection each origin, kept: never one shared by the two.
    assert {hit.peer for hit in here}.isdisjoint({hit.peer for hit in there})
    assert kept_site.connections == 2


def test_keep_alive_off_for_a_call_and_for_the_process(
    kept_site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept_site.files["model.safetensors"] = _file("w")
    url = kept_site.url("model.safetensors")
    for _ in range(3):
        read_header(url, keep_alive=False)
    assert kept_site.connections == 3
    assert all(hit.headers.get("connection") == "close" for hit in kept_site.done(3))
    monkeypatch.setenv(http_wire.KEEP_ALIVE_VARIABLE, "0")
    for _ in range(3):
        read_header(url)
    assert kept_site.connections == 6
    assert not http_wire.CONNECTIONS.idle
    monkeypatch.delenv(http_wire.KEEP_ALIVE_VARIABLE)
    for _ in range(3):
        read_header(url)
    assert kept_site.connections == 7


def test_idle_connections_are_bounded_per_origin(kept_site: Site) -> None:
    kept_site.files["model.safetensors"] = _file("w")
    kept_site.gather = 16  # the requests held until 16 are in flight: 16 connections at once
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda _: read_header(kept_site.url("model.safetensors")), range(16)))
    assert kept_site.connections == 16
    idle = [len(stack) for stack in http_wire.CONNECTIONS.idle.values()]
    assert idle == [http_wire.KEEP_IDLE]


# --- a server that closes a kept connection as the next request arrives -------------------


@pytest.fixture
def closing_server() -> Iterator[tuple[str, dict[str, int]]]:
    """HTTP/1.1 on loopback: each connection answers its first request and keeps the
    connection open (no ``Connection: close``), then closes it, unanswered, when the next
    request arrives (as a server does that times out an idle connection at that moment)."""
    data = _file("w")
    counts = {"connections": 0, "requests": 0, "unanswered": 0}
    lock = threading.Lock()
    listener = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        with conn:
            for number in range(2):
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    request += chunk
                with lock:
                    counts["requests"] += 1
                    counts["unanswered"] += number
                if number == 1:
                    return  # closed, the request unanswered
                head = (
                    f"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-{len(data) - 1}/"
                    f'{len(data)}\r\nContent-Length: {len(data)}\r\nETag: "v1"\r\n\r\n'
                )
                conn.sendall(head.encode() + data)

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with lock:
                counts["connections"] += 1
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/model.safetensors", counts
    listener.close()


@pytest.mark.parametrize("kept_site", ["http"], indirect=True)
def test_a_request_on_a_connection_closed_as_it_arrives_is_sent_again_once(
    closing_server: tuple[str, dict[str, int]],
) -> None:
    url, counts = closing_server
    read_header(url, retries=0)
    # The idle connection is open (the server has not closed it yet): it is used, and the
    # server closes it on the request, before any byte of a reply. Sent again on a new
    # connection, without a retry (there are none).
    read_header(url, retries=0)
    read_header(url, retries=0)
    assert counts == {"connections": 3, "requests": 5, "unanswered": 2}


# --- the Hugging Face Hub: its resolve URLs, and a CDN on another origin ------------------


@pytest.mark.parametrize("kept_site", ["http"], indirect=True)
def test_the_hub_and_its_cdn_each_keep_one_connection(loopback_hub: Site) -> None:
    hub, cdn = loopback_hub, loopback_hub.cdn
    assert cdn is not None
    hub.keep_alive = cdn.keep_alive = True
    for number in range(10):
        hub.linked[f"org/repo/resolve/main/{number}.safetensors"] = _file(f"w{number}")
    for number in range(10):
        header = read_header(f"hf://org/repo/{number}.safetensors")
        assert list(header.tensors) == [f"w{number}"]
    # Each 302 (its body read: its length says it is small) leaves its connection to the
    # Hub for the next resolve; the CDN's connection serves every signed URL.
    assert (hub.connections, cdn.connections) == (1, 1)
    assert len(hub.done(10)) == len(cdn.done(10)) == 10
