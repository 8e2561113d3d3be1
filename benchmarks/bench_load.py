"""Every tensor of a ~1 GB checkpoint, from each source, against the usual alternatives and the
machine's limit, interleaved in one run; ratios printed with their range.

    PYTHONPATH=$PWD python benchmarks/bench_load.py                       # every part
    PYTHONPATH=$PWD python benchmarks/bench_load.py --parts local,http --rounds 7

The checkpoint: 2 shards of a Llama-like model (F16 matrices, F32 norms; about 300 tensors,
``--size`` MB in all), written by the reference (``safetensors.numpy.save_file``) with its
index, kept in ``--cache`` between runs. Every candidate's result is checked against the
reference's tensors once, before timing. Each round runs every candidate of a part once, in
an order that rotates from round to round; the tables give the median time of each and, for
each ratio, the median of the per-round ratios and their range.

Parts (``--parts``):

* ``local``: the page cache warm. Ours: ``open_file(path).read_ranges(every tensor)`` and
  ``safetensors_header.numpy.load(path, mmap=False)``; the reference's
  ``safetensors.numpy.load_file(path, backend="pread")`` and ``load_file(path)``; the floor,
  one ``readinto`` of each file into a buffer allocated (and touched) before the clock starts.
* ``http``: a real server on loopback: nginx from the system's packages when it is there, a
  threaded Python server (``os.sendfile``) otherwise (the output says which). Ours:
  ``read_checkpoint(index URL)`` then ``numpy.load(shard)`` of every shard; obstore's
  ``get_ranges`` (``HTTPStore``, the tensors' ranges); fsspec's ``cat_ranges`` (its HTTP
  filesystem); downloading each shard to a file, then ``load_file``; and the limit: 8 threads
  of ``http.client`` (kept-alive connections) each ``readinto`` a buffer allocated before the
  clock starts, 16 MiB a request.
* ``s3``: s3rver from npm (its ranged GET costs only its range) when node and npm are there,
  installed into the cache; moto's server otherwise (which reads the whole object for every
  range: then only for correctness, said in the output). Ours through s3fs
  (``read_checkpoint("s3://...", storage_options=...)``, then ``numpy.load``) and through
  obstore (an ``S3Store`` pair); obstore's ``get`` of each whole object.
* ``memory``: the peak memory of loading every tensor into memory, each source in a fresh
  process (the growth of ``VmHWM`` over the load), against the tensors' bytes.
* ``alloc`` (not in the default parts): how the data path's fresh buffers are made
  (``_sources.planning.allocate``), each way in the same rounds: the small pages it uses
  (``4 KiB``), the same with huge-page advice (``MADV_HUGEPAGE``) and the same prefaulted
  by the kernel at once (``MAP_POPULATE``). Over nginx (``read_checkpoint`` then
  ``numpy.load`` of each shard, and one range covering each shard's data) against obstore's
  ``get_ranges``, and locally (``read_ranges`` of every tensor) against the reference's
  pread loader: per load, the wall time (median and range), processor time in the process
  (user, system), minor faults and the system's huge-page faults (``thp_fault_alloc`` of
  ``/proc/vmstat``: every process's, so a quiet machine's).

Targets (issues 19 and 39): over HTTP at most 1.1x obstore and at most 1.5x the limit, the
slowest round at most 1.5x the median; from S3 at most 1.1x obstore's ``get``; locally at most
0.6x ``load_file(backend="pread")`` (the slowest round at most 1.5x the median) and,
materialised, at most 1.0x ``load_file``; peak memory at most 1.1x the data.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import http.server
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

import safetensors_header
from safetensors_header import open_file, read_checkpoint, read_header
from safetensors_header.numpy import load

INDEX = "model.safetensors.index.json"
SHARDS = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
PART = 16 << 20


# --- the checkpoint -------------------------------------------------------------------------


def make_checkpoint(folder: Path, size_mb: int) -> None:
    """A 2-shard checkpoint of about `size_mb` MB, written by the reference (kept if there)."""
    stamp = folder / f"made-{size_mb}"
    if stamp.exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    hidden, inner = 1024, 2816
    matrix = hidden * hidden * 2  # bytes of one F16 square
    per_layer = 4 * matrix + 3 * (hidden * inner * 2) + 2 * hidden * 4
    embed = 32000 * hidden * 2
    layers = max(1, (size_mb * 1_000_000 - embed) // per_layer)
    shapes: dict[str, tuple[tuple[int, ...], Any]] = {
        "model.embed_tokens.weight": ((32000, hidden), np.float16)
    }
    for layer in range(layers):
        prefix = f"model.layers.{layer}."
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            shapes[f"{prefix}self_attn.{name}.weight"] = ((hidden, hidden), np.float16)
        shapes[f"{prefix}mlp.gate_proj.weight"] = ((inner, hidden), np.float16)
        shapes[f"{prefix}mlp.up_proj.weight"] = ((inner, hidden), np.float16)
        shapes[f"{prefix}mlp.down_proj.weight"] = ((hidden, inner), np.float16)
        shapes[f"{prefix}input_layernorm.weight"] = ((hidden,), np.float32)
        shapes[f"{prefix}post_attention_layernorm.weight"] = ((hidden,), np.float32)
    shapes["model.norm.weight"] = ((hidden,), np.float32)
    names = list(shapes)
    rng = np.random.default_rng(0)
    weight_map: dict[str, str] = {}
    total = 0
    for shard, part in zip(
        SHARDS, (names[: len(names) // 2], names[len(names) // 2 :]), strict=True
    ):
        arrays = {}
        for name in part:
            shape, dtype = shapes[name]
            count = int(np.prod(shape)) * np.dtype(dtype).itemsize
            arrays[name] = np.frombuffer(rng.bytes(count), dtype=dtype).reshape(shape)
            total += count
        save_file(arrays, str(folder / shard), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, shard))
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / INDEX).write_text(json.dumps(index, indent=2))
    for path in folder.iterdir():
        path.chmod(0o644)  # a web server's worker reads them
    stamp.touch()


def reference(folder: Path) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for shard in SHARDS:
        out.update(load_file(str(folder / shard)))
    return out


def same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> bool:
    """The same names, dtypes, shapes and bytes (random bytes hold NaNs: not ==)."""
    return got.keys() == want.keys() and all(
        got[name].dtype == want[name].dtype
        and got[name].shape == want[name].shape
        and got[name].tobytes() == want[name].tobytes()
        for name in want
    )


def ready(size: int) -> memoryview:
    """A buffer allocated, and every page of it touched, before a clock starts."""
    buffer = np.empty(size, dtype=np.uint8)
    buffer.fill(0)
    return memoryview(buffer)


# --- timing ---------------------------------------------------------------------------------


def timed(candidates: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Every candidate once a round, in an order that rotates; the times of each."""
    names = list(candidates)
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            started = time.perf_counter()
            result = candidates[name]()
            times[name].append(time.perf_counter() - started)
            del result
    return times


