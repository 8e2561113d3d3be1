"""The Hub as it serves large files: a resolve URL that answers 302 to a CDN's signed URL,
which expires. A file asks the resolve URL again when the signature's life is over (known
from its query) or when the CDN refuses it, carries on from the same byte with its identity
pinned, and never keeps a signed URL in a pickle (tests/loopback.py's `loopback_hub`)."""

from __future__ import annotations

import hashlib
import json
import pickle
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
from helpers import build, tensor
from loopback import Site

from safetensors_header import HeaderError, RemoteError, open_file, read_checkpoint
from safetensors_header._sources import open_source
from safetensors_header._sources.http_file import HttpFile
from safetensors_header._sources.options import Clock, Options

SIZE = 48 * 1024  # the tensor's bytes: 12 parts of 4 KiB
MODEL_URL = "hf://org/repo/model.safetensors"
MODEL = "org/repo/resolve/main/model.safetensors"  # the resolve path MODEL_URL is read at


def _file(seed: int = 1, size: int = SIZE) -> bytes:
    payload = bytes((seed * 7 + i * 13) % 251 for i in range(size))
    return build({"w": tensor("U8", [size], 0, size)}, payload)


def _payload(data: bytes) -> bytes:
    return data[-SIZE:]


def _resolves(hub: Site, path: str) -> int:
    return sum(hit.path == "/" + path for hit in hub.hits)


def _refused(hub: Site) -> int:
    return sum(hit.status == 403 for hit in _cdn(hub).hits)


def _cdn(hub: Site) -> Site:
    """The loopback Hub's CDN: the site its resolve URLs redirect to."""
    assert hub.cdn is not None
    return hub.cdn


# On one thread, parts of 4 KiB (four times part_size: `planning.parts`): a read of the
# tensor is 12 requests to the CDN, in order.
ONE_BY_ONE: dict[str, Any] = {"part_size": 1024, "max_workers": 1}
PARTS = 12


def test_a_load_that_outlives_the_signature_completes(loopback_hub: Site) -> None:
    hub, cdn = loopback_hub, _cdn(loopback_hub)
    cdn.life, cdn.delay = 0.3, 0.05  # 12 parts take 0.6 s at least: twice the signature's life
    data = _file()
    path = MODEL
    hub.linked[path] = data
    file = open_file(MODEL_URL, **ONE_BY_ONE)
    got = bytes(file.read_tensor("w"))
    assert got == _payload(data)
    # 12 answers of at least 0.05 s, one after another: past the renewal time (0.27 s).
    assert _resolves(hub, path) >= 2  # the header's, and at least one more
    # Every request to the CDN had a signature of its own time, or was asked again.
    assert all(hit.status in (206, 403) for hit in cdn.hits)
    assert _resolves(hub, path) <= len(cdn.hits)


def test_a_checkpoint_load_that_outlives_the_signature_completes(loopback_hub: Site) -> None:
    """Three shards read whole on 2 threads, each request 0.03 s: the load takes longer than
    a signature lives (0.3 s), and every byte is the shards'."""
    hub, cdn = loopback_hub, _cdn(loopback_hub)
    cdn.life, cdn.delay = 0.3, 0.03
    names = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    shards = {}
    for i, name in enumerate(names):
        payload = _payload(_file(50 + i))
        shards[name] = build({f"w{i}": tensor("U8", [SIZE], 0, SIZE)}, payload)
        hub.linked[f"org/big/resolve/main/{name}"] = shards[name]
    index = {"weight_map": {f"w{i}": name for i, name in enumerate(names)}}
    hub.files["org/big/resolve/main/model.safetensors.index.json"] = json.dumps(index).encode()
    checkpoint = read_checkpoint("hf://org/big", part_size=1024, max_workers=2)
    for name, file in checkpoint.shards.items():
        assert {key: bytes(view) for key, view in file.read_tensors().items()} == {
            f"w{names.index(name)}": _payload(shards[name])
        }
    resolves = sum(_resolves(hub, f"org/big/resolve/main/{name}") for name in names)
    # The last shard's parts come after the others' (at least 12 answers of 0.03 s, on 2
    # threads: 0.36 s): past its signature's renewal time (0.27 s), however fast the machine.
    assert resolves > len(names)
    assert resolves <= len(cdn.hits)


