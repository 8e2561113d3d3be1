"""Hashing a ~1.5 GB checkpoint in the page cache: ``hash_tensors`` against the machine's own
hashing limit, measured in the same run, interleaved.

    PYTHONPATH=$PWD python benchmarks/bench_hash.py [--size 1500] [--rounds 5]

The checkpoint is bench_load.py's (2 shards of a Llama-like model, F16 matrices; kept between
runs in the temporary directory); its files are read once before the clock starts, so that
they are in the page cache.

The limit, per round: the bytes the call must hash / (cores x one thread's sha256 speed on a
buffer that stays in the cache, in bytes a second of its own processor time): what hashing
costs with nothing else to do (no reading, no scheduling). The bytes the call must hash are
the tensors' (each tensor's digest); with ``files=True``, the tensors' and the files' (each
byte of a tensor goes through two hashes, its tensor's and its file's); the content digest
and the fingerprints hash a few bytes a tensor, left out. Candidates, each once a round in
an order that rotates:

* ``hash_tensors``: sha256 with ``mmap=True`` (a local file mapped, hashed in pieces of
  `_PIECE` bytes), and as shipped, reading copies (each piece read through the data path
  into a buffer of the thread's);
* ``hash_tensors files=True``: each file's whole digest too (its limit counts each byte of
  a tensor twice);
* ``map and hash, a thread a core``: the files mapped, 1 MiB pieces of them hashed by a
  thread a core, nothing else: the best a map leaves of the limit;
* ``read and hash, a thread a core``: the same with each piece ``os.preadv``-ed into the
  thread's own buffer: the best copies leave of the limit;
* ``hashlib.file_digest``: sha256 of each file on one thread (the standard library's way;
  Python 3.11 and later);
* ``read the files``: every file read once, on one thread, into a 1 MiB buffer (the floor);
* with the ``blake3`` package: ``hash_tensors(algorithm="blake3")``, and the package itself
  over each file (``update_mmap``, all its threads: ``max_threads=blake3.AUTO``).

Targets (issue 42): ``hash_tensors`` (sha256) at least 0.85x the limit; blake3 within 1.3x
the time to read the files.

On a machine other processes share, the wall times of the candidates that use every core
suffer and the single thread's speed does not: a second table gives the processor time of
each candidate (this process's, all its threads), and the limit's (the bytes / one thread's
speed), whose ratio holds however busy the machine is. The load average is printed before
and after every round: a round whose load was high has wall ratios that mean little.
"""

from __future__ import annotations

import argparse
import hashlib
import mmap
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_load import SHARDS, make_checkpoint, table

import safetensors_header
from safetensors_header import read_checkpoint
from safetensors_header.integrity import hash_tensors

CACHED = 256 << 10  # bytes of the buffer the single-thread speed is measured on
SPEED_BYTES = 512 << 20  # bytes hashed to measure it (about 0.35 s at 1.5 GB/s)