def table(
    times: dict[str, list[float]],
    ratios: list[tuple[str, str, str]],
    unit: str = "s",
    scale: float = 1.0,
    digits: int = 3,
) -> None:
    print(f"| candidate | median {unit} | min {unit} | max {unit} | slowest / median |")
    print("|---|---:|---:|---:|---:|")
    for name, runs in times.items():
        median, least, most = (f(runs) * scale for f in (statistics.median, min, max))
        print(
            f"| {name} | {median:.{digits}f} | {least:.{digits}f} | {most:.{digits}f} "
            f"| {most / median:.2f} |"
        )
    print()
    print("| ratio | median | range | target |")
    print("|---|---:|---|---|")
    for top, bottom, target in ratios:
        per_round = [a / b for a, b in zip(times[top], times[bottom], strict=True)]
        low, high = min(per_round), max(per_round)
        print(
            f"| {top} / {bottom} | {statistics.median(per_round):.2f}x | {low:.2f}-{high:.2f} "
            f"| {target} |"
        )
    print()


# --- local ----------------------------------------------------------------------------------


def part_local(folder: Path, rounds: int, want: dict[str, np.ndarray]) -> None:
    paths = [folder / shard for shard in SHARDS]

    def ours_ranges() -> list[memoryview]:
        out = []
        for path in paths:
            file = open_file(path)
            infos = list(file.header.tensors.values())
            out += file.read_ranges([(info.start, info.nbytes) for info in infos])
        return out

    def ours_load() -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for path in paths:
            out.update(load(path, mmap=False))
        return out

    def pread() -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for path in paths:
            out.update(load_file(str(path), backend="pread"))
        return out

    def mapped() -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for path in paths:
            out.update(load_file(str(path)))
        return out

    buffers = [ready(path.stat().st_size) for path in paths]

    def floor() -> None:
        for path, buffer in zip(paths, buffers, strict=True):
            with path.open("rb", buffering=0) as file:
                done = 0
                while done < len(buffer):
                    done += file.readinto(buffer[done:]) or 0

    assert same(ours_load(), want)
    assert same(pread(), want)
    names = [name for shard in paths for name in read_header(shard).tensors]
    assert [bytes(view) for view in ours_ranges()] == [want[name].tobytes() for name in names]
    times = timed(
        {
            "read_ranges": ours_ranges,
            "numpy.load(mmap=False)": ours_load,
            'load_file(backend="pread")': pread,
            "load_file": mapped,
            "floor: readinto": floor,
        },
        rounds,
    )
    print("## local, page cache warm\n")
    table(
        times,
        [
            ("read_ranges", 'load_file(backend="pread")', "at most 0.6x"),
            ("read_ranges", "floor: readinto", "(the floor)"),
            ("numpy.load(mmap=False)", "load_file", "at most 1.0x"),
        ],
    )


