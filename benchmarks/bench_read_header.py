"""Time `read_header` against the reference and `json.loads`, interleaved, in one run.

    python benchmarks/bench_read_header.py                    # 10, 1,000 and 100,000 tensors
    python benchmarks/bench_read_header.py --sizes 1000000 --repeat 5   # the million (slow)
    python benchmarks/bench_read_header.py --no-memory        # skip the peak-RSS subprocesses
    python benchmarks/bench_read_header.py --processes 5      # 5 fresh processes: medians, ranges

Only the public API of `safetensors_header` is used, so the script measures any version of
the core alike.

**Files.** For each size (a number of tensors) two files of the same tensors are written:

* ``compact``: written by the reference itself, ``safetensors.serialize_file`` (compact JSON,
  ``__metadata__`` first, entries in the order of their data, which the reference sorts by
  dtype alignment then name, padded to 8 with spaces);
* ``json.dumps``: the same tensors written by ``json.dumps(header)`` with its default
  separators ``", "`` and ``": "``, the data laid out in checkpoint order but the entries
  shuffled (a fixed seed), so that the header is out of offset order; ``__metadata__`` first,
  padded to 8 with spaces.

The tensors are those of a Llama-like checkpoint: ``model.embed_tokens.weight``, then per
layer ``input_layernorm``, ``self_attn.{q,k,v,o}_proj``, ``post_attention_layernorm`` and
``mlp.{gate,up,down}_proj`` weights, then ``model.norm.weight`` and ``lm_head.weight``;
BF16 matrices and F32 norm vectors, each a few bytes (shapes like ``[4, 4]``), so the file is
mostly header; ``__metadata__`` is ``{"format": "pt"}``. Files of more than 500,000 tensors
get short names (``l.123.q``) so that the header stays under the reference's 10^8-byte
limit. Before timing, both readers are checked to agree on every name, dtype and shape.

**Candidates**, timed round-robin (every candidate called once per round, at least
``--repeat`` rounds and 2,000,000 / tensors up to 601 (so 601 at 10 and 1,000 tensors, 21 at
100,000), the collector run before each call and not timed; freeing the result is timed),
medians:

* ``read_header``: ``read_header(path)``, then every tensor's ``dtype``, ``shape`` and
  ``start`` read;
* ``reference``: ``with safetensors.safe_open(str(path), "np") as f``: ``f.metadata()``, then
  for every name of ``f.keys()`` (which the reference returns sorted) ``f.get_slice(name)``
  and its ``get_dtype()`` and ``get_shape()``: the same information;
* ``json.loads``: bare ``json.loads`` of the header bytes, already in memory (no file read,
  no validation, no objects of ours), called as a user would: the cyclic collector left on;
* ``one: read_header``: ``read_header(path).tensors[name]``, then its ``dtype``, ``shape``
  and ``start``, for one known name (the middle tensor of the checkpoint);
* ``one: reference``: ``with safe_open(str(path), "np") as f``: ``f.get_slice(name)``, its
  ``get_dtype()`` and ``get_shape()``, for the same name (no ``keys()``, which sorts every
  name; no ``metadata()``).

**Processes**: with ``--processes K`` the rounds run in K fresh processes, one after the
other, and the tables show the median of their medians, each ratio as the median of the K
processes' ratios with their range. A process's hash seed and memory layout move its ratios
by several percent (measured: the same code's one-tensor ratio at 1,000 tensors was 0.97x,
1.01x and 1.06x in three single-process runs), more than the rounds' medians move within one.

**Targets** (printed next to the ratios): ``read_header`` at most 1.0x the reference at 1,000
and 100,000 tensors and 1.3x at 10; one tensor at most 1.0x the reference's one tensor at
1,000 tensors and 1.3x at 100,000. The same targets are shown for both file styles.

**Peak memory**: for each candidate, the growth of the peak resident set size (VmHWM, Linux)
over one call, in a fresh subprocess per candidate, so that the reference's Rust-side
allocations count too.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import safetensors_header
from safetensors_header import read_header

#: One tensor: name, dtype as the header writes it, shape.
Tensor = tuple[str, str, tuple[int, ...]]
Candidate = Callable[[], object]

ITEM_SIZE = {"BF16": 2, "F32": 4}
TORCH_NAME = {"BF16": "bfloat16", "F32": "float32"}  # what safetensors.TensorSpec takes
MAX_HEADER = 10**8  # the reference's limit on N
SHORT_NAMES_ABOVE = 500_000
STYLES = ("compact", "json.dumps")

# Per layer: (long name, short name, dtype, shape), as in a Llama-like checkpoint.
LAYER: tuple[tuple[str, str, str, tuple[int, ...]], ...] = (
    ("input_layernorm.weight", "ln1", "F32", (4,)),
    ("self_attn.q_proj.weight", "q", "BF16", (4, 4)),
    ("self_attn.k_proj.weight", "k", "BF16", (2, 4)),
    ("self_attn.v_proj.weight", "v", "BF16", (2, 4)),
    ("self_attn.o_proj.weight", "o", "BF16", (4, 4)),
    ("post_attention_layernorm.weight", "ln2", "F32", (4,)),
    ("mlp.gate_proj.weight", "g", "BF16", (8, 4)),
    ("mlp.up_proj.weight", "u", "BF16", (8, 4)),
    ("mlp.down_proj.weight", "d", "BF16", (4, 8)),
)


def checkpoint_tensors(count: int) -> list[Tensor]:
    """`count` tensors named, typed and shaped like a transformer checkpoint's, in its order."""
    short = count > SHORT_NAMES_ABOVE
    embed: Tensor = ("emb" if short else "model.embed_tokens.weight", "BF16", (16, 4))
    tail: list[Tensor] = [
        ("norm" if short else "model.norm.weight", "F32", (4,)),
        ("head" if short else "lm_head.weight", "BF16", (16, 4)),
    ]
    body: list[Tensor] = [embed]
    layer = 0
    while len(body) < count - len(tail):
        for long_name, short_name, dtype, shape in LAYER:
            name = f"l.{layer}.{short_name}" if short else f"model.layers.{layer}.{long_name}"
            body.append((name, dtype, shape))
        layer += 1
    if count < 1 + len(tail):
        return (body + tail)[:count]
    return body[: count - len(tail)] + tail


def nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    """The size of a tensor's data in bytes."""
    size = ITEM_SIZE[dtype]
    for dim in shape:
        size *= dim
    return size


def write_compact(path: Path, tensors: list[Tensor]) -> None:
    """Write `tensors` (zeros) with the reference's own writer, ``safetensors.serialize_file``."""
    from safetensors import TensorSpec, serialize_file

    # Every tensor points at the same zeroed buffer: the reference copies what it needs.
    zeros = (ctypes.c_char * max(nbytes(dtype, shape) for _, dtype, shape in tensors))()
    pointer = ctypes.addressof(zeros)
    specs = {
        name: TensorSpec(
            dtype=TORCH_NAME[dtype], shape=shape, data_ptr=pointer, data_len=nbytes(dtype, shape)
        )
        for name, dtype, shape in tensors
    }
    serialize_file(specs, str(path), metadata={"format": "pt"})


def write_dumps_style(path: Path, tensors: list[Tensor], seed: int) -> None:
    """Write `tensors` with ``json.dumps`` defaults, entries shuffled, data in checkpoint order."""
    entries: list[tuple[str, dict[str, object]]] = []
    offset = 0
    for name, dtype, shape in tensors:
        end = offset + nbytes(dtype, shape)
        entries.append(
            (name, {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, end]})
        )
        offset = end
    random.Random(seed).shuffle(entries)
    header: dict[str, object] = {"__metadata__": {"format": "pt"}, **dict(entries)}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as file:
        file.write(len(text).to_bytes(8, "little"))
        file.write(text)
        file.write(bytes(offset))


def write_file(path: Path, count: int, style: str) -> int:
    """Write a file of `count` tensors in `style` (one of `STYLES`); return its N."""
    tensors = checkpoint_tensors(count)
    if style == "compact":
        write_compact(path, tensors)
    else:
        write_dumps_style(path, tensors, seed=count)
    with open(path, "rb") as file:
        size = int.from_bytes(file.read(8), "little")
    if size > MAX_HEADER:
        raise SystemExit(f"{count:,} tensors ({style}) make a header of {size:,} bytes: too big")
    return size


