"""A rank's share over loopback HTTP against the whole checkpoint, in numpy and torch: seconds
and peak memory, each load in a fresh process.

    PYTHONPATH=$PWD python benchmarks/bench_rank.py [--size 1500] [--rounds 5] [--rank 3]

The checkpoint is bench_load.py's Llama-like 2-shard one (F16 matrices of hidden size 1024, 16
heads, F32 norms; ``--size`` MB), with a config.json beside it (``model_type`` llama, 16 heads
and 16 KV heads), served by nginx from the system's packages (a threaded Python server
otherwise; the output says which). Candidates, each once a round in an order that rotates,
each in a fresh interpreter (so that its peak memory is its own):

* ``numpy rank``: ``safetensors_header.numpy.load_rank(index URL, rank, 8)``;
* ``numpy whole``: ``read_checkpoint(index URL)`` then ``numpy.load`` of every shard;
* ``torch rank`` and ``torch whole``: the same with ``safetensors_header.torch``.

Each child times its load alone (after its imports), and reports the bytes it returns and the
growth of its peak resident memory over the load (``VmHWM`` after, less ``VmRSS`` before).
Ratios are per round (the rank's seconds over the whole checkpoint's of the same round).

Targets (issue 51): the rank at most 0.6x the whole checkpoint's seconds, in numpy and torch;
its peak memory growth at most 1.3x the bytes it returns.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_load import INDEX, http_server, make_checkpoint

_CHILD = """
import sys, time
kind, how, url = sys.argv[1:4]
rank, world = int(sys.argv[4]), int(sys.argv[5])

def status(field):
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

from safetensors_header import read_checkpoint
if kind == "numpy":
    from safetensors_header.numpy import load, load_rank
    size = lambda value: value.nbytes
else:
    import torch
    from safetensors_header.torch import load, load_rank
    size = lambda value: value.numel() * value.element_size()
before = status("VmRSS")
started = time.perf_counter()
if how == "rank":
    tensors = load_rank(url, rank, world)
else:
    tensors = {}
    for shard in read_checkpoint(url).shards.values():
        tensors.update(load(shard))
seconds = time.perf_counter() - started
print(seconds, sum(size(value) for value in tensors.values()), status("VmHWM") - before)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size", type=int, default=1500, help="checkpoint MB")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rank", type=int, default=3)
    parser.add_argument("--world", type=int, default=8)
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "safetensors_header_rank"
    )
    parser.add_argument("--kinds", default="numpy,torch")
    args = parser.parse_args()
    folder = args.cache / f"checkpoint-{args.size}"
    make_checkpoint(folder, args.size)
    config = {
        "model_type": "llama",
        "hidden_size": 1024,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "config.json").chmod(0o644)
    kinds = args.kinds.split(",")
    names = [f"{kind} {how}" for kind in kinds for how in ("rank", "whole")]
    runs: dict[str, list[tuple[float, int, int]]] = {name: [] for name in names}
    with http_server(folder) as (base, server):
        url = f"{base}/{INDEX}"
        print(f"Python {sys.version.split()[0]}, {server}, rank {args.rank} of {args.world}\n")
        for round_ in range(args.rounds):
            order = names[round_ % len(names) :] + names[: round_ % len(names)]
            for name in order:
                kind, how = name.split()
                done = subprocess.run(
                    [sys.executable, "-c", _CHILD, kind, how, url, str(args.rank), str(args.world)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                seconds, returned, peak = done.stdout.split()
                runs[name].append((float(seconds), int(returned), int(peak)))
    print("| candidate | median s | min s | max s | bytes returned | peak growth | / returned |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, found in runs.items():
        times = [seconds for seconds, _, _ in found]
        returned = found[0][1]
        peak = max(growth for _, _, growth in found)
        print(
            f"| {name} | {statistics.median(times):.3f} | {min(times):.3f} | {max(times):.3f} "
            f"| {returned:,} | {peak:,} | {peak / returned:.2f}x |"
        )
    print()
    print("| ratio | median | range | target |")
    print("|---|---:|---|---|")
    for kind in kinds:
        ratios = [
            rank[0] / whole[0]
            for rank, whole in zip(runs[f"{kind} rank"], runs[f"{kind} whole"], strict=True)
        ]
        print(
            f"| {kind} rank / {kind} whole | {statistics.median(ratios):.2f}x "
            f"| {min(ratios):.2f}-{max(ratios):.2f} | at most 0.6x |"
        )


if __name__ == "__main__":
    main()
