"""Reading a checkpoint of many local shards: ``read_checkpoint`` against a plain loop of the
reference's ``safe_open`` over the shards, interleaved in one run; ratios printed with their
range.

    PYTHONPATH=$PWD python benchmarks/bench_checkpoint.py [--shards 10,100,1000] [--rounds 9]

The checkpoints: 10, 100 and 1,000 shards of 100 tensors each (Llama-like names, F16
matrices of 16 x 16 and F32 norm vectors: files that are mostly header), written by the
reference with an index, kept in ``--cache`` between runs. The page cache is warm (each
candidate runs once, untimed, before the rounds).

Candidates, each called once a round in an order that rotates (the cyclic collector run,
untimed, before each call):

* ``read_checkpoint``: ``read_checkpoint(folder)``: the index read, every shard's header
  read and checked against it (every tensor in the shard the index says, none in two
  shards, the total size), every shard opened for its data later;
* ``safe_open loop``: ``json.load`` of the index, then ``safe_open(shard, "np")`` of every
  shard and its ``keys()``, gathered into a map of tensor name to shard: what a loader
  that trusts the index does before reading its tensors (no cross-check);
* ``without the cross-check``: ``read_checkpoint`` with its check of the shards against the
  index replaced by nothing (an ablation, not a mode of the package): what that check costs
  in place, where the index and the shards' names are no longer in the processor's caches.

Printed: the median wall time of each, the median of the per-round ratios to the loop with
their range, and the same ratio of processor time (user and system: steadier than wall time
on a shared machine). Target (issue 39): ``read_checkpoint`` at most 1.0x the loop at 100 and
1,000 shards.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

import safetensors_header
from safetensors_header import DTYPE_BITS, _checkpoint, read_checkpoint

INDEX = "model.safetensors.index.json"
TENSORS = 100  # a shard's


def make_checkpoint(folder: Path, shards: int) -> Path:
    """`shards` shards of `TENSORS` tensors each, with their index (kept if there)."""
    stamp = folder / "made"
    if stamp.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    matrix = np.ones((16, 16), np.float16)
    norm = np.ones(16, np.float32)
    weight_map = {}
    total = 0
    for shard in range(shards):
        name = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        tensors = {}
        for i in range(TENSORS):
            at = f"model.layers.{shard}.block.{i // 10}."
            kind = (
                "q_proj",
                "k_proj",
                "v_proj",
                "o_proj",
                "gate_proj",
                "up_proj",
                "down_proj",
                "input_layernorm",
                "post_attention_layernorm",
                "extra",
            )[i % 10]
            tensors[f"{at}{kind}.weight"] = norm if "norm" in kind else matrix
        save_file(tensors, str(folder / name), metadata={"format": "pt"})
        total += sum(array.nbytes for array in tensors.values())
        weight_map |= dict.fromkeys(tensors, name)
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / INDEX).write_text(json.dumps(index, indent=2))
    stamp.touch()
    return folder


def safe_open_loop(folder: Path) -> dict[str, str]:
    with open(folder / INDEX, "rb") as file:
        weight_map = json.load(file)["weight_map"]
    where = {}
    for shard in dict.fromkeys(weight_map.values()):
        with safe_open(str(folder / shard), "np") as opened:
            where |= dict.fromkeys(opened.keys(), shard)
    return where


def cross_checked_loop(folder: Path) -> dict[str, str]:
    """The `safe_open` loop making the checks `read_checkpoint` makes: every tensor of a shard
    is in it by the index, none is in two shards, every tensor of the index is found, and the
    index's ``total_size`` (when it has one) is the tensors' bytes."""
    with open(folder / INDEX, "rb") as file:
        index = json.load(file)
    weight_map = index["weight_map"]
    where: dict[str, str] = {}
    total = 0
    for shard in dict.fromkeys(weight_map.values()):
        with safe_open(str(folder / shard), "np") as opened:
            for name in opened.keys():  # noqa: SIM118 - a safe_open handle, not a dict
                if weight_map.get(name) != shard or name in where:
                    raise ValueError(f"{name} is not where the index says")
                where[name] = shard
                piece = opened.get_slice(name)
                count = 1
                for size in piece.get_shape():
                    count *= size
                total += count * DTYPE_BITS[piece.get_dtype()] // 8
    if len(where) != len(weight_map):
        raise ValueError("a tensor of the index is in no shard")
    expected = (index.get("metadata") or {}).get("total_size")
    if expected is not None and expected != total:
        raise ValueError("total_size")
    return where


def without_cross_check(folder: Path) -> object:
    """`read_checkpoint` with the shards' check against the index skipped (the ablation)."""
    check = _checkpoint._check_against_shards

    def nothing(files: dict[str, Any], weight_map: dict[str, str], _: object) -> object:
        return _checkpoint._ShardTensors(weight_map, files), []

    _checkpoint._check_against_shards = nothing  # type: ignore[assignment]
    try:
        return read_checkpoint(folder)
    finally:
        _checkpoint._check_against_shards = check


def timed(
    candidates: dict[str, Callable[[], object]], rounds: int
) -> dict[str, list[tuple[float, float]]]:
    """Each candidate's (wall, processor) seconds a call, a call a round, in turn."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in candidates}
    names = list(candidates)
    for name in names:  # warm: the page cache, the imports
        candidates[name]()
    for round_ in range(rounds):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            gc.collect()
            wall, cpu = time.perf_counter(), time.process_time()
            result = candidates[name]()
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
            del result
    return times


def ratio(ours: list[float], theirs: list[float]) -> str:
    """The median of the per-round ratios, and their range."""
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", default="10,100,1000")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "safetensors_header_bench_checkpoint",
    )
    args = parser.parse_args()
    print(f"safetensors_header {safetensors_header.__version__} from {safetensors_header.__file__}")
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f}; {args.rounds} rounds\n"
    )
    print("| shards | candidate | ms | ratio to the loop (median, range) | processor time ratio |")
    print("|---:|---|---:|---:|---:|")
    against: list[str] = []
    for shards in map(int, args.shards.split(",")):
        folder = make_checkpoint(args.cache / f"shards-{shards}", shards)
        checkpoint = read_checkpoint(folder)
        assert dict(checkpoint.weight_map) == safe_open_loop(folder) == cross_checked_loop(folder)
        times = timed(
            {
                "read_checkpoint": lambda folder=folder: read_checkpoint(folder),
                "without the cross-check": lambda folder=folder: without_cross_check(folder),
                "safe_open loop": lambda folder=folder: safe_open_loop(folder),
                "safe_open loop, cross-checked": lambda folder=folder: cross_checked_loop(folder),
            },
            args.rounds,
        )
        loop = times["safe_open loop"]
        for name, ours in times.items():
            walls = [wall for wall, _ in ours], [wall for wall, _ in loop]
            cpus = [cpu for _, cpu in ours], [cpu for _, cpu in loop]
            print(
                f"| {shards:,} | {name} | {statistics.median(walls[0]) * 1e3:.2f} | "
                f"{ratio(*walls)} | {ratio(*cpus)} |",
                flush=True,
            )
        checked = times["safe_open loop, cross-checked"]
        mine = times["read_checkpoint"]
        walls = [wall for wall, _ in mine], [wall for wall, _ in checked]
        cpus = [cpu for _, cpu in mine], [cpu for _, cpu in checked]
        against.append(f"{shards:,} shards: {ratio(*walls)} (processor time {ratio(*cpus)})")
    print("\nread_checkpoint / the cross-checked safe_open loop: " + "; ".join(against))
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
