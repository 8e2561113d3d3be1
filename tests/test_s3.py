"""Object storage for real: a moto S3 server on loopback, read through s3fs and through obstore.

moto's S3 server (``moto[s3]``, with flask) runs in this process on 127.0.0.1, behind a WSGI
middleware that logs every request it answers, so that the tests count the GETs (and HEADs) a
read costs.
Skipped only where moto's server, s3fs or obstore is not installed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

np = pytest.importorskip("numpy")
safetensors_numpy = pytest.importorskip("safetensors.numpy")
moto_server = pytest.importorskip("moto.server")
werkzeug_serving = pytest.importorskip("werkzeug.serving")

from safetensors_header import HeaderError, open_file, read_checkpoint, read_header, read_ranges  # noqa: E402
from safetensors_header.numpy import load, open_tensors  # noqa: E402

BUCKET = "models"
ONE = {
    "embed": np.arange(64 * 32, dtype=np.float32).reshape(64, 32),
    "head": np.arange(32, dtype=np.float16),
}
ONE_FILE = safetensors_numpy.save(ONE)
# A header longer than the first read (128 KiB): 2,000 tensors.
LONG = {f"layer.{i}.weight": np.full(2, i, dtype=np.int16) for i in range(2000)}
LONG_FILE = safetensors_numpy.save(LONG)
SHARDS = {
    "model-00001-of-00002.safetensors": {"a": np.ones((4, 4), np.float32)},
    "model-00002-of-00002.safetensors": {"b": np.zeros(3, np.int64), "c": np.eye(2)},
}


@dataclass
class Request:
    method: str
    path: str
    range: str | None


@dataclass
class S3:
    endpoint: str
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def gets(self, key: str) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.method == "GET" and r.path == f"/{BUCKET}/{key}"]

    def count(self, method: str) -> int:
        with self.lock:
            return sum(1 for r in self.requests if r.method == method)

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()


def boto3_client(endpoint: str) -> Any:
    """A boto3 S3 client of moto's server at `endpoint` (its fixed test credentials)."""
    boto3 = pytest.importorskip("boto3")
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    app = moto_server.DomainDispatcherApplication(moto_server.create_backend_app)
    state = S3(endpoint="")

    def counting(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        with state.lock:
            state.requests.append(
                Request(environ["REQUEST_METHOD"], environ["PATH_INFO"], environ.get("HTTP_RANGE"))
            )
        return app(environ, start_response)

    server = werkzeug_serving.make_server("127.0.0.1", 0, counting, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.endpoint = f"http://127.0.0.1:{server.server_port}"
    client = boto3_client(state.endpoint)
    client.create_bucket(Bucket=BUCKET)
    client.put_object(Bucket=BUCKET, Key="one.safetensors", Body=ONE_FILE)
    client.put_object(Bucket=BUCKET, Key="long.safetensors", Body=LONG_FILE)
    weight_map = {}
    for name, tensors in SHARDS.items():
        client.put_object(Bucket=BUCKET, Key=f"ckpt/{name}", Body=safetensors_numpy.save(tensors))
        weight_map.update(dict.fromkeys(tensors, name))
    total = sum(array.nbytes for tensors in SHARDS.values() for array in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    client.put_object(
        Bucket=BUCKET, Key="ckpt/model.safetensors.index.json", Body=json.dumps(index).encode()
    )
    try:
        yield state
    finally:
        server.shutdown()
        thread.join()


@pytest.fixture
def options(s3: S3, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """s3fs's storage_options for the loopback server (no credentials from the machine)."""
    pytest.importorskip("s3fs")
    for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    s3.clear()
    return {
        "endpoint_url": s3.endpoint,
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"region_name": "us-east-1"},
        "skip_instance_cache": True,
    }


@pytest.fixture
def store(s3: S3) -> Any:
    """An obstore S3Store for the loopback server."""
    obstore_store = pytest.importorskip("obstore.store")
    s3.clear()
    return obstore_store.S3Store(
        BUCKET,
        endpoint=s3.endpoint,
        access_key_id="testing",
        secret_access_key="testing",
        region="us-east-1",
        client_options={"allow_http": True},
    )


# --- s3fs ---------------------------------------------------------------------------------------


def test_s3fs_header_is_one_ranged_get(s3: S3, options: dict[str, Any]) -> None:
    assert read_header(f"s3://{BUCKET}/one.safetensors", storage_options=options) == read_header(
        ONE_FILE
    )
    [get] = s3.gets("one.safetensors")
    # A URL signed by s3fs, read with the HTTP client: the size comes with the reply.
    assert get.range == "bytes=0-131071"
    assert s3.count("HEAD") == 0


def test_s3fs_long_header_asks_for_exactly_the_remainder(s3: S3, options: dict[str, Any]) -> None:
    header = read_header(f"s3://{BUCKET}/long.safetensors", storage_options=options)
    assert header == read_header(LONG_FILE)
    first, second = s3.gets("long.safetensors")
    assert first.range == "bytes=0-131071"
    assert second.range == f"bytes=131072-{header.data_start - 1}"


def test_s3fs_checkpoint(s3: S3, options: dict[str, Any]) -> None:
    checkpoint = read_checkpoint(
        f"s3://{BUCKET}/ckpt/model.safetensors.index.json", storage_options=options
    )
    assert list(checkpoint.files) == list(SHARDS)
    assert sorted(checkpoint.tensors) == ["a", "b", "c"]
    assert checkpoint.problems == ()
    for name in SHARDS:
        assert len(s3.gets(f"ckpt/{name}")) == 1  # each shard's header: one GET
    assert len(s3.gets("ckpt/model.safetensors.index.json")) == 1


def test_an_index_through_s3fs_takes_its_size_in_memory_not_its_limit(
    s3: S3, options: dict[str, Any]
) -> None:
    import tracemalloc

    url = f"s3://{BUCKET}/ckpt/model.safetensors.index.json"
    options = {**options, "skip_instance_cache": False}  # the filesystem made once, here:
    read_checkpoint(url, storage_options=options)  # s3fs's own set-up is not measured
    tracemalloc.start()
    try:
        read_checkpoint(url, storage_options=options)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The index is a few hundred bytes, its limit (max_index_size) 10^8: a buffer of the
    # limit made ready for it took 112 MB at the peak. The server runs in this process, and
    # what it allocates counts too (about 10 MB).
    assert peak < 50_000_000, f"{peak:,} bytes at the peak"


def test_s3fs_ranges_and_numpy(s3: S3, options: dict[str, Any]) -> None:
    url = f"s3://{BUCKET}/one.safetensors"
    header = read_header(ONE_FILE)
    embed, head = header.tensors["embed"], header.tensors["head"]
    ranges = [(embed.start, 128), (head.start, head.nbytes)]
    want = [ONE_FILE[o : o + n] for o, n in ranges]
    assert read_ranges(url, ranges, storage_options=options) == want
    assert len(s3.gets("one.safetensors")) == 1  # less than the default gap apart: one GET
    s3.clear()
    assert read_ranges(url, ranges, gap=0, storage_options=options) == want
    assert sorted(get.range or "" for get in s3.gets("one.safetensors")) == sorted(
        f"bytes={o}-{o + n - 1}" for o, n in ranges
    )
    s3.clear()
    arrays = load(url, names=["head"], storage_options=options)
    assert np.array_equal(arrays["head"], ONE["head"])
    assert len(s3.gets("one.safetensors")) == 2  # the header, then the tensor
    rows = open_tensors(url, storage_options=options)["embed"][10:12]
    assert np.array_equal(rows, ONE["embed"][10:12])


@pytest.mark.parametrize("through", ["s3fs", "obstore"])
def test_an_object_overwritten_after_its_header_raises(
    s3: S3, options: dict[str, Any], store: Any, through: str
) -> None:
    client = boto3_client(s3.endpoint)
    client.put_object(Bucket=BUCKET, Key="changing.safetensors", Body=ONE_FILE)
    if through == "s3fs":
        file = open_file(f"s3://{BUCKET}/changing.safetensors", storage_options=options)
    else:
        file = open_file((store, "changing.safetensors"))
    changed = ONE_FILE[: file.header.data_start] + bytes(len(ONE_FILE) - file.header.data_start)
    client.put_object(Bucket=BUCKET, Key="changing.safetensors", Body=changed)
    with pytest.raises(HeaderError, match="changed between two reads"):
        file.read_tensor("embed")
    with pytest.raises(HeaderError, match="changed between two reads"):
        load(file)


# --- obstore ------------------------------------------------------------------------------------


def test_obstore_header_is_one_get_and_no_head(s3: S3, store: Any) -> None:
    assert read_header((store, "one.safetensors")) == read_header(ONE_FILE)
    [get] = s3.gets("one.safetensors")
    assert get.range == "bytes=0-131071"
    assert s3.count("HEAD") == 0  # the size comes with the ranged GET


def test_obstore_long_header(s3: S3, store: Any) -> None:
    header = read_header((store, "long.safetensors"))
    assert header == read_header(LONG_FILE)
    first, second = s3.gets("long.safetensors")
    assert first.range == "bytes=0-131071"
    assert second.range == f"bytes=131072-{header.data_start - 1}"


def test_obstore_checkpoint_ranges_and_numpy(s3: S3, store: Any) -> None:
    checkpoint = read_checkpoint((store, "ckpt/model.safetensors.index.json"))
    assert sorted(checkpoint.tensors) == ["a", "b", "c"]
    assert all(len(s3.gets(f"ckpt/{name}")) == 1 for name in SHARDS)
    s3.clear()
    header = read_header(ONE_FILE)
    embed = header.tensors["embed"]
    ranges = embed.byte_ranges(np.s_[:, 0])  # 64 runs of 4 bytes, 128 bytes apart
    pieces = read_ranges((store, "one.safetensors"), ranges)
    assert b"".join(pieces) == np.ascontiguousarray(ONE["embed"][:, 0]).tobytes()
    assert len(s3.gets("one.safetensors")) <= 2  # the first range, then the rest coalesced
    arrays = load((store, "one.safetensors"))
    for name, array in ONE.items():
        assert np.array_equal(arrays[name], array)
    tensors = open_tensors((store, "one.safetensors"))
    assert np.array_equal(tensors["embed"][5], ONE["embed"][5])


def test_missing_object_is_file_not_found(store: Any, options: dict[str, Any]) -> None:
    with pytest.raises(FileNotFoundError):
        read_header((store, "nope.safetensors"))
    with pytest.raises(FileNotFoundError):
        read_header(f"s3://{BUCKET}/nope.safetensors", storage_options=options)


def test_s3fs_empty_objects_and_ranges_past_the_end(s3: S3, options: dict[str, Any]) -> None:
    # s3fs refuses a range that starts at the end (EINVAL) where other filesystems give b"":
    # the verdicts are the same as from every other source.
    client = boto3_client(s3.endpoint)
    client.put_object(Bucket=BUCKET, Key="empty.safetensors", Body=b"")
    client.put_object(Bucket=BUCKET, Key="empty/model.safetensors.index.json", Body=b"")
    with pytest.raises(HeaderError) as info:
        read_header(f"s3://{BUCKET}/empty.safetensors", storage_options=options)
    assert info.value.kind == "HeaderTooSmall"
    with pytest.raises(HeaderError) as info:
        read_checkpoint(
            f"s3://{BUCKET}/empty/model.safetensors.index.json", storage_options=options
        )
    assert info.value.kind == "InvalidIndex"
    url = f"s3://{BUCKET}/one.safetensors"
    with pytest.raises(HeaderError, match=f"the file is {len(ONE_FILE):,} bytes") as info:
        read_ranges(url, [(0, 8), (len(ONE_FILE) + 10, 8)], gap=0, storage_options=options)
    assert info.value.kind == "MetadataIncompleteBuffer"
    assert read_ranges(url, [(len(ONE_FILE) - 4, 4)], storage_options=options) == [ONE_FILE[-4:]]


def test_the_virtualizarr_parser_on_s3_urls(s3: S3, store: Any) -> None:
    pytest.importorskip("virtualizarr")
    from obspec_utils.registry import ObjectStoreRegistry
    from virtualizarr import open_virtual_dataset

    from safetensors_header.virtualizarr import SafetensorsParser
    from safetensors_header.zarr import node_name

    registry = ObjectStoreRegistry({f"s3://{BUCKET}": store})
    index = f"s3://{BUCKET}/ckpt/model.safetensors.index.json"
    virtual = open_virtual_dataset(index, registry=registry, parser=SafetensorsParser())
    assert sorted(virtual.data_vars) == ["a", "b", "c"]
    assert all(len(s3.gets(f"ckpt/{name}")) == 1 for name in SHARDS)  # a header: one GET
    assert s3.count("HEAD") == 0
    loaded = open_virtual_dataset(
        index, registry=registry, parser=SafetensorsParser(), loadable_variables=["a", "b", "c"]
    )
    for tensors in SHARDS.values():
        for name, array in tensors.items():
            assert np.array_equal(loaded[node_name(name)].values, array)
    url = f"s3://{BUCKET}/one.safetensors"
    chunked = SafetensorsParser(chunks=1024)  # 8 rows of 128 bytes a chunk
    one = open_virtual_dataset(url, registry=registry, parser=chunked)
    assert one["embed"].data.manifest.shape_chunk_grid == (8, 1)
    one = open_virtual_dataset(url, registry=registry, parser=chunked, loadable_variables=["embed"])
    assert np.array_equal(one["embed"].values, ONE["embed"])


def test_a_pickle_of_an_s3fs_file_holds_no_signed_url_and_is_held_to_its_identity(
    s3: S3, options: dict[str, Any]
) -> None:
    """s3fs signs URLs: the file is read through one, but a pickle of it holds neither the
    URL nor its signature or credential id. Unpickled, it signs afresh, and its reads are
    held to the identity pinned before (an object replaced meanwhile is FileChanged)."""
    import pickle

    client = boto3_client(s3.endpoint)
    client.put_object(Bucket=BUCKET, Key="pickled.safetensors", Body=ONE_FILE)
    file = open_file(f"s3://{BUCKET}/pickled.safetensors", storage_options=options)
    first = bytes(file.read_tensor("embed"))
    signed = file._range_file._signed  # type: ignore[attr-defined]
    assert signed is not None
    assert "Signature" in signed.url  # read through a signed URL
    data = pickle.dumps(file)
    # (the filesystem is pickled as fsspec pickles it, with the options it was made with)
    for secret in (b"Signature", b"AWSAccessKeyId", b"X-Amz-Credential", signed.url.encode()):
        assert secret not in data
    again = pickle.loads(data)
    assert bytes(again.read_tensor("embed")) == first  # signed afresh, the same object
    assert again._range_file._signed is not None
    assert pickle.loads(data).header == file.header
    changed = ONE_FILE[: file.header.data_start] + bytes(len(ONE_FILE) - file.header.data_start)
    client.put_object(Bucket=BUCKET, Key="pickled.safetensors", Body=changed)
    with pytest.raises(HeaderError, match="changed between two reads") as caught:
        pickle.loads(data).read_tensor("embed")
    assert caught.value.kind == "FileChanged"