def one_name(count: int) -> str:
    """The tensor the one-tensor candidates look up: the middle one of the checkpoint."""
    return checkpoint_tensors(count)[count // 2][0]


def _safe_open() -> Any:
    from safetensors import safe_open

    return safe_open  # the stubs leave it untyped


def run_read_header(path: Path, name: str) -> Candidate:
    def run() -> object:
        header = read_header(path)
        for info in header.tensors.values():
            info.dtype, info.shape, info.start  # noqa: B018
        return header

    return run


def run_reference(path: Path, name: str) -> Candidate:
    safe_open = _safe_open()

    def run() -> object:
        with safe_open(str(path), "np") as file:
            metadata = file.metadata()
            for key in file.keys():  # noqa: SIM118 (safe_open is not a mapping)
                tensor = file.get_slice(key)
                tensor.get_dtype(), tensor.get_shape()
        return metadata

    return run


def run_json_loads(path: Path, name: str) -> Candidate:
    with open(path, "rb") as file:
        body = file.read(int.from_bytes(file.read(8), "little"))
    return lambda: json.loads(body)


def run_one_read_header(path: Path, name: str) -> Candidate:
    def run() -> object:
        info = read_header(path).tensors[name]
        info.dtype, info.shape, info.start  # noqa: B018
        return info

    return run


def run_one_reference(path: Path, name: str) -> Candidate:
    safe_open = _safe_open()

    def run() -> object:
        with safe_open(str(path), "np") as file:
            tensor = file.get_slice(name)
            return tensor.get_dtype(), tensor.get_shape()

    return run


#: Label -> factory(path, name of the one tensor) -> the call to time.
CANDIDATES: dict[str, Callable[[Path, str], Candidate]] = {
    "read_header": run_read_header,
    "reference": run_reference,
    "json.loads": run_json_loads,
    "one: read_header": run_one_read_header,
    "one: reference": run_one_reference,
}

#: (numerator, denominator, {tensors: target}) for the ratio table.
RATIOS: tuple[tuple[str, str, dict[int, float]], ...] = (
    ("read_header", "reference", {10: 1.3, 1_000: 1.0, 100_000: 1.0}),
    ("read_header", "json.loads", {}),
    ("one: read_header", "one: reference", {1_000: 1.0, 100_000: 1.3}),
)


def check_agree(path: Path, name: str) -> None:
    """Fail unless ours and the reference read the same names, dtypes and shapes."""
    header = read_header(path)
    ours = {t.name: (t.dtype, list(t.shape)) for t in header.tensors.values()}
    theirs = {}
    with _safe_open()(str(path), "np") as file:
        for key in file.keys():  # noqa: SIM118 (safe_open is not a mapping)
            tensor = file.get_slice(key)
            theirs[key] = (tensor.get_dtype(), tensor.get_shape())
    if ours != theirs or name not in ours:
        raise SystemExit(f"{path.name}: read_header and the reference disagree")


def measure(candidates: dict[str, Candidate], repeat: int) -> dict[str, float]:
    """The median time of each candidate in seconds, over `repeat` round-robin rounds.

    One call per candidate per round, the collector run (untimed) before each: every call
    starts from the same state, as one read in a program does, not from a hot loop.
    """
    times: dict[str, list[float]] = {label: [] for label in candidates}
    for run in candidates.values():  # warm up: imports, caches, page cache
        run()
    for _ in range(repeat):
        for label, run in candidates.items():
            gc.collect()
            start = time.perf_counter()
            result = run()
            del result  # freeing the result is part of the cost
            times[label].append(time.perf_counter() - start)
    return {label: statistics.median(values) for label, values in times.items()}


_MEASURE_PROBE = """
import json, sys
sys.path.insert(0, {folder!r})
from pathlib import Path
import bench_read_header as bench
path, name = Path({path!r}), {name!r}
candidates = {{label: make(path, name) for label, make in bench.CANDIDATES.items()}}
print(json.dumps(bench.measure(candidates, {repeat!r})))
"""


def measure_in_processes(
    path: Path, name: str, repeat: int, processes: int
) -> list[dict[str, float]]:
    """`measure` in `processes` fresh processes, one after the other: each its own hash seed
    and memory layout, which move a process's ratios by several percent (measured)."""
    return [
        json.loads(run_probe(_MEASURE_PROBE, path=str(path), name=name, repeat=repeat))
        for _ in range(processes)
    ]


def run_probe(template: str, **fields: object) -> str:
    """Run a probe's code (`template` filled with `fields` and this folder) in a fresh
    process; what it printed."""
    code = template.format(folder=str(Path(__file__).resolve().parent), **fields)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout


_RSS_PROBE = """
import sys
sys.path.insert(0, {folder!r})
from pathlib import Path
import bench_read_header as bench
run = bench.CANDIDATES[{label!r}](Path({path!r}), {name!r})
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


def peak_rss_mib(label: str, path: Path, name: str) -> float:
    """Peak RSS growth over one call of candidate `label`, in a fresh process, in MiB."""
    return int(run_probe(_RSS_PROBE, label=label, path=str(path), name=name)) / 1024


def milliseconds(seconds: float) -> str:
    """Three significant figures or so, in ms."""
    ms = seconds * 1e3
    for limit, digits in ((100, 0), (10, 1), (1, 2)):
        if ms >= limit:
            return f"{ms:,.{digits}f}"
    return f"{ms:.3f}"


def verdict(ratio: float, target: float | None) -> str:
    if target is None:
        return "-"
    return f"<= {target:.1f}x: {'met' if ratio <= target else 'NOT met'}"


def row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def rounds(count: int, repeat: int) -> int:
    """Rounds for headers of `count` tensors: `repeat`, or more for small ones, whose calls
    vary by a third from one to the next (601 rounds at 10 and at 1,000 tensors)."""
    return max(repeat, min(601, 2_000_000 // count))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="10,1000,100000", help="tensor counts, comma-separated")
    parser.add_argument(
        "--repeat",
        type=int,
        default=21,
        help="round-robin rounds at least (default 21; small headers get more, see rounds())",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-RSS probes")
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="measure in this many fresh processes, one after the other, and print the "
        "median of their medians and of their ratios, with the ratios' range (default 1: "
        "in this process)",
    )
    args = parser.parse_args()
    try:
        import safetensors
    except ImportError:
        print("the safetensors package is not installed: pip install safetensors", file=sys.stderr)
        return 1
    sizes = [int(size) for size in args.sizes.split(",")]
    print(
        f"Python {sys.version.split()[0]}, safetensors {safetensors.__version__}, "
        f"safetensors_header {safetensors_header.__version__} from "
        f"{Path(safetensors_header.__file__ or '?').parent}, {os.cpu_count()} cores"
    )
    plan = ", ".join(f"{rounds(count, args.repeat)} at {count:,}" for count in sizes)
    where = f" in each of {args.processes} processes" if args.processes > 1 else ""
    print(f"medians of interleaved rounds ({plan} tensors){where}, times in ms")
    print()
    results: list[tuple[int, str, int, list[dict[str, float]], list[float]]] = []
    started, load_at_start = time.perf_counter(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        for count in sizes:
            name = one_name(count)
            for style in STYLES:
                path = Path(folder) / f"{count}-{style}.safetensors"
                size = write_file(path, count, style)
                check_agree(path, name)
                if args.processes > 1:
                    runs = measure_in_processes(
                        path, name, rounds(count, args.repeat), args.processes
                    )
                else:
                    candidates = {label: make(path, name) for label, make in CANDIDATES.items()}
                    runs = [measure(candidates, rounds(count, args.repeat))]
                    del candidates  # the json.loads candidate holds the header bytes
                peaks = [] if args.no_memory else [peak_rss_mib(c, path, name) for c in CANDIDATES]
                results.append((count, style, size, runs, peaks))
                path.unlink()

    labels = list(CANDIDATES)
    head = ["tensors", "file", "N (bytes)", *labels]
    if not args.no_memory:
        head.append("peak RSS MiB (" + " / ".join(labels) + ")")
    print(row(head))
    print(row(["---:", "---"] + ["---:"] * (1 + len(labels)) + ["---"] * (not args.no_memory)))
    for count, style, size, runs, peaks in results:
        medians = {c: statistics.median(run[c] for run in runs) for c in labels}
        cells = [f"{count:,}", style, f"{size:,}", *(milliseconds(medians[c]) for c in labels)]
        if peaks:
            cells.append(" / ".join(f"{peak:.1f}" for peak in peaks))
        print(row(cells))
    print()
    head = ["tensors", "file"]
    for top, bottom, _ in RATIOS:
        head += [f"{top} / {bottom}", "target"] if _ else [f"{top} / {bottom}"]
    print(row(head))
    print(row(["---:", "---"] + ["---:" if "/" in cell else "---" for cell in head[2:]]))
    for count, style, _size, runs, _peaks in results:
        cells = [f"{count:,}", style]
        for top, bottom, targets in RATIOS:
            ratios = [run[top] / run[bottom] for run in runs]
            ratio = statistics.median(ratios)
            spread = f" ({min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else ""
            cells.append(f"{ratio:.2f}x{spread}")
            if targets:
                cells.append(verdict(ratio, targets.get(count)))
        print(row(cells))
    print()
    print(
        f"({time.perf_counter() - started:.0f} s; 1-minute load average "
        f"{load_at_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