# --- HTTP -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def http_server(folder: Path) -> Iterator[tuple[str, str]]:
    """The checkpoint over loopback HTTP: nginx when it is installed, else Python's."""
    port = free_port()
    nginx = shutil.which("nginx") or (
        "/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None
    )
    if nginx is not None:
        with tempfile.TemporaryDirectory() as run:
            config = Path(run) / "nginx.conf"
            config.write_text(
                textwrap.dedent(f"""
                worker_processes 2;
                pid {run}/nginx.pid;
                error_log {run}/error.log;
                daemon off;
                events {{ worker_connections 1024; }}
                http {{
                  access_log off;
                  sendfile on;
                  tcp_nopush on;
                  client_body_temp_path {run}/body;
                  proxy_temp_path {run}/proxy;
                  fastcgi_temp_path {run}/fastcgi;
                  uwsgi_temp_path {run}/uwsgi;
                  scgi_temp_path {run}/scgi;
                  server {{ listen 127.0.0.1:{port}; root {folder}; }}
                }}
                """)
            )
            process = subprocess.Popen([nginx, "-c", str(config)], stderr=subprocess.DEVNULL)
            try:
                _wait_for(port)
                yield f"http://127.0.0.1:{port}", f"nginx ({nginx})"
            finally:
                process.terminate()
                process.wait()
        return
    server = _python_server(folder, port)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}", "a threaded Python server (os.sendfile); no nginx here"
    finally:
        server.shutdown()
        server.server_close()


def _wait_for(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"no server on port {port}")


def _python_server(folder: Path, port: int) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            path = folder / self.path.lstrip("/").split("?")[0]
            size = path.stat().st_size
            first, last = 0, size - 1
            value = self.headers.get("Range", "")
            if value.startswith("bytes="):
                low, _, high = value[6:].partition("-")
                first, last = int(low), min(int(high), size - 1)
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(last - first + 1))
            self.send_header("ETag", f'"{path.stat().st_mtime_ns}"')
            self.end_headers()
            self.wfile.flush()
            with path.open("rb") as file:
                offset, left = first, last - first + 1
                while left:
                    sent = os.sendfile(self.connection.fileno(), file.fileno(), offset, left)
                    if not sent:
                        break
                    offset, left = offset + sent, left - sent

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128

    return Server(("127.0.0.1", port), Handler)


