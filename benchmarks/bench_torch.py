"""Every tensor of a ~1 GB checkpoint into torch tensors, locally and over loopback HTTP, against
``safetensors.torch``, interleaved in one run; times, peak memory and ratios printed.

    PYTHONPATH=$PWD python benchmarks/bench_torch.py                  # every part
    PYTHONPATH=$PWD python benchmarks/bench_torch.py --parts local --rounds 15

Needs torch (``pip install torch==2.13.0``, or any build) and what ``bench_load.py`` needs
(numpy, safetensors); serves HTTP with nginx when the machine has it, else a threaded Python
server, as ``bench_load.py`` does (its checkpoint, server and tables are used as they are: 2
shards of a Llama-like model, F16 matrices and F32 norms, 326 tensors, ``--size`` MB,
written by the reference and kept in ``--cache``). Every candidate's tensors are checked
against the reference's once, bit for bit, before timing.

A tensor from ``safetensors.torch.load_file`` is a view of the file mapped copy-on-write:
nothing is read until it is used. So is one of ``safetensors_header.torch.load(path)``. Two
jobs are therefore timed: the ``load`` call alone, and the tensors "used": every page of
every tensor read once (one byte a page, so that the page is faulted in or read), which is
what a model's first forward pass or ``load_state_dict`` costs the same way for both.

Parts (``--parts``):

* ``local``, the page cache warm: ``load(path)`` against ``load_file(path)``, alone and used;
  ``load(path, mmap=False)`` (``os.preadv`` into memory) against
  ``load_file(path, backend="pread")``, used; and the floor, one ``readinto`` of each file
  into a buffer touched before the clock starts.
* ``http``, nginx (or Python's server) on loopback: ``load(url)`` of each shard against
  downloading each shard to a file, then ``load_file``, both used.
* ``memory``: the growth of the peak resident memory (``VmHWM``) over loading and using every
  tensor, each way in a fresh process, against the tensors' bytes (file pages mapped and read
  count as resident, as they are).

Targets (issue 41): locally at most 1.0x the reference's time; peak memory at most 1.1x the
data.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from bench_load import SHARDS, http_server, make_checkpoint, ready, table, timed
from safetensors.torch import load_file

import safetensors_header
from safetensors_header.torch import load

PAGE = 4096


def used(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors, every page of each read once (one byte a page)."""
    for tensor in tensors.values():
        if tensor.numel():
            tensor.reshape(-1).view(torch.uint8)[::PAGE].sum()
    return tensors


def same(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> bool:
    """The same names, dtypes, shapes and bytes (random bytes hold NaNs: not ==)."""
    return got.keys() == want.keys() and all(
        got[name].dtype == want[name].dtype
        and got[name].shape == want[name].shape
        and torch.equal(bits(got[name]), bits(want[name]))
        for name in want
    )


def bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.reshape(-1).view(torch.uint8)


def every(
    paths: list[Any], loader: Callable[[Any], dict[str, torch.Tensor]], use: bool
) -> Callable[[], dict[str, torch.Tensor]]:
    def run() -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for path in paths:
            out.update(loader(path))
        return used(out) if use else out

    return run


def part_local(folder: Path, rounds: int, want: dict[str, torch.Tensor]) -> None:
    paths = [folder / shard for shard in SHARDS]
    names = [str(path) for path in paths]

    def read(path: Path) -> dict[str, torch.Tensor]:
        return load(path, mmap=False)

    def pread(path: str) -> dict[str, torch.Tensor]:
        return load_file(path, backend="pread")

    buffers = [ready(path.stat().st_size) for path in paths]

    def floor() -> None:
        for path, buffer in zip(paths, buffers, strict=True):
            with path.open("rb", buffering=0) as file:
                done = 0
                while done < len(buffer):
                    done += file.readinto(buffer[done:]) or 0

    candidates = {
        "ours: load": every(paths, load, use=False),
        "load_file": every(names, load_file, use=False),
        "ours: load, used": every(paths, load, use=True),
        "load_file, used": every(names, load_file, use=True),
        "ours: load(mmap=False), used": every(paths, read, use=True),
        'load_file(backend="pread"), used': every(names, pread, use=True),
        "floor: readinto": floor,
    }
    for name, run in candidates.items():
        if name != "floor: readinto":
            assert same(run(), want), name  # type: ignore[arg-type]  (the floor returns None)
    print("## local, page cache warm\n")
    table(
        timed(candidates, rounds),
        [
            ("ours: load", "load_file", "at most 1.0x"),
            ("ours: load, used", "load_file, used", "at most 1.0x"),
            ("ours: load(mmap=False), used", 'load_file(backend="pread"), used', "at most 1.0x"),
            ("ours: load(mmap=False), used", "floor: readinto", "(the floor)"),
        ],
    )


def download_then_load(url: str) -> dict[str, torch.Tensor]:
    """The reference's way to a URL: the whole file to a temporary file, then ``load_file``
    (the file is unlinked at once: its map holds it)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "shard.safetensors")
        with urllib.request.urlopen(url) as reply, open(path, "wb") as file:
            shutil.copyfileobj(reply, file, 1 << 20)
        return load_file(path)


def part_http(folder: Path, rounds: int, want: dict[str, torch.Tensor]) -> None:
    with http_server(folder) as (base, server):
        print(f"## over loopback HTTP: {server}\n")
        urls = [f"{base}/{shard}" for shard in SHARDS]
        candidates = {
            "ours: load(url), used": every(urls, load, use=True),
            "download, then load_file, used": every(urls, download_then_load, use=True),
        }
        for name, run in candidates.items():
            assert same(run(), want), name
        times = timed(candidates, rounds)
    table(times, [("ours: load(url), used", "download, then load_file, used", "")])


_CHILD = """
import os, shutil, sys, tempfile, urllib.request
import torch
from safetensors.torch import load_file
from safetensors_header.torch import load

def status(field):
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

way, places = sys.argv[1], sys.argv[2:]
before = status("VmRSS")
tensors = {}
for place in places:
    if way == "ours: load":
        tensors.update(load(place))
    elif way == "ours: load(mmap=False)":
        tensors.update(load(place, mmap=False))
    elif way == "ours: load(url)":
        tensors.update(load(place))
    elif way == "load_file":
        tensors.update(load_file(place))
    elif way == "download, then load_file":
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "shard.safetensors")
            with urllib.request.urlopen(place) as reply, open(path, "wb") as file:
                shutil.copyfileobj(reply, file, 1 << 20)
            tensors.update(load_file(path))
