"""Time `read_header` against the reference, `json.loads` and a floor, interleaved, in one run.

    python benchmarks/bench_read_header.py [--sizes 10,1000,100000] [--repeat 15]

For each header size it writes a file of that many tensors (names, dtypes and shapes like a
transformer checkpoint's, each tensor a few bytes so the file is mostly header), then times,
round-robin so that drift hits every candidate alike:

* ``read_header``: ``read_header(path)``, then every tensor's ``dtype``, ``shape`` and
  ``start`` touched;
* ``reference``: ``safetensors.safe_open(path, "np")``, ``metadata()``, and
  ``get_slice(k).get_dtype()`` / ``.get_shape()`` for every key (the same information);
* ``json.loads``: bare ``json.loads`` of the header bytes, already in memory (no
  validation at all), called as a user would: the cyclic collector left on;
* ``json.loads, GC paused``: the same with the collector paused, as ``read_header`` pauses
  it (the collector's cost depends on how many objects the process holds);
* ``floor``: what any reader built on ``json.loads`` that returns our objects must do at the
  least: read the header bytes, ``json.loads`` them (the collector paused, as we do), pick
  the fields out and make the same ``Header`` of ``TensorInfo`` objects the parser makes, with
  no check at all; then touch every tensor as ``read_header`` is. Against the reference it
  shows how close to 1.0x a json.loads-based reader can get at all.

It prints the median time of each, the ratios, and the peak memory of ``read_header``, the
reference and ``json.loads``: the growth of the process's peak resident set size over one
call, measured in a fresh subprocess per candidate (so the reference's Rust-side
allocations count too).

Files of more than 500,000 tensors get shorter names, so that the header stays under the
reference's 10^8-byte limit.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from safetensors_header import read_header

DTYPES = ("BF16", "F32", "F16", "I64", "U8")


def write_checkpoint(path: Path, count: int) -> int:
    """Write a file of `count` small tensors named like a transformer's; return N."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    sizes = {"BF16": 2, "F32": 4, "F16": 2, "I64": 8, "U8": 1}
    for i in range(count):
        dtype = DTYPES[i % len(DTYPES)]
        shape = [2, 3] if i % 3 else [4]
        nbytes = sizes[dtype] * (6 if i % 3 else 4)
        if count > 500_000:
            name = f"l.{i // 8}.p{i % 8}"
        else:
            name = f"model.layers.{i // 8}.{('self_attn', 'mlp')[i % 2]}.proj_{i % 8}.weight"
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(offset))
    return len(text)


def ours(path: Path) -> Callable[[], object]:
    def run() -> object:
        header = read_header(path)
        for info in header.tensors.values():
            info.dtype, info.shape, info.start  # noqa: B018
        return header

    return run


def reference(path: Path) -> Callable[[], object]:
    from safetensors import safe_open

    def run() -> object:
        with safe_open(str(path), "np") as file:
            metadata = file.metadata()
            for key in file.keys():  # noqa: SIM118 (safe_open is not a mapping)
                tensor = file.get_slice(key)
                tensor.get_dtype(), tensor.get_shape()
        return metadata

    return run


def floor(path: Path) -> Callable[[], object]:
    from operator import itemgetter

    from safetensors_header import _parser

    dtype, shape, offsets, first, second = map(itemgetter, ("dtype", "shape", "data_offsets", 0, 1))

    def run() -> object:
        with open(path, "rb", buffering=0) as file:
            size = int.from_bytes(file.read(8), "little")
            text = file.read(size).decode()
        with _parser._gc_paused():
            top = json.loads(text)
            metadata = top.pop("__metadata__", None)
            entries = list(top.values())
            pairs = list(map(offsets, entries))
            dtypes = list(map(dtype, entries))
            shapes = list(map(tuple, map(shape, entries)))
            distinct: dict[Any, Any] = {}  # one object per distinct dtype and shape
            columns: Any = (
                list(top),
                list(map(distinct.setdefault, dtypes, dtypes)),
                list(map(distinct.setdefault, shapes, shapes)),
                list(map(first, pairs)),
                list(map(second, pairs)),
                metadata,
            )
            del top, entries, pairs
            header = _parser._build(columns, size, None)
        for info in header.tensors.values():
            info.dtype, info.shape, info.start  # noqa: B018
        return header

    return run


def bare_json(path: Path) -> Callable[[], object]:
    raw = path.read_bytes()
    size = struct.unpack("<Q", raw[:8])[0]
    body = raw[8 : 8 + size]
    return lambda: json.loads(body)


def paused_json(path: Path) -> Callable[[], object]:
    from safetensors_header import _parser

    loads = bare_json(path)

    def run() -> object:
        with _parser._gc_paused():
            return loads()

    return run


def measure(candidates: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for run in candidates.values():  # warm up: imports, caches, page cache
        run()
    for _ in range(repeat):
        for name, run in candidates.items():
            gc.collect()
            start = time.perf_counter()
            result = run()
            del result  # freeing the result is part of the cost
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


_RSS_PROBE = """
import sys
sys.path.insert(0, {folder!r})
import bench_read_header as bench
from pathlib import Path
run = getattr(bench, {candidate!r})(Path({path!r}))
before = bench.peak_rss_kib()
result = run()
print(max(0, bench.peak_rss_kib() - before))
"""


def peak_rss_kib() -> int:
    """This process's peak resident set size, in KiB.

    VmHWM from /proc, which exec resets: ru_maxrss would keep the parent's peak from fork.
    """
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise OSError("no VmHWM in /proc/self/status")


def peak_rss_mib(candidate: str, path: Path) -> float:
    """Peak RSS growth of one call, in a fresh process, in MiB (Linux)."""
    code = _RSS_PROBE.format(folder=str(Path(__file__).parent), candidate=candidate, path=str(path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,1000,100000")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    try:
        reference(Path("."))
    except ImportError:
        print("the safetensors package is not installed: pip install safetensors", file=sys.stderr)
        return 1
    print(f"Python {sys.version.split()[0]}, median of {args.repeat} interleaved runs, in ms")
    columns = (
        "tensors", "N (bytes)", "read_header", "reference", "json.loads", "json, GC paused",
        "floor", "vs ref", "vs json", "vs json paused", "floor/ref", "peak RSS MiB ours/ref/json",
    )  # fmt: skip
    print(" | ".join(columns))
    with tempfile.TemporaryDirectory() as folder:
        for count in map(int, args.sizes.split(",")):
            path = Path(folder) / f"{count}.safetensors"
            size = write_checkpoint(path, count)
            candidates = {
                "ours": ours(path),
                "reference": reference(path),
                "json": bare_json(path),
                "json paused": paused_json(path),
                "floor": floor(path),
            }
            ms = {name: value * 1e3 for name, value in measure(candidates, args.repeat).items()}
            peaks = [
                peak_rss_mib(function, path) for function in ("ours", "reference", "bare_json")
            ]
            cells = (
                f"{count:,}",
                f"{size:,}",
                *(f"{ms[name]:.3f}" for name in candidates),
                *(f"{ms['ours'] / ms[name]:.2f}x" for name in ("reference", "json", "json paused")),
                f"{ms['floor'] / ms['reference']:.2f}x",
                " / ".join(f"{peak:.1f}" for peak in peaks),
            )
            print(" | ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