def load_every_shard(base: str) -> dict[str, np.ndarray]:
    """Every tensor of the checkpoint at `base`, with `numpy.load` of each shard."""
    checkpoint = read_checkpoint(f"{base}/{INDEX}")
    out: dict[str, np.ndarray] = {}
    for shard in checkpoint.shards.values():
        out.update(load(shard))
    return out


def every_tensor_by_obstore(store: Any, headers: dict[str, Any]) -> list[Any]:
    """Every tensor's bytes, one `get_ranges` of obstore a shard."""
    out = []
    for shard, header in headers.items():
        infos = list(header.tensors.values())
        out += store.get_ranges(shard, starts=[i.start for i in infos], ends=[i.end for i in infos])
    return out


def part_http(folder: Path, rounds: int, want: dict[str, np.ndarray]) -> None:
    import fsspec
    from obstore.store import HTTPStore

    with http_server(folder) as (base, server):
        print(f"## over loopback HTTP: {server}\n")
        headers = {shard: read_header(folder / shard) for shard in SHARDS}

        def ours() -> dict[str, np.ndarray]:
            return load_every_shard(base)

        store = HTTPStore.from_url(base, client_options={"allow_http": True})

        def obstore_ranges() -> list[Any]:
            return every_tensor_by_obstore(store, headers)

        filesystem = fsspec.filesystem("http")

        def fsspec_ranges() -> list[bytes]:
            out = []
            for shard, header in headers.items():
                infos = list(header.tensors.values())
                out += filesystem.cat_ranges(
                    [f"{base}/{shard}"] * len(infos),
                    [i.start for i in infos],
                    [i.end for i in infos],
                )
            return out

        def download() -> dict[str, np.ndarray]:
            out: dict[str, np.ndarray] = {}
            with tempfile.TemporaryDirectory() as tmp:
                for shard in SHARDS:
                    path = os.path.join(tmp, shard)
                    with (
                        urllib.request.urlopen(f"{base}/{shard}") as reply,
                        open(path, "wb") as file,
                    ):
                        shutil.copyfileobj(reply, file, 1 << 20)
                    out.update(load_file(path))
            return out

        sizes = {shard: (folder / shard).stat().st_size for shard in SHARDS}
        buffers = {shard: ready(size) for shard, size in sizes.items()}
        host, port = base.removeprefix("http://").split(":")
        local = threading.local()

        def part(job: tuple[str, int, int]) -> None:
            shard, start, stop = job
            connection = getattr(local, "connection", None)
            if connection is None:
                connection = local.connection = http.client.HTTPConnection(host, int(port))
            connection.request("GET", f"/{shard}", headers={"Range": f"bytes={start}-{stop - 1}"})
            reply = connection.getresponse()
            view = buffers[shard][start:stop]
            done = 0
            while done < len(view):
                done += reply.readinto(view[done:]) or 0
            reply.read()

        pool = ThreadPoolExecutor(8)

        def limit() -> None:
            jobs = [
                (shard, start, min(start + PART, size))
                for shard, size in sizes.items()
                for start in range(0, size, PART)
            ]
            list(pool.map(part, jobs))

        ours_result = ours()
        assert same(ours_result, want)
        del ours_result
        names = [name for header in headers.values() for name in header.tensors]
        assert [bytes(piece) for piece in obstore_ranges()] == [want[n].tobytes() for n in names]
        assert fsspec_ranges() == [want[name].tobytes() for name in names]
        times = timed(
            {
                "ours: numpy.load": ours,
                "obstore get_ranges": obstore_ranges,
                "fsspec cat_ranges": fsspec_ranges,
                "download, then load_file": download,
                "limit: 8 threads readinto": limit,
            },
            rounds,
        )
        pool.shutdown()
    table(
        times,
        [
            ("ours: numpy.load", "obstore get_ranges", "at most 1.1x"),
            ("ours: numpy.load", "limit: 8 threads readinto", "at most 1.5x"),
            ("ours: numpy.load", "fsspec cat_ranges", ""),
            ("ours: numpy.load", "download, then load_file", ""),
        ],
    )