for tensor in tensors.values():
    if tensor.numel():
        tensor.reshape(-1).view(torch.uint8)[::4096].sum()
print(sum(t.numel() * t.element_size() for t in tensors.values()), status("VmHWM") - before)
"""


def part_memory(folder: Path) -> None:
    rows = []

    def measure(way: str, places: list[str]) -> None:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, way, *places],
            capture_output=True,
            text=True,
            check=True,
        )
        total, peak = map(int, done.stdout.split())
        rows.append((way, total, peak))

    paths = [str(folder / shard) for shard in SHARDS]
    measure("ours: load", paths)
    measure("ours: load(mmap=False)", paths)
    measure("load_file", paths)
    with http_server(folder) as (base, _):
        urls = [f"{base}/{shard}" for shard in SHARDS]
        measure("ours: load(url)", urls)
        measure("download, then load_file", urls)
    print("## peak memory, every tensor loaded and used (a fresh process each)\n")
    print("| way | data MiB | peak growth MiB | peak / data | target |")
    print("|---|---:|---:|---:|---|")
    for way, total, peak in rows:
        target = "at most 1.1x" if way.startswith("ours") else ""
        print(
            f"| {way} | {total / 2**20:,.0f} | {peak / 2**20:,.0f} | {peak / total:.3f}x "
            f"| {target} |"
        )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="local,http,memory")
    parser.add_argument("--size", type=int, default=1000, help="MB of tensors (default 1000)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "safetensors_header_bench_load",
        help="where the checkpoint is kept between runs (bench_load.py's)",
    )
    args = parser.parse_args()
    parts = args.parts.split(",")
    folder = args.cache / f"checkpoint-{args.size}"
    make_checkpoint(folder, args.size)
    want: dict[str, torch.Tensor] = {}
    for shard in SHARDS:
        want.update(load_file(str(folder / shard)))
    data = sum(tensor.numel() * tensor.element_size() for tensor in want.values())
    print(f"safetensors_header {safetensors_header.__version__} from {safetensors_header.__file__}")
    print(
        f"Python {sys.version.split()[0]}, torch {torch.__version__}, {os.cpu_count()} cores; "
        f"{len(want)} tensors, {data / 1e6:,.0f} MB in {len(SHARDS)} shards; {args.rounds} "
        "rounds\n"
    )
    if "local" in parts:
        part_local(folder, args.rounds, want)
    if "http" in parts:
        part_http(folder, args.rounds, want)
    if "memory" in parts:
        part_memory(folder)


if __name__ == "__main__":
    main()