def test_an_opaque_signature_refused_by_the_cdn_is_asked_for_again(loopback_hub: Site) -> None:
    """A query without its expiry: the CDN's 403 is what says it; the read goes on."""
    hub, cdn = loopback_hub, _cdn(loopback_hub)
    cdn.expiry_in_query = False
    data = _file(2)
    path = "datasets/org/data/resolve/main/part.safetensors"
    hub.linked[path] = data
    file = open_file("hf://datasets/org/data/part.safetensors", **ONE_BY_ONE)
    assert _resolves(hub, path) == 1
    cdn.signatures.clear()  # every signature given so far has expired
    assert bytes(file.read_tensor("w")) == _payload(data)
    assert _refused(hub) == 1
    assert _resolves(hub, path) == 2  # once again, and no more: the new one is kept
    statuses = [hit.status for hit in cdn.hits]
    assert statuses == [206, 403] + [206] * PARTS, statuses
    # The request refused was asked again for the same bytes, of the new signature.
    refused, again = cdn.hits[1], cdn.hits[2]
    assert refused.range == again.range
    assert (refused.range or "").startswith(f"bytes={file.header.data_start}-")
    assert refused.path.split("?")[0] == again.path.split("?")[0]
    assert refused.path != again.path


def test_an_expiry_known_from_the_query_asks_again_before_a_refusal(
    loopback_hub: Site,
) -> None:
    hub = loopback_hub
    assert hub.cdn is not None
    data = _file(3)
    path = MODEL
    hub.linked[path] = data
    file = open_file(MODEL_URL, **ONE_BY_ONE)
    source = file._range_file
    assert isinstance(source, HttpFile)
    assert source.final is not None
    assert "Expires=" in source.final
    first = source.final
    assert source.target() == (first, False)
    source.renew_at = time.time() - 1  # as if its life were over (less the margin)
    assert bytes(file.read_tensor("w")) == _payload(data)
    assert _resolves(hub, path) == 2
    assert _refused(hub) == 0  # asked again before the CDN had to refuse it
    assert source.target() == (source.final, False)
    assert source.final != first  # a signature of its own


def test_one_request_renews_a_signature_while_the_others_go_on(loopback_hub: Site) -> None:
    """Parts on 4 threads when the signature is about to expire: one of them asks the
    resolve URL again, the others use the signed URL they have (valid for the margin)."""
    hub, cdn = loopback_hub, _cdn(loopback_hub)
    cdn.delay = 0.02
    data = _file(8)
    path = MODEL
    hub.linked[path] = data
    file = open_file(MODEL_URL, part_size=1024, max_workers=4)
    source = file._range_file
    assert isinstance(source, HttpFile)
    source.renew_at = time.time() - 1
    assert bytes(file.read_tensor("w")) == _payload(data)
    assert _resolves(hub, path) == 2  # the header's, and one renewal
    assert _refused(hub) == 0


def test_the_renewal_time_is_the_expiry_less_a_margin() -> None:
    file = HttpFile("https://hub.example/o/r/resolve/main/f", Options())
    now = time.time()
    file.redirected(f"https://cdn.example/b?Expires={now + 3600:.0f}&Signature=s")
    assert file.renew_at is not None
    assert now + 3580 < file.renew_at < now + 3595  # 10 s before, give or take a second
    file.redirected(f"https://cdn.example/b?Expires={now + 60:.3f}&Signature=s")
    assert file.renew_at is not None
    assert now + 53.9 < file.renew_at < now + 60  # a tenth of a short life (6 s) before
    # One that seems expired as it is made: the clocks differ; the CDN's refusal decides.
    file.redirected(f"https://cdn.example/b?Expires={now - 60:.0f}&Signature=s")
    assert file.renew_at is None
    assert file.target() == (file.final, False)
    signed = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    file.redirected(f"https://cdn.example/b?X-Amz-Date={signed}&X-Amz-Expires=3600")
    assert file.renew_at is not None
    assert now + 3580 < file.renew_at < now + 3595
    file.refused("https://cdn.example/elsewhere")  # not where it sends requests: kept
    assert file.final is not None
    file.refused(file.final)
    assert file.target() == (file.url, True)


