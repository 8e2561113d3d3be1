"""Time the hostile inputs of tests/test_hostile.py, and big headers, against the reference.

    python benchmarks/bench_hostile.py

Each case is run a few times; the median time and the verdicts (ours and the reference's)
are printed. Then headers of 100,000 and 1,000,000 tensors: the median time of `read_header`
and of the reference (`safe_open` + every dtype and shape), interleaved, and the peak RSS
growth of one call of each in a fresh process.
"""

from __future__ import annotations

import statistics
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# This folder is on sys.path when the script runs.
from bench_read_header import measure, ours, peak_rss_mib, reference, write_checkpoint

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
        from safetensors import deserialize
    except ImportError:
        deserialize = None
    print(f"{'case':28} {'ours':>10} {'reference':>10}  verdict (ours / reference)")
    for name, make in CASES.items():
        data = make()
        mine = timed(lambda data=data: read_header(data))
        ref = timed(lambda data=data: deserialize(data)) if deserialize else float("nan")
        theirs = verdict(lambda data=data: deserialize(data)) if deserialize else "-"
        print(
            f"{name:28} {mine * 1e3:8.1f}ms {ref * 1e3:8.1f}ms  "
            f"{verdict(lambda data=data: read_header(data))} / {theirs}"
        )
    print()
    print(f"{'tensors':>10} {'ours':>10} {'reference':>10} {'ours MiB':>9} {'ref MiB':>8}")
    with tempfile.TemporaryDirectory() as folder:
        for count in (100_000, 1_000_000):
            path = Path(folder) / f"{count}.safetensors"
            write_checkpoint(path, count)
            medians = measure({"ours": ours(path), "reference": reference(path)}, repeat=3)
            print(
                f"{count:>10,} {medians['ours'] * 1e3:8.0f}ms {medians['reference'] * 1e3:8.0f}ms "
                f"{peak_rss_mib('ours', path):9.0f} {peak_rss_mib('reference', path):8.0f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