# --- S3 -------------------------------------------------------------------------------------


@contextlib.contextmanager
def s3_server(cache: Path) -> Iterator[tuple[str, str, bool]]:
    """An S3 server on loopback: s3rver (npm) if node and npm are here, else moto's."""
    port = free_port()
    npm = shutil.which("npm")
    if npm is not None and shutil.which("node") is not None:
        tools = cache / "node"
        binary = tools / "node_modules" / ".bin" / "s3rver"
        if not binary.exists():
            tools.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [npm, "install", "--prefix", str(tools), "s3rver"],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        with tempfile.TemporaryDirectory() as data:
            process = subprocess.Popen(
                [str(binary), "-d", data, "-p", str(port), "-a", "127.0.0.1"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                _wait_for(port)
                yield f"http://127.0.0.1:{port}", "s3rver (npm)", True
            finally:
                process.terminate()
                process.wait()
        return
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(port)
        yield f"http://127.0.0.1:{port}", "moto (reads the whole object for every range)", False
    finally:
        process.terminate()
        process.wait()


S3_KEY = "S3RVER"  # s3rver's own credentials; moto takes any


def part_s3(folder: Path, cache: Path, rounds: int, want: dict[str, np.ndarray]) -> None:
    import boto3
    from obstore.store import S3Store

    with s3_server(cache) as (endpoint, server, fast):
        print(f"## from a loopback S3 server: {server}\n")
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=S3_KEY,
            aws_secret_access_key=S3_KEY,
            region_name="us-east-1",
        )
        client.create_bucket(Bucket="bench")
        for name in (*SHARDS, INDEX):
            client.upload_file(str(folder / name), "bench", name)
        options = {
            "key": S3_KEY,
            "secret": S3_KEY,
            "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
        }
        store = S3Store(
            "bench",
            endpoint=endpoint,
            access_key_id=S3_KEY,
            secret_access_key=S3_KEY,
            region="us-east-1",
            virtual_hosted_style_request=False,
            client_options={"allow_http": True},
        )

        def ours_s3fs() -> dict[str, np.ndarray]:
            checkpoint = read_checkpoint(f"s3://bench/{INDEX}", storage_options=options)
            out: dict[str, np.ndarray] = {}
            for shard in checkpoint.shards.values():
                out.update(load(shard))
            return out

        def ours_obstore() -> dict[str, np.ndarray]:
            checkpoint = read_checkpoint((store, INDEX))
            out: dict[str, np.ndarray] = {}
            for shard in checkpoint.shards.values():
                out.update(load(shard))
            return out

        def obstore_get() -> list[Any]:
            return [store.get(shard).bytes() for shard in SHARDS]

        assert same(ours_s3fs(), want)
        assert same(ours_obstore(), want)
        times = timed(
            {
                "ours: through s3fs": ours_s3fs,
                "ours: through obstore": ours_obstore,
                "obstore get": obstore_get,
            },
            rounds if fast else 1,
        )
    table(
        times,
        [
            ("ours: through s3fs", "obstore get", "at most 1.1x"),
            ("ours: through obstore", "obstore get", "at most 1.1x"),
        ],
    )


# --- peak memory ----------------------------------------------------------------------------

_CHILD = """
import io, sys, time
from safetensors_header import read_checkpoint
from safetensors_header.numpy import load

def status(field):
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

source, folder, extra = sys.argv[1], sys.argv[2], sys.argv[3]
shards = {shards!r}
if source == "local":
    sources = [folder + "/" + shard for shard in shards]
    kwargs = {{"mmap": False}}
elif source == "file object":
    sources = [open(folder + "/" + shard, "rb") for shard in shards]
    kwargs = {{}}
else:
    sources = None
    kwargs = {{}}
before = status("VmRSS")
total = 0
if sources is None:
    if source == "http":
        checkpoint = read_checkpoint(extra + "/{index}")
    elif source == "s3 through obstore":
        from obstore.store import S3Store
        store = S3Store("bench", endpoint=extra, access_key_id="{key}", secret_access_key="{key}",
                        region="us-east-1", virtual_hosted_style_request=False,
                        client_options={{"allow_http": True}})
        checkpoint = read_checkpoint((store, "{index}"))
    else:
        options = {{"key": "{key}", "secret": "{key}",
                    "client_kwargs": {{"endpoint_url": extra, "region_name": "us-east-1"}}}}
        checkpoint = read_checkpoint("s3://bench/{index}", storage_options=options)
    sources = list(checkpoint.shards.values())
arrays = {{}}
for item in sources:
    arrays.update(load(item, **kwargs))
total = sum(array.nbytes for array in arrays.values())
print(total, status("VmHWM") - before)
"""


def part_memory(folder: Path, cache: Path) -> None:
    child = _CHILD.format(shards=SHARDS, index=INDEX, key=S3_KEY)
    rows = []

    def measure(source: str, extra: str = "") -> None:
        done = subprocess.run(
            [sys.executable, "-c", child, source, str(folder), extra],
            capture_output=True,
            text=True,
            check=True,
        )
        total, peak = map(int, done.stdout.split())
        rows.append((source, total, peak))

    measure("local")
    measure("file object")
    with http_server(folder) as (base, _):
        measure("http", base)
    with s3_server(cache) as (endpoint, _, _):
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=S3_KEY,
            aws_secret_access_key=S3_KEY,
            region_name="us-east-1",
        )
        client.create_bucket(Bucket="bench")
        for name in (*SHARDS, INDEX):
            client.upload_file(str(folder / name), "bench", name)
        measure("s3 through obstore", endpoint)
        measure("s3 through s3fs", endpoint)
    print("## peak memory, every tensor in memory (a fresh process each)\n")
    print("| source | data MiB | peak growth MiB | peak / data | target |")
    print("|---|---:|---:|---:|---|")
    for source, total, peak in rows:
        print(
            f"| {source} | {total / 2**20:,.0f} | {peak / 2**20:,.0f} | {peak / total:.3f}x "
            "| at most 1.1x |"
        )
    print()