def test_a_renewal_seen_while_waiting_whose_time_has_passed_too_does_not_hang() -> None:
    """A thread waits while another renews; the new URL's renewal time has passed too by
    the time it looks again: it asks for the renewal itself. In a child process: a hang
    there holds a lock every `HttpFile` of the process shares."""
    code = textwrap.dedent("""
        import threading, time
        from safetensors_header._sources import http_file
        from safetensors_header._sources.http_file import HttpFile
        from safetensors_header._sources.options import Options

        file = HttpFile("http://127.0.0.1:9/m", Options())
        file.final, file.renew_at = "http://127.0.0.1:9/a?Expires=1", time.time() - 1
        got = []
        with http_file._RENEWAL:  # another thread is deciding: this one waits
            waiting = threading.Thread(target=lambda: got.append(file.target()))
            waiting.start()
            time.sleep(0.2)
            # That thread renewed, and its URL's renewal time has passed as well.
            file.final, file.renew_at = "http://127.0.0.1:9/b?Expires=2", time.time() - 1
        waiting.join()
        print(got, file.renew_at)
    """)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[('http://127.0.0.1:9/m',", "True)]", "None"]


def test_a_new_file_behind_the_resolve_url_is_a_change_not_a_mix(loopback_hub: Site) -> None:
    """Asked again, the resolve URL names another file (a new commit on main): its sha256
    differs from the one pinned, and no byte of it is taken."""
    hub, cdn = loopback_hub, _cdn(loopback_hub)
    path = MODEL
    hub.linked[path] = _file(4)
    file = open_file(MODEL_URL, **ONE_BY_ONE)
    hub.linked[path] = _file(5)
    cdn.signatures.clear()
    with pytest.raises(HeaderError, match="changed between two reads") as info:
        file.read_tensor("w")
    assert info.value.kind == "FileChanged"
    assert "x-linked-etag" in str(info.value)


def test_the_cdn_etag_is_not_the_identity(loopback_hub: Site) -> None:
    """The file is what the Hub names it by: a CDN that answers without an ETag, or with
    another, is the same file."""
    hub, cdn = loopback_hub, _cdn(loopback_hub)
    data = _file(6)
    hub.linked[MODEL] = data
    file = open_file(MODEL_URL, **ONE_BY_ONE)
    cdn.send_etag = False
    cdn.signatures.clear()
    assert bytes(file.read_tensor("w")) == _payload(data)
    assert all(hit.if_range is None for hit in cdn.hits)  # a signed blob does not change


def test_a_pickle_holds_the_resolve_url_never_a_signed_one(loopback_hub: Site) -> None:
    hub, cdn = loopback_hub, _cdn(loopback_hub)
    cdn.life = 0.2
    data = _file(7)
    path = MODEL
    hub.linked[path] = data
    file = open_file(MODEL_URL)
    pickled = pickle.dumps(file)
    assert b"Signature=" not in pickled
    assert b"Expires=" not in pickled
    time.sleep(0.3)  # the signature the header was read with has expired
    assert not cdn.signatures or max(cdn.signatures.values()) < time.time()
    copy = pickle.loads(pickled)
    assert copy.location == MODEL_URL
    assert bytes(copy.read_tensor("w")) == _payload(data)
    assert _refused(hub) == 0  # its first request was to the resolve URL
    assert _resolves(hub, path) == 2
    # A URL given as it is (not hf://): the pickle holds that URL, not where it led.
    url = hub.url(path)
    plain = open_source(url, Options())
    assert isinstance(plain, HttpFile)
    assert plain.read(0, 8, Clock(5)) == data[:8]
    assert plain.final is not None
    assert "Signature=" in plain.final
    again = pickle.loads(pickle.dumps(plain))
    assert again.final is None
    assert again.url == url


