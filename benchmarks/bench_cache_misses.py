"""Count what one small read touches from beyond the core's caches (valgrind's cachegrind).

    python benchmarks/bench_cache_misses.py [--tensors 10] [--rounds 300] [--l2 1048576]

Why: ``bench_read_header.py`` runs the collector before every call, and a collection walks
every object of the process, which pushes the caller's code and data out of the core's caches.
A small header's read then costs mostly what it has to fetch back: the interpreter's machine
code for each kind of bytecode and C function it runs, and the code objects, constants and
dicts of each Python function it calls. This script counts that, instead of timing it, so the
count does not move with the machine's speed or load.

Each candidate runs in its own process under ``valgrind --tool=cachegrind`` with the
benchmark's sequence per round: the reference's one-tensor read, a collection, then the
candidate (``read_header`` then every tensor's dtype, shape and start; or the reference
getting the same). A third process runs the rounds without a candidate, and its counts are
subtracted: what is left is per call. The simulated last level is the size of one core's L2
(``--l2``, 1 MiB by default), so its misses are the lines a call fetches from beyond L2.

Needs valgrind (``cachegrind``, ``cg_annotate``) and the reference (``safetensors``). It
prints, per call: instructions, first-level misses (instructions, data) and misses beyond L2
(instructions, data), for ours and the reference, and the ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import bench_read_header as bench

_PROBE = """
import gc, sys
sys.path.insert(0, {folder!r})
from pathlib import Path
import bench_read_header as bench
path, which = Path({path!r}), {which!r}
candidates = {{label: make(path, {name!r}) for label, make in bench.CANDIDATES.items()}}
for run in candidates.values():
    run()
before, run = candidates["one: reference"], candidates.get(which)
for _ in range({rounds!r}):
    before()
    gc.collect()
    if run is not None:
        run()
"""

#: What is printed, from cachegrind's events: instructions, first-level misses, misses beyond
#: the last level simulated (reads and writes together for data).
_EVENTS = {
    "instructions": ("Ir",),
    "L1 instruction misses": ("I1mr",),
    "L1 data misses": ("D1mr", "D1mw"),
    "instruction lines from beyond L2": ("ILmr",),
    "data lines from beyond L2": ("DLmr", "DLmw"),
}


def cachegrind(code: str, l2: int, folder: Path) -> dict[str, int]:
    """cachegrind's totals for ``python -c code`` (the real interpreter, not a shim)."""
    out = folder / "cachegrind.out"
    subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=yes",
            "--I1=32768,8,64",
            "--D1=32768,8,64",
            f"--LL={l2},8,64",
            f"--cachegrind-out-file={out}",
            os.path.realpath(sys.executable),
            "-c",
            code,
        ],
        capture_output=True,
        check=True,
        # One hash seed for all runs: the seed changes how much work startup and the
        # collections do, which the subtraction would otherwise count as the call's.
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    lines = out.read_text().splitlines()
    names = next(line for line in lines if line.startswith("events:")).split()[1:]
    values = next(line for line in lines if line.startswith("summary:")).split()[1:]
    totals = dict(zip(names, map(int, values), strict=True))
    return {label: sum(totals[name] for name in parts) for label, parts in _EVENTS.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tensors", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--l2", type=int, default=2**20, help="bytes of the simulated L2")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each; medians shown")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (cachegrind)")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        path = folder / f"{args.tensors}_compact.safetensors"
        bench.write_compact(path, bench.checkpoint_tensors(args.tensors))
        fields = {
            "folder": str(Path(__file__).resolve().parent),
            "path": str(path),
            "name": bench.one_name(args.tensors),
            "rounds": args.rounds,
        }
        runs: dict[str, list[dict[str, int]]] = {"none": [], "read_header": [], "reference": []}
        for _ in range(args.repeats):  # the counts move from run to run (the collections vary)
            for which, totals in runs.items():
                totals.append(cachegrind(_PROBE.format(which=which, **fields), args.l2, folder))
    # Each candidate's run minus the run without a call, per call, for each repeat.
    per_call = {
        which: {
            event: sorted(
                (run[event] - base[event]) / args.rounds
                for run, base in zip(runs[which], runs["none"], strict=True)
            )
            for event in _EVENTS
        }
        for which in ("read_header", "reference")
    }
    print(
        f"Python {sys.version.split()[0]}; {args.tensors} compact tensors, {args.rounds} rounds;"
        f" per call, the rounds without a call subtracted; L2 simulated at {args.l2:,} bytes;"
        f" medians of {args.repeats} runs (their range)"
    )
    print("| per call | read_header | reference | ratio |")
    print("| --- | ---: | ---: | ---: |")
    ours, theirs = per_call["read_header"], per_call["reference"]
    for event in _EVENTS:
        mine, reference = statistics.median(ours[event]), statistics.median(theirs[event])
        ratio = f"{mine / reference:.2f}x" if reference > 0 else "-"
        print(f"| {event} | {_spread(ours[event])} | {_spread(theirs[event])} | {ratio} |")


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({values[0]:,.0f}-{values[-1]:,.0f})"


if __name__ == "__main__":
    main()
