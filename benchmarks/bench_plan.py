"""Read plans and content hashes on a ~1 GB checkpoint: what a rank reads, and how fast.

    PYTHONPATH=$PWD python benchmarks/bench_plan.py [--size 1000] [--rounds 5]

* ``plan``: planning alone, on a Llama-3-70B-shaped checkpoint (80 layers, BF16, 141 GB in
  28 shards of at most 5 GiB, sparse files: only the headers are written): each of the 8
  ranks' ``plan_reads(checkpoint, split_tensors(rank, 8, config=...))``, with the local default gap
  (4 KiB: the rows of a row-parallel split stay apart, a request each) and with 1 MiB (a
  URL's: they are joined). Seconds per plan (median and range over the rounds' mean over
  the ranks), requests, and the peak memory of one plan (tracemalloc).
* ``ranks``: for 1, 2, 4 and 8 ranks of Megatron's tensor-parallel layout, over loopback HTTP
  (nginx from the system's packages when it is there, else a threaded Python server), each
  rank's ``numpy.load_rank`` (a read plan: its rows, or its runs of rows, and nothing else)
  against the same rank loading the whole checkpoint (``numpy.load`` of every shard) and
  slicing it: bytes fetched and seconds, per rank (the mean over the ranks of one round).
* ``hash``: ``hash_tensors`` of the checkpoint (a digest per tensor, on every core) against
  reading its files (the floor), ``sha256sum`` of the files, and hashlib's sha256 over each
  file in one thread. The files are in the page cache (read once before).

Every candidate runs once a round, in an order that rotates; ratios are per round, so that
the drift of a shared machine cancels out. The checkpoint is bench_load.py's (kept between
runs in the temporary directory).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
from bench_load import INDEX, SHARDS, http_server, make_checkpoint, table, timed

import safetensors_header
from safetensors_header import TensorInfo, encode_header, read_checkpoint
from safetensors_header.integrity import hash_tensors
from safetensors_header.numpy import load, load_rank
from safetensors_header.plan import Split, plan_reads, split_tensors

CHUNK = 8 << 20
# Llama-3-70B: hidden size, MLP size, key/value heads' width, layers, vocabulary.
HIDDEN, MLP, KV, LAYERS, VOCAB = 8192, 28672, 1024, 80, 128256
SHARD = 5 << 30
# The configs the rules of tensor parallelism read the head counts from (issue 51).
CONFIG_70B = {"model_type": "llama", "num_attention_heads": 64, "num_key_value_heads": 8}
CONFIG_1GB = {"model_type": "llama", "num_attention_heads": 16, "num_key_value_heads": 16}


def llama_70b(folder: Path) -> Path:
    """A sparse Llama-3-70B-shaped checkpoint (kept if there): headers, and holes."""
    stamp = folder / "made"
    if stamp.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, list[int]] = {"model.embed_tokens.weight": [VOCAB, HIDDEN]}
    for layer in range(LAYERS):
        at = f"model.layers.{layer}."
        tensors |= {
            at + "input_layernorm.weight": [HIDDEN],
            at + "self_attn.q_proj.weight": [HIDDEN, HIDDEN],
            at + "self_attn.k_proj.weight": [KV, HIDDEN],
            at + "self_attn.v_proj.weight": [KV, HIDDEN],
            at + "self_attn.o_proj.weight": [HIDDEN, HIDDEN],
            at + "post_attention_layernorm.weight": [HIDDEN],
            at + "mlp.gate_proj.weight": [MLP, HIDDEN],
            at + "mlp.up_proj.weight": [MLP, HIDDEN],
            at + "mlp.down_proj.weight": [HIDDEN, MLP],
        }
    tensors |= {"model.norm.weight": [HIDDEN], "lm_head.weight": [VOCAB, HIDDEN]}
    shards: list[dict[str, list[int]]] = [{}]
    size = 0
    for name, shape in tensors.items():
        nbytes = 2 * math.prod(shape)
        if shards[-1] and size + nbytes > SHARD:
            shards.append({})
            size = 0
        shards[-1][name] = shape
        size += nbytes
    weight_map = {}
    for number, members in enumerate(shards, 1):
        file = f"model-{number:05d}-of-{len(shards):05d}.safetensors"
        header = encode_header({name: ("BF16", shape) for name, shape in members.items()})
        with open(folder / file, "wb") as out:
            out.write(header)
            out.truncate(len(header) + sum(2 * math.prod(s) for s in members.values()))
        weight_map |= dict.fromkeys(members, file)
    (folder / INDEX).write_text(json.dumps({"weight_map": weight_map}))
    stamp.touch()
    return folder


def part_plan(cache: Path, rounds: int) -> None:
    folder = llama_70b(cache / "llama-70b-sparse")
    checkpoint = read_checkpoint(folder)
    total = sum(header.data_size for header in checkpoint.files.values())
    world = 8
    print(
        f"## an {world}-way plan of a Llama-3-70B-shaped checkpoint ({total / 1e9:.1f} GB, "
        f"{len(checkpoint.files)} files, {len(checkpoint.weight_map):,} tensors)\n"
    )
    print(
        "| gap | seconds a plan (median, range) | requests a rank | bytes a rank reads | "
        "runs a rank asks | peak memory of a plan |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for gap in (None, 1 << 20):
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            plans = [
                plan_reads(checkpoint, split_tensors(rank, world, config=CONFIG_70B), gap=gap)
                for rank in range(world)
            ]
            times.append((time.perf_counter() - start) / world)
        tracemalloc.start()
        plan = plan_reads(checkpoint, split_tensors(3, world, config=CONFIG_70B), gap=gap)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        requests = sum(len(plan.requests) for plan in plans) / world
        read = sum(plan.bytes_read for plan in plans) / world
        runs = sum(len(tensor.ranges) for plan in plans for tensor in plan.tensors) / world
        shown = "4 KiB (local default)" if gap is None else f"{gap >> 20} MiB"
        print(
            f"| {shown} | {statistics.median(times):.4f} ({min(times):.4f}-{max(times):.4f}) "
            f"| {requests:,.0f} | {read:,.0f} | {runs:,.0f} | {peak / 2**20:.2f} MiB |"
        )
        del plan
    print()


def part_ranks(folder: Path, rounds: int) -> None:
    with http_server(folder) as (base, server):
        print(f"## ranks over loopback HTTP ({server})\n")
        index = f"{base}/{INDEX}"
        checkpoint = read_checkpoint(index)
        total = sum(header.data_size for header in checkpoint.files.values())
        print("| ranks | bytes a rank reads (plan) | requests a rank makes | whole checkpoint |")
        print("|---:|---:|---:|---:|")
        for world in (1, 2, 4, 8):
            plans = [
                plan_reads(checkpoint, split_tensors(rank, world, config=CONFIG_1GB))
                for rank in range(world)
            ]
            read = sum(plan.bytes_read for plan in plans) / world
            requests = sum(len(plan.requests) for plan in plans) / world
            print(f"| {world} | {read:,.0f} | {requests:,.0f} | {total:,} |")
        print()
        for world in (2, 4, 8):

            def planned(world: int = world) -> None:
                for rank in range(world):
                    load_rank(checkpoint, rank, world, config=CONFIG_1GB)

            def whole(world: int = world) -> None:
                for rank in range(world):
                    arrays = {}
                    for shard in SHARDS:
                        arrays.update(load(f"{base}/{shard}"))
                    _slice(arrays, rank, world)

            times = timed({f"plan, {world} ranks": planned, f"whole, {world} ranks": whole}, rounds)
            per_rank = {name: [t / world for t in runs] for name, runs in times.items()}
            table(
                per_rank,
                [(f"plan, {world} ranks", f"whole, {world} ranks", "bytes: table above")],
            )


def _slice(arrays: dict[str, np.ndarray], rank: int, world: int) -> dict[str, np.ndarray]:
    rule = split_tensors(rank, world, config=CONFIG_1GB)
    out = {}
    for name, array in arrays.items():
        split = rule(TensorInfo(name, "U8", array.shape, 0, 0, 0))
        if not isinstance(split, Split) or split.axis >= array.ndim:
            out[name] = array
        else:
            out[name] = np.ascontiguousarray(np.array_split(array, world, split.axis)[rank])
    return out


def part_hash(folder: Path, rounds: int) -> None:
    print("## hashing every tensor (files in the page cache)\n")
    files = [folder / shard for shard in SHARDS]
    buffer = bytearray(CHUNK)

    def read_files() -> None:
        view = memoryview(buffer)
        for path in files:
            with open(path, "rb", buffering=0) as file:
                while file.readinto(view):
                    pass

    def one_thread() -> None:
        view = memoryview(buffer)
        for path in files:
            digest = hashlib.sha256()
            with open(path, "rb", buffering=0) as file:
                while count := file.readinto(view):
                    digest.update(view[:count])

    candidates = {
        "read the files": read_files,
        "hash_tensors": lambda: hash_tensors(folder),
        "hashlib, one thread": one_thread,
    }
    if shutil.which("sha256sum"):
        candidates["sha256sum"] = lambda: subprocess.run(
            ["sha256sum", *map(str, files)], check=True, capture_output=True
        )
    read_files()
    times = timed(candidates, rounds)
    ratios = [
        ("hash_tensors", "read the files", "1.3x or less"),
        ("hash_tensors", "hashlib, one thread", "below 1"),
    ]
    if "sha256sum" in times:
        ratios.append(("hash_tensors", "sha256sum", "below 1"))
    table(times, ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="plan,ranks,hash")
    parser.add_argument("--size", type=int, default=1000, help="MB of tensors (default 1000)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "safetensors_header_bench_load",
    )
    args = parser.parse_args()
    folder = args.cache / f"checkpoint-{args.size}"
    print(f"safetensors_header {safetensors_header.__version__} from {safetensors_header.__file__}")
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f}; {args.rounds} rounds\n"
    )
    parts = args.parts.split(",")
    if "plan" in parts:
        part_plan(args.cache, args.rounds)
    if {"ranks", "hash"} & set(parts):
        make_checkpoint(folder, args.size)
    if "ranks" in parts:
        part_ranks(folder, args.rounds)
    if "hash" in parts:
        part_hash(folder, args.rounds)


if __name__ == "__main__":
    main()