def test_one_resolve_a_file_while_signatures_last(loopback_hub: Site) -> None:
    """A checkpoint of 3 shards read whole, in parts on 4 threads: each shard's resolve URL
    is asked once (its header's request), every part goes to its signed URL."""
    hub, cdn = loopback_hub, _cdn(loopback_hub)
    names = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    shards = {name: _file(10 + i) for i, name in enumerate(names)}
    for name, data in shards.items():
        hub.linked[f"org/big/resolve/main/{name}"] = data
    index = {"weight_map": {f"w{i}": name for i, name in enumerate(names)}}
    hub.files["org/big/resolve/main/model.safetensors.index.json"] = json.dumps(index).encode()
    # Each shard has the tensor "w": the index names one tensor a shard, by its own name.
    for i, name in enumerate(names):
        shards[name] = build({f"w{i}": tensor("U8", [SIZE], 0, SIZE)}, _payload(shards[name]))
        hub.linked[f"org/big/resolve/main/{name}"] = shards[name]
    checkpoint = read_checkpoint("hf://org/big", part_size=1024, max_workers=4)
    assert sorted(checkpoint.shards) == names
    for file in checkpoint.shards.values():
        for name, view in file.read_tensors().items():
            assert bytes(view) == _payload(shards[names[int(name[1:])]])
    for name in names:
        assert _resolves(hub, f"org/big/resolve/main/{name}") == 1
    assert all(hit.status == 206 for hit in cdn.hits)
    assert len(cdn.hits) > 3 * 4  # a header and several parts a shard


def test_the_published_sha256_and_size(loopback_hub: Site) -> None:
    data = _file(20)
    loopback_hub.linked[MODEL] = data
    file = open_file(MODEL_URL)
    source = file._range_file
    assert isinstance(source, HttpFile)
    assert source.published_sha256 == hashlib.sha256(data).hexdigest()
    assert file.header.file_size == len(data)
    [hit] = loopback_hub.hits
    assert hit.status == 302


def test_a_size_other_than_the_linked_one_is_refused(loopback_hub: Site) -> None:
    """The CDN serving other bytes than the Hub said (X-Linked-Size) is an error."""
    cdn = _cdn(loopback_hub)
    data = _file(21)
    loopback_hub.linked[MODEL] = data
    open_file(MODEL_URL)
    blob = f"blobs/{hashlib.sha256(data).hexdigest()}"
    cdn.replace_after_first = {blob: data + b"x"}  # the CDN's next answers: other bytes
    with pytest.raises(Exception, match="X-Linked-Size") as info:
        open_file(MODEL_URL)
    assert f"{len(data) + 1:,} bytes" in str(info.value)


def _tensor_bytes(file: Any) -> bytes:
    """On a Dask worker: the tensor "w" of a `SafetensorsFile` sent to it."""
    return bytes(file.read_tensor("w"))


@pytest.mark.slow  # a worker process starts (2-4 s)
def test_a_dask_worker_reads_a_file_whose_signature_expired(loopback_hub: Site) -> None:
    distributed = pytest.importorskip("distributed")
    import logging
    import sys

    import cloudpickle

    hub, cdn = loopback_hub, _cdn(loopback_hub)
    cdn.life = 0.2
    data = _file(30)
    path = MODEL
    hub.linked[path] = data
    file = open_file(MODEL_URL)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # (the worker has no tests/)
    try:
        with (
            distributed.LocalCluster(
                n_workers=1,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                silence_logs=logging.ERROR,
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            time.sleep(0.3)  # the header's signature has expired before the task is sent
            got = client.submit(_tensor_bytes, file, pure=False).result(timeout=60)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert got == _payload(data)
    assert _resolves(hub, path) == 2  # the header's, and the worker's
    assert _refused(hub) == 0


def test_a_refusal_from_the_url_given_is_not_asked_again(site: Site) -> None:
    """Only a URL redirected to is asked for again: a 403 from the URL given is the answer."""
    data = _file(40)
    site.files["model.safetensors"] = data
    file = open_file(site.url("model.safetensors"))
    site.failures = [403]
    with pytest.raises(RemoteError, match="403 Forbidden") as info:
        file.read_tensor("w")
    assert info.value.status == 403
    assert [hit.status for hit in site.done(2)] == [206, 403]


def test_a_document_behind_a_refused_signature_is_asked_for_again(loopback_hub: Site) -> None:
    """A small whole file (an index) kept in LFS: read again after its signature expired."""
    cdn = _cdn(loopback_hub)
    index = json.dumps({"weight_map": {"w": "model.safetensors"}}).encode()
    path = "org/repo/resolve/main/model.safetensors.index.json"
    loopback_hub.linked[path] = index
    file = open_source("hf://org/repo/model.safetensors.index.json", Options())
    assert file.document(1 << 20, Clock(5)) == index
    cdn.signatures.clear()
    assert file.document(1 << 20, Clock(5)) == index
    assert [hit.status for hit in cdn.hits] == [200, 403, 200]
    assert _resolves(loopback_hub, path) == 2
