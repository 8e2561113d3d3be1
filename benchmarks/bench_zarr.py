"""Virtual Zarr: what one row of a large tensor costs with and without chunks; many files.

    PYTHONPATH=$PWD python benchmarks/bench_zarr.py [--rows 32768] [--cols 2048]
        [--files 1000] [--threads 8] [--repeat 3]

Needs zarr, fsspec with aiohttp, VirtualiZarr, obstore and dask.distributed
(``pip install '.[zarr,fsspec,virtualizarr,dask]' aiohttp``).

**One row.** A file of one BF16 tensor of ``rows x cols`` (128 MiB by default) is served by a
loopback HTTP server (127.0.0.1, Range requests, HEAD) that counts the requests and the body
bytes it sends. Row 1,234 is read through zarr by two routes, each with three chunkings (one
chunk, as VirtualiZarr's own parsers would give; a 1 MiB target, ``chunks=1 << 20``; one row
per chunk):

* *kerchunk*: ``to_kerchunk(header, url)`` references (the header already read), opened with
  fsspec's reference filesystem over HTTP, then ``zarr.open_group(...)["embed"][row]``;
* *VirtualiZarr*: ``SafetensorsParser`` through an obstore ``HTTPStore``, its header read
  counted apart ("virtualize"), then the row read through the ``ManifestStore`` with zarr.

**Many files.** ``--files`` files of 64 small F16 tensors (Llama-like names), virtualized with
``open_virtual_dataset(url, registry=..., parser=SafetensorsParser())``: serially, on
``--threads`` threads, and on a ``dask.distributed.LocalCluster`` of 2 worker processes
(1 thread each, on 127.0.0.1) with ``client.map`` + ``gather`` (the datasets pickled back to
this process; the cluster's start-up timed apart). The parser alone (a ``ManifestStore``, no
xarray Dataset) is timed serially too. Medians of ``--repeat`` runs; ratios to serial.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from safetensors_header import read_header, write_file
from safetensors_header.zarr import to_kerchunk

MIB = 1 << 20


class _Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.bytes = 0

    def add(self, sent: int) -> None:
        with self.lock:
            self.requests += 1
            self.bytes += sent

    def reset(self) -> None:
        with self.lock:
            self.requests = self.bytes = 0


def _handler(root: Path, counts: _Counts) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm and
        # the client's delayed ACK hold a small body back by about 40 ms.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, body: bool) -> None:
            path = root / self.path.lstrip("/").split("?")[0]
            if not path.is_file():
                counts.add(0)
                self.send_error(404)
                return
            size = path.stat().st_size
            start, stop = 0, size
            wanted = self.headers.get("Range")
            if wanted and wanted.startswith("bytes="):
                first, _, last = wanted[6:].partition("-")
                if first:
                    start, stop = int(first), min(size, int(last) + 1 if last else size)
                else:  # a suffix: the last N bytes
                    start, stop = max(0, size - int(last)), size
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(stop - start))
            self.send_header("Accept-Ranges", "bytes")
            if not body:
                counts.add(0)
                self.end_headers()
                return
            self.end_headers()
            with path.open("rb") as file:
                file.seek(start)
                body_bytes = file.read(stop - start)
            counts.add(len(body_bytes))  # before sending: the client may be done right after
            self.wfile.write(body_bytes)

        def do_GET(self) -> None:
            self._send(body=True)

        def do_HEAD(self) -> None:
            self._send(body=False)

    return Handler


@contextlib.contextmanager
def _server(root: Path, counts: _Counts) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(root, counts))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _one_row(folder: Path, rows: int, cols: int) -> list[dict[str, Any]]:
    import fsspec
    import numpy as np
    import zarr
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import HTTPStore

    from safetensors_header.virtualizarr import SafetensorsParser

    row = min(1234, rows - 1)
    values = np.arange(rows * cols, dtype=np.uint16).reshape(rows, cols)
    path = folder / "embed.safetensors"
    write_file(path, {"embed": ("BF16", (rows, cols), values.tobytes())})
    header = read_header(path)
    expected = values[row].tobytes()
    chunkings: list[tuple[str, Any]] = [
        ("one chunk", None),
        ("1 MiB target", MIB),
        ("one row", {"embed": (1, cols)}),
    ]
    counts = _Counts()
    results = []
    with _server(folder, counts) as base:
        url = f"{base}/{path.name}"
        for label, chunks in chunkings:
            refs = to_kerchunk(header, url, chunks=chunks)
            fs = fsspec.filesystem(
                "reference",
                fo=refs,
                asynchronous=True,
                remote_protocol="http",
                remote_options={"asynchronous": True},
            )
            array = zarr.open_group(zarr.storage.FsspecStore(fs, read_only=True), mode="r")["embed"]
            results.append(
                _read_row("kerchunk + fsspec", label, array, row, expected, counts=counts)
            )
        store = HTTPStore.from_url(base, client_options={"allow_http": True})
        registry = ObjectStoreRegistry({base: store})
        for label, chunks in chunkings:
            counts.reset()
            began = time.perf_counter()
            manifest_store = SafetensorsParser(chunks=chunks)(url, registry)
            virtualize = (counts.requests, counts.bytes, time.perf_counter() - began)
            array = zarr.open_group(manifest_store, mode="r", zarr_format=3)["embed"]
            entry = _read_row("VirtualiZarr + obstore", label, array, row, expected, counts=counts)
            entry["virtualize"] = virtualize
            results.append(entry)
    for entry in results:
        entry["tensor_bytes"] = header.tensors["embed"].nbytes
    return results


def _read_row(
    route: str, label: str, array: Any, row: int, expected: bytes, *, counts: _Counts
) -> dict[str, Any]:
    """Requests and bytes of one read of `row` (the first), and its time (median of 5)."""
    counts.reset()
    times = []
    for attempt in range(5):
        began = time.perf_counter()
        got = array[row]
        times.append(time.perf_counter() - began)
        assert got.tobytes() == expected
        if attempt == 0:
            requests, sent = counts.requests, counts.bytes
    return {
        "route": route,
        "chunks": label,
        "chunk_shape": array.chunks,
        "requests": requests,
        "bytes": sent,
        "seconds": statistics.median(times),
    }


def _many_files(folder: Path, files: int) -> list[str]:
    data = bytes(32)  # a 4 x 4 F16 tensor
    tensors = {}
    for layer in range(8):
        for part in ("q", "k", "v", "o", "gate", "up", "down", "norm"):
            tensors[f"model.layers.{layer}.{part}.weight"] = ("F16", (4, 4), data)
    urls = []
    for number in range(files):
        path = folder / f"model-{number:05}.safetensors"
        write_file(path, tensors, metadata={"format": "pt", "number": str(number)})
        urls.append(path.as_uri())
    return urls


def _median_time(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def _virtualize_many(urls: list[str], threads: int, repeat: int) -> list[tuple[str, float]]:
    import distributed
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_dataset

    from safetensors_header.virtualizarr import SafetensorsParser

    registry = ObjectStoreRegistry({"file://": LocalStore()})
    parser = SafetensorsParser()

    def open_one(url: str) -> Any:
        return open_virtual_dataset(url, registry=registry, parser=parser)

    open_one(urls[0])  # imports and first-call costs out of the timings
    results = [
        (
            "parser only (ManifestStore), serial",
            _median_time(lambda: [parser(u, registry) for u in urls], repeat),
        ),
        ("open_virtual_dataset, serial", _median_time(lambda: [open_one(u) for u in urls], repeat)),
    ]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        results.append(
            (
                f"open_virtual_dataset, {threads} threads",
                _median_time(lambda: list(pool.map(open_one, urls)), repeat),
            )
        )
    began = time.perf_counter()
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    with cluster, distributed.Client(cluster) as client:
        client.gather(client.map(open_virtual_dataset, urls[:2], registry=registry, parser=parser))
        started = time.perf_counter() - began

        def on_dask() -> None:
            futures = client.map(
                open_virtual_dataset, urls, registry=registry, parser=parser, pure=False
            )
            datasets = client.gather(futures)
            assert len(datasets) == len(urls)

        results.append(
            ("open_virtual_dataset, Dask: 2 worker processes", _median_time(on_dask, repeat))
        )
    results.append(("(Dask cluster start-up and first tasks)", started))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=32768)
    parser.add_argument("--cols", type=int, default=2048)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import platform
    from importlib import metadata

    versions = " ".join(
        f"{name} {metadata.version(name)}"
        for name in ("zarr", "virtualizarr", "fsspec", "obstore", "dask", "distributed")
    )
    print(f"Python {platform.python_version()}, {os.cpu_count()} cores; {versions}")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        results = _one_row(folder, args.rows, args.cols)
        tensor = results[0]["tensor_bytes"]
        print(
            f"\nOne row of a {args.rows:,} x {args.cols:,} BF16 tensor ({tensor / MIB:,.0f} MiB, "
            f"a row is {args.cols * 2:,} bytes), over loopback HTTP:\n"
        )
        print("| route | chunks | chunk shape | requests | bytes read | vs. one chunk | ms |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
        baseline: dict[str, int] = {}
        for entry in results:
            baseline.setdefault(entry["route"], entry["bytes"])
            ratio = baseline[entry["route"]] / max(entry["bytes"], 1)
            print(
                f"| {entry['route']} | {entry['chunks']} | {entry['chunk_shape']} | "
                f"{entry['requests']} | {entry['bytes']:,} | 1/{ratio:,.0f} | "
                f"{entry['seconds'] * 1000:,.1f} |"
            )
        for entry in results:
            if "virtualize" in entry:
                requests, sent, took = entry["virtualize"]
                print(
                    f"\nVirtualizing ({entry['chunks']}): {requests} requests, {sent:,} bytes, "
                    f"{took * 1000:,.1f} ms",
                    end="",
                )
        print()
        many = folder / "many"
        many.mkdir()
        urls = _many_files(many, args.files)
        timings = _virtualize_many(urls, args.threads, args.repeat)
        serial = timings[1][1]
        print(f"\nVirtualizing {args.files:,} files of 64 tensors (median of {args.repeat}):\n")
        print("| how | seconds | per file (ms) | vs. serial |")
        print("| --- | ---: | ---: | ---: |")
        for label, seconds in timings:
            per = f"{seconds / args.files * 1000:.2f}" if not label.startswith("(") else "-"
            ratio = f"{serial / seconds:.2f}x" if not label.startswith("(") else "-"
            print(f"| {label} | {seconds:.2f} | {per} | {ratio} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