# --- how fresh buffers are made -----------------------------------------------------------


def _allocator(advice: int | None = None, flags: int = 0) -> Callable[[int], memoryview]:
    import mmap

    from safetensors_header._sources import planning

    def allocate(count: int) -> memoryview:
        if count < 1 << 21:
            return planning.allocate(count)
        memory = mmap.mmap(-1, count, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | flags)
        if advice is not None:
            memory.madvise(advice)
        return memoryview(memory)

    return allocate


def _huge_page_faults() -> int:
    with open("/proc/vmstat") as lines:
        for line in lines:
            if line.startswith("thp_fault_alloc "):
                return int(line.split()[1])
    return 0


def part_alloc(folder: Path, rounds: int) -> None:
    import mmap
    import resource

    from obstore.store import HTTPStore
    from safetensors.numpy import load_file

    from safetensors_header import _fetch
    from safetensors_header._sources import base as source_base
    from safetensors_header._sources import planning

    ways = {
        "4 KiB": planning.allocate,
        "MADV_HUGEPAGE": _allocator(advice=mmap.MADV_HUGEPAGE),
        "MAP_POPULATE": _allocator(flags=mmap.MAP_POPULATE),
    }

    def using(allocate: Callable[[int], memoryview], job: Callable[[], object]) -> Any:
        def run() -> object:
            source_base.allocate = _fetch.allocate = allocate
            try:
                return job()
            finally:
                source_base.allocate = _fetch.allocate = planning.allocate

        return run

    headers = {shard: read_header(folder / shard) for shard in SHARDS}

    def measured(candidates: dict[str, Callable[[], object]], reference: str) -> None:
        names = list(candidates)
        rows: dict[str, list[tuple[float, float, float, int, int]]] = {n: [] for n in names}
        for round_ in range(rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                before, huge = resource.getrusage(resource.RUSAGE_SELF), _huge_page_faults()
                started = time.perf_counter()
                result = candidates[name]()
                wall = time.perf_counter() - started
                after = resource.getrusage(resource.RUSAGE_SELF)
                rows[name].append(
                    (
                        wall,
                        after.ru_utime - before.ru_utime,
                        after.ru_stime - before.ru_stime,
                        after.ru_minflt - before.ru_minflt,
                        _huge_page_faults() - huge,
                    )
                )
                del result
        print(
            "| candidate | wall s, median (range) | slowest / median | user s | system s "
            f"| minor faults | huge-page faults | / {reference} (median, range) |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---|")
        for name, runs in rows.items():
            walls = [run[0] for run in runs]
            median = statistics.median(walls)
            ratios = [a[0] / b[0] for a, b in zip(runs, rows[reference], strict=True)]
            print(
                f"| {name} | {median:.3f} ({min(walls):.3f}-{max(walls):.3f}) "
                f"| {max(walls) / median:.2f} "
                f"| {statistics.median(run[1] for run in runs):.3f} "
                f"| {statistics.median(run[2] for run in runs):.3f} "
                f"| {statistics.median(run[3] for run in runs):,.0f} "
                f"| {statistics.median(run[4] for run in runs):,.0f} "
                f"| {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |"
            )
        print(f"\n(load average {os.getloadavg()[0]:.1f} at the end)\n")

    def local() -> list[memoryview]:
        out = []
        for shard in SHARDS:
            file = open_file(folder / shard)
            out += file.read_ranges([(i.start, i.nbytes) for i in file.header.tensors.values()])
        return out

    def pread() -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for shard in SHARDS:
            out.update(load_file(str(folder / shard), backend="pread"))
        return out

    print(f"## fresh buffers, locally (load average {os.getloadavg()[0]:.1f})\n")
    local_candidates: dict[str, Callable[[], object]] = {"reference pread": pread}
    for way, allocate in ways.items():
        local_candidates[f"read_ranges, {way}"] = using(allocate, local)
    measured(local_candidates, "reference pread")

    with http_server(folder) as (base, server):
        print(f"## fresh buffers, over loopback HTTP: {server}\n")
        store = HTTPStore.from_url(base, client_options={"allow_http": True})

        def obstore_ranges() -> list[Any]:
            return every_tensor_by_obstore(store, headers)

        def ours() -> dict[str, np.ndarray]:
            return load_every_shard(base)

        def one_range() -> list[memoryview]:
            out = []
            for shard, header in headers.items():
                first = min(info.start for info in header.tensors.values())
                file = open_file(f"{base}/{shard}", header=header)
                out += file.read_ranges([(first, header.data_size)])
            return out

        http_candidates: dict[str, Callable[[], object]] = {"obstore get_ranges": obstore_ranges}
        for way, allocate in ways.items():
            http_candidates[f"numpy.load, {way}"] = using(allocate, ours)
        for way in ("4 KiB", "MADV_HUGEPAGE"):
            http_candidates[f"one range a shard, {way}"] = using(ways[way], one_range)
        measured(http_candidates, "obstore get_ranges")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="local,http,s3,memory")
    parser.add_argument("--size", type=int, default=1000, help="MB of tensors (default 1000)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "safetensors_header_bench_load",
        help="where the checkpoint (and s3rver) are kept between runs",
    )
    args = parser.parse_args()
    parts = args.parts.split(",")
    folder = args.cache / f"checkpoint-{args.size}"
    make_checkpoint(folder, args.size)
    want = reference(folder)
    data = sum(array.nbytes for array in want.values())
    print(f"safetensors_header {safetensors_header.__version__} from {safetensors_header.__file__}")
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores; {len(want)} tensors, "
        f"{data / 1e6:,.0f} MB in {len(SHARDS)} shards; {args.rounds} rounds\n"
    )
    del want
    if "local" in parts:
        part_local(folder, args.rounds, reference(folder))
    if "http" in parts:
        part_http(folder, args.rounds, reference(folder))
    if "s3" in parts:
        part_s3(folder, args.cache, args.rounds, reference(folder))
    if "memory" in parts:
        part_memory(folder, args.cache)
    if "alloc" in parts:
        part_alloc(folder, args.rounds)


if __name__ == "__main__":
    main()
