"""Mutation fuzzing of `safetensors_header.awkward.from_safetensors` on hostile awkward files.

    python fuzz/fuzz_awkward.py --runs 100000 --workers 2

Seeds are awkward's own files (`to_safetensors` of arrays of every node kind: lists of both
kinds, regular, option types of four kinds, unions, records, strings, nested); each run
mutates one of them: 1 to 3 values of its index buffers (offsets, starts, stops, index,
tags, masks) set to a boundary (0, -1, the content's length and one past it, 2**31 - 1,
2**62, 2**63 - 1, a random value), or its form (an index dtype swapped, a node's class or
a form key changed, a union's contents dropped), or its length. Each mutant is read eagerly
and with ``virtual=True``; whatever loads is then read whole (``ak.to_list``), reduced
(``ak.sum`` over the last axis and over everything, where awkward can reduce the type) and
checked with ``ak.validity_error``.

A run fails when anything but `AwkwardFileError` or `HeaderError` escapes the read or the
reads of what loaded (or awkward's `TypeError` for a form that is not canonical, which
``allow_noncanonical_form=True`` then reads or refuses as the file's), when awkward finds a
loaded array invalid, or when the process dies
(awkward's kernels reading outside a buffer: a segfault). The mutants run in child
processes, so that a crash is seen and its input kept (``--crashes``, default
``fuzz/crashes/awkward``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np

from safetensors_header import HeaderError, read_header
from safetensors_header.awkward import AwkwardFileError, from_safetensors, to_safetensors

INTERESTING = [0, 1, -1, 2, 3, 2**31 - 1, -(2**31), 2**32 - 1, 2**62, 2**63 - 1, -(2**63)]
INDEX_ATTRIBUTES = ("offsets", "starts", "stops", "index", "tags", "mask")


def seeds() -> list[bytes]:
    """awkward's files of arrays of every kind of node."""
    arrays = [
        ak.Array([[1, 2, 3], [], [4, 5]]),
        ak.Array([[[1.5], []], [[2.5, 3.5]]]),
        ak.Array(["one", "two", "", "three"]),
        ak.Array([1, None, 3, None]),
        ak.Array([[1, 2], None, [3]]),
        ak.Array([{"x": 1, "y": [1, 2]}, {"x": 2, "y": []}]),
        ak.Array([1, "two", [3.0], {"x": 4}]),
        ak.Array([[{"a": 1.0}, None], [{"a": 2.0}]]),
        ak.to_regular(ak.Array([[1, 2], [3, 4], [5, 6]]), axis=1),
        ak.Array(
            ak.contents.ListArray(
                ak.index.Index64(np.array([0, 3, 1])),
                ak.index.Index64(np.array([2, 5, 1])),
                ak.contents.NumpyArray(np.arange(6, dtype=np.int32)),
            )
        ),
        ak.Array(
            ak.contents.IndexedArray(
                ak.index.Index64(np.array([2, 0, 1, 2])),
                ak.contents.NumpyArray(np.array([1.0, 2.0, 3.0])),
            )
        ),
        ak.Array(
            ak.contents.ByteMaskedArray(
                ak.index.Index8(np.array([1, 0, 1], dtype=np.int8)),
                ak.contents.NumpyArray(np.array([1, 2, 3])),
                valid_when=True,
            )
        ),
        ak.Array(
            ak.contents.BitMaskedArray(
                ak.index.IndexU8(np.array([5], dtype=np.uint8)),
                ak.contents.NumpyArray(np.array([1, 2, 3])),
                valid_when=True,
                length=3,
                lsb_order=True,
            )
        ),
        ak.Array([[1, None], [None, [2, 3]], []]),
    ]
    out = []
    for array in arrays:
        buffer = io.BytesIO()
        to_safetensors(array, buffer)
        out.append(buffer.getvalue())
    return out


