"""The VirtualiZarr parser: its own cost per file, and many files serially and on a cluster.

    PYTHONPATH=$PWD python benchmarks/bench_virtualizarr.py                 # every part
    PYTHONPATH=$PWD python benchmarks/bench_virtualizarr.py --parts file --rounds 9
    PYTHONPATH=$PWD python benchmarks/bench_virtualizarr.py --parts many --files 200

Needs VirtualiZarr 2, zarr 3, obstore, obspec-utils and dask.distributed (the ``[test]``
extra on Python 3.11 and newer).

Files: Llama-like tensor names (``model.layers.{i}.self_attn.q_proj.weight``, ...; F16
matrices of a few elements and F32 norm vectors, so each file is mostly header), written by
the reference (``safetensors.numpy.save_file``), read through an obstore ``LocalStore``
(``file://`` URLs).

Parts (``--parts``):

* ``file``: one file of 64 and one of 1,000 tensors; each candidate called in a loop (enough
  calls for about 50 ms), once a round, in an order that rotates from round to round:

  - ``read_header``: the header read and validated through the store, as the parser reads it;
  - ``manifests``: VirtualiZarr's own share, as its HDF parser pays it: for every tensor
    the three arrays of its chunk grid (paths, offsets, lengths; ``np.full``),
    ``ChunkManifest.from_arrays`` (which checks the paths) and a ``ManifestArray`` of a
    ready ``ArrayV3Metadata``;
  - ``manifests, ready arrays``: the least any parser pays: ``from_arrays`` of arrays made
    beforehand, its path checks off, and the ``ManifestArray``;
  - ``from_dict``: zarr's ``ArrayV3Metadata.from_dict`` of every tensor's document, the
    cost a parser pays when it builds each array's metadata through zarr (for reference:
    the parser does it once per distinct layout);
  - ``parser``: ``SafetensorsParser()(url, registry)``, the ``ManifestStore``;
  - ``open_virtual_dataset``: VirtualiZarr's whole call, the parser's store opened as an
    xarray ``Dataset`` through zarr-python.

  The target (issue 29): the parser at most ``3 x read_header + manifests``; the stricter
  ``3 x read_header + manifests, ready arrays`` is printed too.
* ``many``: ``--files`` files of 64 tensors (the same names and shapes: the checkpoints of a
  training run), candidates once a round: every file's ``open_virtual_dataset`` serially and
  on a ``LocalCluster`` of 2 worker processes of 1 thread (``client.map``, the datasets
  gathered back); ``open_virtual_mfdataset`` (combine ``nested`` along a new dimension
  ``checkpoint``) with ``parallel=False`` and with ``parallel="dask"`` on that cluster. The
  difference between ``open_virtual_mfdataset`` and the map alone is xarray's combine.

Ratios are per round, so that the drift of a shared machine cancels out; the tables give
the median of each and the range.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_load import table, timed
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from safetensors.numpy import save_file
from virtualizarr import open_virtual_dataset, open_virtual_mfdataset
from virtualizarr.manifests import ChunkManifest, ManifestArray
from zarr.core.metadata.v3 import ArrayV3Metadata

import safetensors_header
from safetensors_header import read_header
from safetensors_header.virtualizarr import SafetensorsParser
from safetensors_header.zarr import array_metadata

BLOCK = (
    ("input_layernorm.weight", "F32", (8,)),
    ("self_attn.q_proj.weight", "F16", (8, 8)),
    ("self_attn.k_proj.weight", "F16", (2, 8)),
    ("self_attn.v_proj.weight", "F16", (2, 8)),
    ("self_attn.o_proj.weight", "F16", (8, 8)),
    ("post_attention_layernorm.weight", "F32", (8,)),
    ("mlp.gate_proj.weight", "F16", (16, 8)),
    ("mlp.up_proj.weight", "F16", (16, 8)),
    ("mlp.down_proj.weight", "F16", (8, 16)),
)
NUMPY = {"F16": np.float16, "F32": np.float32}


def make_file(path: Path, count: int, seed: int) -> None:
    """A Llama-like file of `count` tensors (the embedding, layers, the final norm)."""
    rng = np.random.default_rng(seed)
    tensors: dict[str, np.ndarray] = {
        "model.embed_tokens.weight": rng.standard_normal((32, 8)).astype(np.float16)
    }
    layer = 0
    while len(tensors) < count - 1:
        for name, dtype, shape in BLOCK:
            if len(tensors) < count - 1:
                array = rng.standard_normal(shape).astype(NUMPY[dtype])
                tensors[f"model.layers.{layer}.{name}"] = array
        layer += 1
    tensors["model.norm.weight"] = np.ones(8, np.float32)
    save_file(tensors, str(path), metadata={"format": "pt"})


def registry() -> ObjectStoreRegistry[Any]:
    return ObjectStoreRegistry({"file://": LocalStore()})


# --- one file -------------------------------------------------------------------------------


def part_file(folder: Path, rounds: int) -> None:
    print("## one file: ms per file\n")
    for count in (64, 1000):
        one_file(folder, count, rounds)


def one_file(folder: Path, count: int, rounds: int) -> None:
    path = folder / f"file-{count}.safetensors"
    make_file(path, count, seed=count)
    url = path.as_uri()
    stores = registry()
    store, key = stores.resolve(url)
    parser = SafetensorsParser()
    header = read_header(path)
    infos = list(header.tensors.values())
    documents = [array_metadata(info) for info in infos]
    shared = ArrayV3Metadata.from_dict(documents[0])
    ready = [
        (
            np.full((1,) * len(info.shape), url, dtype=np.dtypes.StringDType()),
            np.full((1,) * len(info.shape), info.start, dtype=np.uint64),
            np.full((1,) * len(info.shape), info.nbytes, dtype=np.uint64),
        )
        for info in infos
    ]

    def manifests() -> None:
        for info in infos:
            grid = (1,) * len(info.shape)
            manifest = ChunkManifest.from_arrays(
                paths=np.full(grid, url, dtype=np.dtypes.StringDType()),
                offsets=np.full(grid, info.start, dtype=np.uint64),
                lengths=np.full(grid, info.nbytes, dtype=np.uint64),
            )
            ManifestArray(metadata=shared, chunkmanifest=manifest)

    def ready_manifests() -> None:
        for paths, offsets, lengths in ready:
            manifest = ChunkManifest.from_arrays(
                paths=paths, offsets=offsets, lengths=lengths, validate_paths=False
            )
            ManifestArray(metadata=shared, chunkmanifest=manifest)

    singles: dict[str, Callable[[], object]] = {
        "read_header": lambda: read_header((store, key)),
        "manifests": manifests,
        "manifests, ready arrays": ready_manifests,
        "from_dict": lambda: [ArrayV3Metadata.from_dict(d) for d in documents],
        "parser": lambda: parser(url, stores),
        "open_virtual_dataset": lambda: open_virtual_dataset(url, registry=stores, parser=parser),
    }
    loops: dict[str, int] = {}
    for name, call in singles.items():  # calls a round: about 50 ms of each
        started = time.perf_counter()
        call()
        loops[name] = max(1, int(0.05 / max(time.perf_counter() - started, 1e-6)))

    def looped(call: Callable[[], object], n: int) -> Callable[[], object]:
        def run() -> None:
            for _ in range(n):
                call()

        return run

    times = timed({name: looped(c, loops[name]) for name, c in singles.items()}, rounds)
    per_call = {name: [t / loops[name] for t in runs] for name, runs in times.items()}
    for floor in ("manifests", "manifests, ready arrays"):
        per_call[f"3 x read_header + {floor}"] = [
            3 * r + m for r, m in zip(per_call["read_header"], per_call[floor], strict=True)
        ]
    print(f"### {count:,} tensors ({path.stat().st_size:,} bytes)\n")
    table(
        per_call,
        [
            ("parser", "3 x read_header + manifests", "at most 1.0x"),
            ("parser", "3 x read_header + manifests, ready arrays", ""),
            ("parser", "read_header", ""),
            ("from_dict", "parser", ""),
            ("open_virtual_dataset", "parser", ""),
        ],
        unit="ms",
        scale=1e3,
        digits=2,
    )


# --- many files -----------------------------------------------------------------------------


def part_many(folder: Path, rounds: int, files: int) -> None:
    import distributed

    print(f"## {files:,} files of 64 tensors: seconds\n")
    many = folder / f"many-{files}"
    many.mkdir(exist_ok=True)
    urls = []
    for number in range(files):
        path = many / f"checkpoint-{number:05d}.safetensors"
        if not path.exists():
            make_file(path, 64, seed=number)
        urls.append(path.as_uri())
    parser = SafetensorsParser()
    stores = registry()
    options = {"registry": stores, "parser": parser}
    combine = {"combine": "nested", "concat_dim": "checkpoint"}
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    with cluster, distributed.Client(cluster) as client:
        client.gather(client.map(open_virtual_dataset, urls[:4], **options, pure=False))

        def on_cluster() -> object:
            return client.gather(client.map(open_virtual_dataset, urls, **options, pure=False))

        times = timed(
            {
                "serial": lambda: [open_virtual_dataset(url, **options) for url in urls],
                "cluster, 2 processes": on_cluster,
                "mfdataset, serial": lambda: open_virtual_mfdataset(
                    urls, **options, **combine, parallel=False
                ),
                "mfdataset, dask on the cluster": lambda: open_virtual_mfdataset(
                    urls, **options, **combine, parallel="dask"
                ),
            },
            rounds,
        )
    times["combine (mfdataset, serial - serial)"] = [
        a - b for a, b in zip(times["mfdataset, serial"], times["serial"], strict=True)
    ]
    table(
        times,
        [
            ("cluster, 2 processes", "serial", ""),
            ("mfdataset, dask on the cluster", "mfdataset, serial", ""),
            ("combine (mfdataset, serial - serial)", "mfdataset, serial", ""),
        ],
        digits=2,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="file,many")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the file part")
    parser.add_argument("--many-rounds", type=int, default=2, help="rounds of the many part")
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "safetensors_header_bench_virtualizarr",
    )
    args = parser.parse_args()
    import virtualizarr
    import zarr

    args.cache.mkdir(exist_ok=True)
    print(f"safetensors_header {safetensors_header.__version__} from {safetensors_header.__file__}")
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores; VirtualiZarr "
        f"{virtualizarr.__version__}, zarr {zarr.__version__}\n"
    )
    parts = args.parts.split(",")
    if "file" in parts:
        part_file(args.cache, args.rounds)
    if "many" in parts:
        part_many(args.cache, args.many_rounds, args.files)


if __name__ == "__main__":
    main()