def single_thread_speed(new: Callable[[], Any] = hashlib.sha256) -> float:
    """Bytes a second of its own processor time one thread hashes with sha256 (or `new()`'s
    algorithm), the buffer in the cache (its processor time, not the wall's: another process
    may take the core)."""
    buffer = memoryview(os.urandom(CACHED))
    digest = new()
    started = time.thread_time()
    for _ in range(SPEED_BYTES // CACHED):
        digest.update(buffer)
    return SPEED_BYTES / (time.thread_time() - started)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(
    candidates: dict[str, Callable[[], object]], rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Every candidate once a round, in an order that rotates: the wall and the processor
    times of each."""
    names = list(candidates)
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        before = load()
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            started, processor = time.perf_counter(), time.process_time()
            candidates[name]()
            wall[name].append(time.perf_counter() - started)
            cpu[name].append(time.process_time() - processor)
        print(f"round {round_ + 1}: load average {before} before, {load()} after")
    print()
    return wall, cpu


def copying(**options: object) -> object:
    """`hash_tensors` as shipped: every piece read through the data path."""
    return hash_tensors(FOLDER, **options)  # type: ignore[arg-type]


def a_thread_a_core(files: list[Path], hash_piece: Callable[[int, int], None]) -> None:
    """`hash_piece(file's index, offset)` for each 1 MiB piece of the files, on a thread a
    core, nothing else."""
    pieces = [(i, at) for i, path in enumerate(files) for at in range(0, path.stat().st_size, MIB)]
    lock = threading.Lock()
    left = iter(pieces)

    def loop() -> None:
        while True:
            with lock:
                job = next(left, None)
            if job is None:
                return
            hash_piece(*job)

    threads = [threading.Thread(target=loop) for _ in range(os.cpu_count() or 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


MIB = 1 << 20
FOLDER = Path()


def main() -> None:
    global FOLDER  # noqa: PLW0603 - one checkpoint for the candidates
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1500, help="MB of tensors (default 1500)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "safetensors_header_bench_load",
    )
    args = parser.parse_args()
    FOLDER = args.cache / f"checkpoint-{args.size}"
    make_checkpoint(FOLDER, args.size)
    files = [FOLDER / shard for shard in SHARDS]
    tensor_bytes = sum(h.data_size for h in read_checkpoint(FOLDER).files.values())
    file_bytes = sum(path.stat().st_size for path in files)
    cores = os.cpu_count() or 1
    print(f"safetensors_header {safetensors_header.__version__} from {safetensors_header.__file__}")
    print(f"Python {sys.version.split()[0]}, {cores} cores; {args.rounds} rounds")
    print(f"{tensor_bytes:,} bytes of tensors in {file_bytes:,} bytes of files\n")
    buffer = memoryview(bytearray(MIB))

    def read_files() -> None:
        for path in files:
            with open(path, "rb", buffering=0) as file:
                while file.readinto(buffer):
                    pass

    def file_digest() -> None:
        for path in files:
            with open(path, "rb") as file:
                hashlib.file_digest(file, "sha256")

    own = threading.local()

    def read_and_hash() -> None:
        descriptors = [os.open(path, os.O_RDONLY) for path in files]

        def piece(index: int, at: int) -> None:
            into = getattr(own, "buffer", None)
            if into is None:
                into = own.buffer = memoryview(bytearray(MIB))
            hashlib.sha256(into[: os.preadv(descriptors[index], [into], at)])

        try:
            a_thread_a_core(files, piece)
        finally:
            for descriptor in descriptors:
                os.close(descriptor)

    def map_and_hash() -> None:
        maps = []
        for path in files:
            with open(path, "rb") as file:
                maps.append(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))
        views = [memoryview(mapped) for mapped in maps]
        try:
            a_thread_a_core(files, lambda i, at: hashlib.sha256(views[i][at : at + MIB]))
        finally:
            for view, mapped in zip(views, maps, strict=True):
                view.release()
                mapped.close()

    speeds: list[float] = []
    blake3_speeds: list[float] = []

    def limit() -> None:
        # Not timed as it runs: its time is replaced below by bytes / (cores x speed).
        speeds.append(single_thread_speed())

    candidates = {
        "limit": limit,
        "hash_tensors": lambda: hash_tensors(FOLDER, mmap=True),
        "hash_tensors, copies": copying,
        "hash_tensors files=True": lambda: hash_tensors(FOLDER, files=True, mmap=True),
        "map and hash, a thread a core": map_and_hash,
        "read and hash, a thread a core": read_and_hash,
        "read the files": read_files,
    }
    if hasattr(hashlib, "file_digest"):  # Python 3.11 and later
        candidates["hashlib.file_digest"] = file_digest
    try:
        import blake3  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        blake3 = None
        print("(the blake3 package is not installed: its candidates are left out)\n")
    else:

        def blake3_package() -> None:
            for path in files:
                blake3.blake3(max_threads=blake3.blake3.AUTO).update_mmap(path)

        def blake3_limit() -> None:
            # Not timed as it runs: its time is replaced below by bytes / (cores x speed).
            blake3_speeds.append(single_thread_speed(lambda: blake3.blake3(max_threads=1)))

        candidates["hash_tensors blake3"] = lambda: hash_tensors(
            FOLDER, algorithm="blake3", mmap=True
        )
        candidates["blake3 package, each file"] = blake3_package
        candidates["blake3 limit"] = blake3_limit
    read_files()
    times, processor = timed(candidates, args.rounds)
    both = tensor_bytes + file_bytes  # files=True: each tensor's byte in two digests
    times["limit"] = [tensor_bytes / (cores * speed) for speed in speeds]
    times["limit, files=True"] = [both / (cores * speed) for speed in speeds]
    processor["limit"] = [tensor_bytes / speed for speed in speeds]
    processor["limit, files=True"] = [both / speed for speed in speeds]
    print(f"one thread's sha256: {min(speeds) / 1e9:.2f}-{max(speeds) / 1e9:.2f} GB/s")
    if blake3_speeds:
        times["blake3 limit"] = [tensor_bytes / (cores * speed) for speed in blake3_speeds]
        processor["blake3 limit"] = [tensor_bytes / speed for speed in blake3_speeds]
        low, high = min(blake3_speeds) / 1e9, max(blake3_speeds) / 1e9
        print(f"one thread's blake3: {low:.2f}-{high:.2f} GB/s")
    print()
    ratios = [
        ("limit", "hash_tensors", "0.85 or more (the fraction of the limit)"),
        ("limit", "hash_tensors, copies", ""),
        ("limit, files=True", "hash_tensors files=True", "(each tensor's byte hashed twice)"),
        ("limit", "map and hash, a thread a core", "(what a map leaves of the limit)"),
        ("limit", "read and hash, a thread a core", "(what copies leave of the limit)"),
        ("hash_tensors", "read the files", ""),
    ]
    if "hashlib.file_digest" in candidates:
        ratios.append(("hash_tensors", "hashlib.file_digest", "below 1"))
    if blake3 is not None:
        ratios += [
            ("hash_tensors blake3", "read the files", "1.3x or less"),
            ("blake3 package, each file", "read the files", ""),
            ("blake3 limit", "read the files", "(blake3 alone, nothing read: below 1.3x?)"),
        ]
    print("### wall time\n")
    table(times, ratios)
    print("### processor time (all threads)\n")
    table(processor, ratios)


if __name__ == "__main__":
    main()