def mutate(data: bytes, rng: random.Random) -> bytes:
    header = read_header(data)
    metadata = dict(header.metadata or {})
    choice = rng.random()
    if choice < 0.7:  # index values
        indexes = [
            info
            for name, info in header.tensors.items()
            if name.rsplit("-", 1)[-1] in INDEX_ATTRIBUTES and info.nbytes
        ]
        if indexes:
            out = bytearray(data)
            for _ in range(rng.randint(1, 3)):
                info = rng.choice(indexes)
                width = {"I8": 1, "U8": 1, "I32": 4, "U32": 4, "I64": 8}.get(info.dtype, 8)
                count = info.nbytes // width
                at = info.start + width * rng.randrange(count)
                value = rng.choice([*INTERESTING, count, count + 1, rng.randint(-99, 99)])
                out[at : at + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
            return bytes(out)
    form = json.loads(metadata.get("form", "{}"))
    if choice < 0.9 and form:  # the form
        nodes: list[dict[str, Any]] = []

        def gather(node: Any) -> None:
            if isinstance(node, dict):
                nodes.append(node)
                for value in node.values():
                    gather(value)
            elif isinstance(node, list):
                for value in node:
                    gather(value)

        gather(form)
        node = rng.choice(nodes)
        what = rng.randrange(4)
        if what == 0:
            for key in ("offsets", "starts", "stops", "index", "tags", "mask"):
                if key in node:
                    node[key] = rng.choice(["i8", "u8", "i32", "u32", "i64", "f64", "bool"])
        elif what == 1 and "class" in node:
            node["class"] = rng.choice(
                [
                    "ListOffsetArray",
                    "ListArray",
                    "IndexedArray",
                    "IndexedOptionArray",
                    "ByteMaskedArray",
                    "BitMaskedArray",
                    "UnionArray",
                    "RegularArray",
                    "NumpyArray",
                    "RecordArray",
                    "EmptyArray",
                    "UnmaskedArray",
                ]
            )
        elif what == 2 and "contents" in node and isinstance(node["contents"], list):
            node["contents"] = node["contents"][: rng.randrange(len(node["contents"]) + 1)]
        elif "form_key" in node:
            node["form_key"] = rng.choice(["node0", "node1", "node2", None, "x"])
        metadata["form"] = json.dumps(form)
    else:  # the length
        length = int(metadata.get("length", "0"))
        metadata["length"] = str(rng.choice([0, length + 1, max(length - 1, 0), 2**40]))
    # The same tensors at the same offsets, under the new metadata.
    entries: dict[str, Any] = {"__metadata__": metadata}
    for name, info in header.tensors.items():
        entries[name] = {
            "dtype": info.dtype,
            "shape": list(info.shape),
            "data_offsets": list(info.data_offsets),
        }
    text = json.dumps(entries, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[header.data_start :]


def exercise(data: bytes) -> tuple[str | None, int]:
    """Read `data` both ways and use what loads: a problem's description (else None), and
    how many of the two reads loaded an array that was then read whole."""
    loaded = 0
    for virtual in (False, True):
        try:
            array = from_safetensors(data, virtual=virtual)
        except (AwkwardFileError, HeaderError):
            continue
        except TypeError:
            # awkward's own refusal of a form that is not canonical, which the caller may
            # lift: allowed where lifting it loads the file or refuses it as the file's.
            try:
                array = from_safetensors(data, virtual=virtual, allow_noncanonical_form=True)
            except (AwkwardFileError, HeaderError):
                continue
            except Exception:
                return (
                    f"from_safetensors(virtual={virtual}, allow_noncanonical_form=True) "
                    f"raised:\n{traceback.format_exc()}",
                    0,
                )
        except Exception:
            return f"from_safetensors(virtual={virtual}) raised:\n{traceback.format_exc()}", 0
        try:
            ak.to_list(array)
            problem = ak.validity_error(array)
        except (AwkwardFileError, HeaderError):
            continue  # a virtual buffer's check, when it was read
        except Exception:
            return f"reading what loaded (virtual={virtual}) raised:\n{traceback.format_exc()}", 0
        if problem:
            return f"awkward finds what loaded (virtual={virtual}) invalid: {problem}", 0
        loaded += 1
        for axis in (-1, None):
            # A type awkward cannot sum (strings, records, unions) is not ours to judge.
            with contextlib.suppress(TypeError, ValueError, NotImplementedError):
                ak.sum(array, axis=axis)
    return None, loaded


def work(arguments: tuple[int, int, str]) -> tuple[int, int, list[str]]:
    """`runs` mutants from `seed`; (runs done, reads that loaded an array, problems found)."""
    seed, runs, crashes = arguments
    rng = random.Random(seed)
    bases = seeds()
    problems = []
    loaded = 0
    for run in range(runs):
        data = mutate(rng.choice(bases), rng)
        path = Path(crashes) / f"current-{seed}.safetensors"
        path.write_bytes(data)  # kept if the process dies on it
        problem, count = exercise(data)
        loaded += count
        if problem is not None:
            kept = Path(crashes) / f"problem-{seed}-{run}.safetensors"
            kept.write_bytes(data)
            problems.append(f"{kept}: {problem}")
    (Path(crashes) / f"current-{seed}.safetensors").unlink(missing_ok=True)
    return runs, loaded, problems


def batch(seed: int, runs: int, crashes: str) -> tuple[int, int, list[str]]:
    """One batch in a child process of its own: a crash kills it, and is seen (its exit
    status), not a hang."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(seed), str(runs), crashes],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return (
            0,
            0,
            [
                f"batch {seed}: the child ended with status {done.returncode} (a negative status "
                f"is a signal: a crash); its input: {crashes}/current-{seed}.safetensors\n"
                f"{done.stderr[-2000:]}"
            ],
        )
    runs_done, loaded, problems = json.loads(done.stdout)
    return runs_done, loaded, problems


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        seed, runs, crashes = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
        print(json.dumps(work((seed, runs, crashes))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--batch", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--crashes", default="fuzz/crashes/awkward")
    args = parser.parse_args()
    Path(args.crashes).mkdir(parents=True, exist_ok=True)
    batches = [
        (args.seed + number, min(args.batch, args.runs - start), args.crashes)
        for number, start in enumerate(range(0, args.runs, args.batch))
    ]
    started = time.monotonic()
    done = loaded = 0
    problems: list[str] = []
    with ThreadPoolExecutor(args.workers) as pool:
        for runs, ok, found in pool.map(lambda arguments: batch(*arguments), batches):
            done += runs
            loaded += ok
            problems += found
    elapsed = time.monotonic() - started
    print(
        f"{done:,} mutants in {elapsed:,.0f} s ({done / elapsed:,.0f}/s), "
        f"{loaded:,} of their {2 * done:,} reads (eager and virtual) loaded an array, read "
        "whole and valid; the others refused with AwkwardFileError or HeaderError; "
        f"{len(problems)} problems"
    )
    for problem in problems[:20]:
        print(problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
