"""Hashing a ~1.5 GB checkpoint in the page cache: ``hash_tensors`` against the machine's own
hashing limit, measured in the same run, interleaved.

    PYTHONPATH=$PWD python benchmarks/bench_hash.py [--size 1500] [--rounds 5]

The checkpoint is bench_load.py's (2 shards of a Llama-like model, F16 matrices; kept between
runs in the temporary directory); its files are read once before the clock starts, so that
they are in the page cache.

The limit, per round: the tensors' bytes / (cores x one thread's sha256 speed on a buffer
that stays in the cache, in bytes a second of its own processor time): what hashing costs
with nothing else to do (no reading, no scheduling). Candidates, each once a round in an
order that rotates:

* ``hash_tensors``: sha256, as shipped (pieces of `_PIECE` bytes), and with 256 KiB, 512 KiB
  and 8 MiB pieces (``_hashes._PIECE`` set for the run), to see the cache's effect;
* ``hash_tensors files=True``: each file's whole digest too (each byte hashed twice: its
  limit is twice the tensors' one);
* ``hashlib.file_digest``: sha256 of each file on one thread (the standard library's way);
* ``read and hash, a thread a core``: 1 MiB pieces of the files ``os.preadv``-ed and
  hashed by a thread a core, nothing else: the best reading leaves of the limit;
* ``read the files``: every file read once, on one thread, into a 1 MiB buffer (the floor);
* with the ``blake3`` package: ``hash_tensors(algorithm="blake3")``, and the package itself
  over each file's bytes (one ``update`` a 16 MiB piece, all its threads).

Targets (issue 42): ``hash_tensors`` (sha256) at least 0.85x the limit; blake3 within 1.3x
the time to read the files.

On a machine other processes share, the wall times of the candidates that use every core
suffer and the single thread's speed does not: a second table gives the processor time of
each candidate (this process's, all its threads), and the limit's (the bytes / one thread's
speed), whose ratio holds however busy the machine is. The piece sizes are compared by
setting ``_hashes._PIECE``, a private constant, for the run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench_load import SHARDS, make_checkpoint, table

import safetensors_header
from safetensors_header import _hashes, hash_tensors, read_checkpoint

CACHED = 256 << 10  # bytes of the buffer the single-thread speed is measured on
SPEED_BYTES = 512 << 20  # bytes hashed to measure it (about 0.35 s at 1.5 GB/s)


def single_thread_speed() -> float:
    """Bytes a second of its own processor time one thread hashes with sha256, the buffer in
    the cache (its processor time, not the wall's: another process may take the core)."""
    buffer = memoryview(os.urandom(CACHED))
    digest = hashlib.sha256()
    started = time.thread_time()
    for _ in range(SPEED_BYTES // CACHED):
        digest.update(buffer)
    return SPEED_BYTES / (time.thread_time() - started)


def timed(
    candidates: dict[str, Callable[[], object]], rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Every candidate once a round, in an order that rotates: the wall and the processor
    times of each."""
    names = list(candidates)
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            started, processor = time.perf_counter(), time.process_time()
            candidates[name]()
            wall[name].append(time.perf_counter() - started)
            cpu[name].append(time.process_time() - processor)
    return wall, cpu


def with_piece(size: int, **options: object) -> object:
    saved = _hashes._PIECE
    _hashes._PIECE = size  # type: ignore[misc]
    try:
        return hash_tensors(FOLDER, **options)  # type: ignore[arg-type]
    finally:
        _hashes._PIECE = saved  # type: ignore[misc]


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
    print(
        f"Python {sys.version.split()[0]}, {cores} cores; {args.rounds} rounds; load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start"
    )
    print(f"{tensor_bytes:,} bytes of tensors in {file_bytes:,} bytes of files\n")
    buffer = memoryview(bytearray(1 << 20))

    def read_files() -> None:
        for path in files:
            with open(path, "rb", buffering=0) as file:
                while file.readinto(buffer):
                    pass

    def file_digest() -> None:
        for path in files:
            with open(path, "rb") as file:
                hashlib.file_digest(file, "sha256")

    def read_and_hash() -> None:
        # What hashing with reading costs at best: a thread a core, each preadv-ing 1 MiB
        # pieces of the files into its own buffer and hashing them (no tensors, no checks).
        pieces = [(path, at) for path in files for at in range(0, path.stat().st_size, 1 << 20)]
        lock = threading.Lock()
        left = iter(pieces)

        def loop() -> None:
            own = memoryview(bytearray(1 << 20))
            while True:
                with lock:
                    job = next(left, None)
                if job is None:
                    return
                path, at = job
                descriptor = os.open(path, os.O_RDONLY)
                try:
                    hashlib.sha256(own[: os.preadv(descriptor, [own], at)])
                finally:
                    os.close(descriptor)

        threads = [threading.Thread(target=loop) for _ in range(cores)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    speeds: list[float] = []

    def limit() -> None:
        # Not timed as it runs: its time is replaced below by bytes / (cores x speed).
        speeds.append(single_thread_speed())

    candidates = {
        "limit": limit,
        "hash_tensors": lambda: hash_tensors(FOLDER),
        "hash_tensors 256 KiB": lambda: with_piece(256 << 10),
        "hash_tensors 512 KiB": lambda: with_piece(512 << 10),
        "hash_tensors 8 MiB": lambda: with_piece(8 << 20),
        "hash_tensors files=True": lambda: hash_tensors(FOLDER, files=True),
        "hashlib.file_digest": file_digest,
        "read and hash, a thread a core": read_and_hash,
        "read the files": read_files,
    }
    try:
        import blake3  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        blake3 = None
        print("(the blake3 package is not installed: its candidates are left out)\n")
    else:
        piece = memoryview(bytearray(16 << 20))

        def blake3_package() -> None:
            for path in files:
                digest = blake3.blake3(max_threads=blake3.blake3.AUTO)
                with open(path, "rb", buffering=0) as file:
                    while count := file.readinto(piece):
                        digest.update(piece[:count])

        candidates["hash_tensors blake3"] = lambda: hash_tensors(FOLDER, algorithm="blake3")
        candidates["blake3 package, each file"] = blake3_package
    read_files()
    times, processor = timed(candidates, args.rounds)
    times["limit"] = [tensor_bytes / (cores * speed) for speed in speeds]
    times["limit, files=True"] = [(tensor_bytes + file_bytes) / (cores * s) for s in speeds]
    processor["limit"] = [tensor_bytes / speed for speed in speeds]
    processor["limit, files=True"] = [(tensor_bytes + file_bytes) / s for s in speeds]
    print(f"one thread's sha256: {min(speeds) / 1e9:.2f}-{max(speeds) / 1e9:.2f} GB/s\n")
    ratios = [
        ("limit", "hash_tensors", "0.85 or more (the fraction of the limit)"),
        ("limit", "hash_tensors 256 KiB", ""),
        ("limit", "hash_tensors 512 KiB", ""),
        ("limit", "hash_tensors 8 MiB", ""),
        ("limit, files=True", "hash_tensors files=True", "(each byte hashed twice)"),
        ("limit", "read and hash, a thread a core", "(what reading leaves of the limit)"),
        ("hash_tensors", "read the files", ""),
        ("hash_tensors", "hashlib.file_digest", "below 1"),
    ]
    if blake3 is not None:
        ratios += [
            ("hash_tensors blake3", "read the files", "1.3x or less"),
            ("blake3 package, each file", "read the files", ""),
        ]
    print("### wall time\n")
    table(times, ratios)
    print("### processor time (all threads)\n")
    table(processor, ratios)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
