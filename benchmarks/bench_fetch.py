"""Requests, bytes and wall time to get tensors over HTTP, against downloading the file first.

    PYTHONPATH=$PWD python benchmarks/bench_fetch.py                  # 20 ms a request
    PYTHONPATH=$PWD python benchmarks/bench_fetch.py --latency 0.05 --bandwidth 25

A loopback HTTP server (standard library; Range honoured) answers every request after
``--latency`` seconds and sends bodies at ``--bandwidth`` MB/s, counting requests and body
bytes. The files: a 2-shard checkpoint of a small Llama-like model (F32 tensors, about 51 MB
a shard, an index JSON beside them), written by ``safetensors``.

**Cases**, each done two ways, round-robin for ``--repeat`` rounds (medians printed):

* (a) one tensor (the middle one of shard 1): ``open_tensors(url)[name][...]`` against
  downloading the shard to a temporary file, then ``safetensors.safe_open(path, "np")``'s
  ``get_tensor(name)``;
* (b) one slice, rows 128-255 of that tensor: ``open_tensors(url)[name][128:256]`` against
  downloading, then ``safe_open``'s ``get_slice(name)[128:256]``;
* (c) every tensor of the checkpoint: ``read_checkpoint(index_url)`` (the index and the
  shards' headers), then ``safetensors_header.numpy.load(shard_url, header=...)`` for each
  shard, one shard after the other, against downloading the index and both shards, then
  ``get_tensor`` of every tensor.

`read_ranges` cuts a read of more than 16 MiB (``part_size``) into equal parts fetched in
parallel (at most 2 streams a core, or 4); the server's bandwidth limit is per connection,
as a CDN's or a bucket's is.

The download is what ``huggingface_hub.hf_hub_download`` does before ``safe_open``: one GET
of the whole file, written to disk (here with urllib, 1 MiB at a time). Both sides check
their arrays against the originals once before timing.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save

import safetensors_header
from safetensors_header import read_checkpoint
from safetensors_header.numpy import load, open_tensors

SHARDS = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
INDEX = "model.safetensors.index.json"
HIDDEN, LAYERS_PER_SHARD = 512, 4  # 4 layers x (4 + 3 x 2.75) x 1 MiB: ~51 MB a shard


class Counter:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.sent = 0

    def take(self) -> tuple[int, int]:
        with self.lock:
            counts = self.requests, self.sent
            self.requests = self.sent = 0
        return counts


def serve(root: Path, latency: float, bandwidth: float) -> tuple[str, Counter, Callable[[], None]]:
    counter = Counter()
    files = {path.name: path.read_bytes() for path in root.iterdir()}  # served from memory
    step = 1 << 16
    pause = step / (bandwidth * 1e6) if bandwidth else 0.0

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            with counter.lock:
                counter.requests += 1
            time.sleep(latency)
            data = memoryview(files[self.path.lstrip("/")])  # slices without copies
            match = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
            if match:
                first, last = int(match[1]), min(int(match[2]), len(data) - 1)
                body = data[first : last + 1]
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
            else:
                body = data
                self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", f'"{len(data)}"')
            self.end_headers()
            try:
                for start in range(0, len(body), step):
                    self.wfile.write(body[start : start + step])
                    with counter.lock:
                        counter.sent += len(body[start : start + step])
                    if pause:
                        time.sleep(pause)
            except (BrokenPipeError, ConnectionResetError):
                pass

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 64

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_address[1]}", counter, stop


def make_checkpoint(root: Path) -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    shards: dict[str, dict[str, np.ndarray]] = {}
    weight_map = {}
    layer = 0
    for name in SHARDS:
        tensors: dict[str, np.ndarray] = {}
        for _ in range(LAYERS_PER_SHARD):
            prefix = f"model.layers.{layer}"
            for part in ("q_proj", "k_proj", "v_proj", "o_proj"):
                tensors[f"{prefix}.self_attn.{part}.weight"] = rng.random(
                    (HIDDEN, HIDDEN), dtype=np.float32
                )
            for part, shape in (
                ("gate_proj", (HIDDEN * 11 // 4, HIDDEN)),
                ("up_proj", (HIDDEN * 11 // 4, HIDDEN)),
                ("down_proj", (HIDDEN, HIDDEN * 11 // 4)),
            ):
                tensors[f"{prefix}.mlp.{part}.weight"] = rng.random(shape, dtype=np.float32)
            tensors[f"{prefix}.input_layernorm.weight"] = np.ones(HIDDEN, np.float32)
            layer += 1
        (root / name).write_bytes(save(tensors))
        weight_map.update(dict.fromkeys(tensors, name))
        shards[name] = tensors
    total = sum(a.nbytes for tensors in shards.values() for a in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (root / INDEX).write_text(json.dumps(index))
    return shards


def download(url: str, folder: str) -> str:
    path = os.path.join(folder, url.rsplit("/", 1)[1])
    with urllib.request.urlopen(url) as response, open(path, "wb") as file:
        while chunk := response.read(1 << 20):
            file.write(chunk)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=0.02, help="seconds a request")
    parser.add_argument("--bandwidth", type=float, default=100.0, help="MB/s (0: no limit)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"safetensors_header {safetensors_header.__version__} from {safetensors_header.__file__}")
    print(
        f"Python {sys.version.split()[0]}; {args.latency * 1000:g} ms a request, "
        f"{args.bandwidth:g} MB/s, {args.repeat} rounds"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "site"
        root.mkdir()
        shards = make_checkpoint(root)
        base, counter, stop = serve(root, args.latency, args.bandwidth)
        first = shards[SHARDS[0]]
        name = list(first)[len(first) // 2]
        rows = slice(128, 256)
        shard_url = f"{base}/{SHARDS[0]}"

        def ours_one() -> np.ndarray:
            return open_tensors(shard_url)[name][...]

        def theirs_one() -> np.ndarray:
            with (
                tempfile.TemporaryDirectory() as folder,
                safe_open(download(shard_url, folder), "np") as f,
            ):
                return f.get_tensor(name)

        def ours_slice() -> np.ndarray:
            return open_tensors(shard_url)[name][rows]

        def theirs_slice() -> np.ndarray:
            with (
                tempfile.TemporaryDirectory() as folder,
                safe_open(download(shard_url, folder), "np") as f,
            ):
                return f.get_slice(name)[rows]

        def ours_all() -> dict[str, np.ndarray]:
            checkpoint = read_checkpoint(f"{base}/{INDEX}")  # the index, the shards' headers
            out: dict[str, np.ndarray] = {}
            for shard, header in checkpoint.files.items():  # the headers are not read again
                out.update(load(f"{base}/{shard}", header=header))
            return out

        def theirs_all() -> dict[str, np.ndarray]:
            out: dict[str, np.ndarray] = {}
            with tempfile.TemporaryDirectory() as folder:
                index = json.loads(Path(download(f"{base}/{INDEX}", folder)).read_text())
                for shard in dict.fromkeys(index["weight_map"].values()):
                    with safe_open(download(f"{base}/{shard}", folder), "np") as f:
                        out.update({key: f.get_tensor(key) for key in f.keys()})  # noqa: SIM118
            return out

        everything = {k: v for tensors in shards.values() for k, v in tensors.items()}
        cases = {
            "(a) one tensor": (ours_one, theirs_one, lambda got: np.array_equal(got, first[name])),
            "(b) one slice": (
                ours_slice,
                theirs_slice,
                lambda got: np.array_equal(got, first[name][rows]),
            ),
            "(c) whole checkpoint": (
                ours_all,
                theirs_all,
                lambda got: (
                    got.keys() == everything.keys()
                    and all(np.array_equal(got[k], everything[k]) for k in everything)
                ),
            ),
        }
        results: dict[tuple[str, str], list[tuple[float, int, int]]] = {}
        for case, (ours, theirs, check) in cases.items():
            for side, run in (("read_ranges", ours), ("download + safe_open", theirs)):
                assert check(run()), (case, side)
        counter.take()
        for _ in range(args.repeat):
            for case, (ours, theirs, _check) in cases.items():
                for side, run in (("read_ranges", ours), ("download + safe_open", theirs)):
                    started = time.perf_counter()
                    run()
                    elapsed = time.perf_counter() - started
                    requests, sent = counter.take()
                    results.setdefault((case, side), []).append((elapsed, requests, sent))
        stop()
    print()
    print("| case | requests | MB sent | ms (median) | vs download + safe_open |")
    print("|---|---:|---:|---:|---:|")
    for case in cases:
        theirs_ms = statistics.median(r[0] for r in results[(case, "download + safe_open")])
        for side in ("read_ranges", "download + safe_open"):
            runs = results[(case, side)]
            ms = statistics.median(r[0] for r in runs)
            requests, sent = runs[0][1], runs[0][2]
            ratio = f"{ms / theirs_ms:.2f}x time, " if side == "read_ranges" else ""
            print(
                f"| {case}: {side} | {requests} | {sent / 1e6:,.2f} | {ms * 1000:,.0f} | "
                + (
                    f"{ratio}{sent / results[(case, 'download + safe_open')][0][2]:.3f}x bytes |"
                    if ratio
                    else "1x |"
                )
            )


if __name__ == "__main__":
    main()
