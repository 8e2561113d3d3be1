"""Time the hostile inputs of tests/test_hostile.py, and big headers, against the reference.

    python benchmarks/bench_hostile.py

Each case is run a few times; the median time and the verdicts (ours and the reference's)
are printed. Then headers of 100,000 and 1,000,000 tensors (the ``compact`` files of
bench_read_header.py, written by the reference): the median time of `read_header` and of the
reference (`safe_open` + every dtype and shape), interleaved, and the peak RSS growth of one
call of each in a fresh process. Only the public API of `safetensors_header` is used.
"""

from __future__ import annotations

import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# This folder is on sys.path when the script runs.
from bench_read_header import CANDIDATES, measure, one_name, peak_rss_mib, write_file

from safetensors_header import HeaderError, read_header

ENTRY = '{"dtype":"U8","shape":[1],"data_offsets":[0,1]'


def frame(body: str | bytes, data: bytes = b"\0") -> bytes:
    raw = body.encode() if isinstance(body, str) else body
    return struct.pack("<Q", len(raw)) + raw + data


def shape(dims: str) -> str:
    return '{"a":{"dtype":"U8","shape":[' + dims + '],"data_offsets":[0,1]}}'


CASES: dict[str, Callable[[], bytes]] = {
    "length prefix 2^64-1": lambda: (2**64 - 1).to_bytes(8, "little") + b"{}",
    "5,000-deep nesting": lambda: frame('{"a":' + "[" * 5000 + "]" * 5000 + "}"),
    "200,000 open brackets": lambda: frame('{"a":' + "[" * 200_000),
    "100,000-digit integer": lambda: frame('{"a":' + ENTRY + ',"x":' + "9" * 100_000 + "}}"),
    "100,000-digit float": lambda: frame('{"a":' + ENTRY + ',"x":1' + "0" * 100_000 + ".5}}"),
    "100,000-digit dim": lambda: frame(shape("9" * 100_000)),
    "100,001 dims": lambda: frame(shape("1," * 100_000 + "1")),
    "40,000 dims of 2^64-1, then 0": lambda: frame(shape("18446744073709551615," * 40_000 + "0")),
    "100,000 lone surrogates": lambda: frame(
        '{"__metadata__":{"k":"' + "\\ud800" * 100_000 + '"}}'
    ),
    "100 MB of spaces": lambda: frame(b"{}" + b" " * (10**8 - 2), b""),
}


def verdict(run: Callable[[], object]) -> str:
    try:
        run()
    except HeaderError as error:
        return error.kind
    except Exception as error:  # the reference's own error type
        return type(error).__name__
    return "accepted"


def timed(run: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        verdict(run)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    try:
        import safetensors
    except ImportError:
        print("the safetensors package is not installed: pip install safetensors", file=sys.stderr)
        return 1
    deserialize: Any = safetensors.deserialize  # untyped in its stubs
    print(f"{'case':28} {'ours':>10} {'reference':>10}  verdict (ours / reference)")
    for name, make in CASES.items():
        data = make()

        def ours(data: bytes = data) -> object:
            return read_header(data)

        def theirs(data: bytes = data) -> object:
            return deserialize(data)

        print(
            f"{name:28} {timed(ours) * 1e3:8.1f}ms {timed(theirs) * 1e3:8.1f}ms  "
            f"{verdict(ours)} / {verdict(theirs)}"
        )
    print()
    print(f"{'tensors':>10} {'ours':>10} {'reference':>10} {'ours MiB':>9} {'ref MiB':>8}")
    with tempfile.TemporaryDirectory() as folder:
        for count in (100_000, 1_000_000):
            path = Path(folder) / f"{count}.safetensors"
            write_file(path, count, "compact")
            name = one_name(count)
            labels = ("read_header", "reference")
            medians = measure({label: CANDIDATES[label](path, name) for label in labels}, 3)
            peaks = [peak_rss_mib(label, path, name) for label in labels]
            print(
                f"{count:>10,} {medians['read_header'] * 1e3:8.0f}ms "
                f"{medians['reference'] * 1e3:8.0f}ms {peaks[0]:9.0f} {peaks[1]:8.0f}"
            )
            path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
