"""Many files on a dask.distributed cluster: two worker processes on 127.0.0.1."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import build, tensor

distributed = pytest.importorskip("distributed")

from safetensors_header import read_header  # noqa: E402
from safetensors_header.zarr import chunk_ranges, chunk_shape, node_name, to_kerchunk  # noqa: E402

FILES = 12


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    with cluster, distributed.Client(cluster) as connected:
        yield connected


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Files with a tensor of their own each, so that a mix-up would show."""
    folder = tmp_path_factory.mktemp("many")
    paths = []
    for number in range(FILES):
        data = build(
            {
                "__metadata__": {"number": str(number)},
                "embed": tensor("U8", [4, 2], 0, 8),
                f"only.{number}": tensor("U8", [number + 1], 8, 9 + number),
            },
            bytes([number] * (9 + number)),
        )
        path = folder / f"model-{number:03}.safetensors"
        path.write_bytes(data)
        paths.append(path)
    return paths


@pytest.mark.slow
def test_worker_processes_are_not_this_one(client: Any) -> None:
    import os

    pids = client.run(os.getpid)
    assert len(pids) == 2
    assert os.getpid() not in pids.values()


def test_headers_and_references_on_the_workers(client: Any, files: list[Path]) -> None:
    headers = client.gather(client.map(read_header, files))
    assert [header.metadata["number"] for header in headers] == [str(n) for n in range(FILES)]
    refs = client.gather(client.map(to_kerchunk, headers, [str(p) for p in files], chunks=2))
    for number, (path, ref) in enumerate(zip(files, refs, strict=True)):
        assert json.loads(ref["refs"]["embed/.zarray"])["chunks"] == [1, 2]
        only = read_header(path).tensors[f"only.{number}"]
        expected = [
            [str(path), at, size] for _, at, size in chunk_ranges(only, chunk_shape(only, chunks=2))
        ]
        assert [ref["refs"][f"only.{number}/{i}"] for i in range(len(expected))] == expected


@pytest.mark.slow
def test_many_files_virtualized_on_the_workers(client: Any, files: list[Path]) -> None:
    pytest.importorskip("virtualizarr")
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_dataset

    from safetensors_header.virtualizarr import SafetensorsParser

    registry = ObjectStoreRegistry({"file://": LocalStore()})
    parser = SafetensorsParser(chunks=2)
    urls = [path.as_uri() for path in files]
    futures = client.map(open_virtual_dataset, urls, registry=registry, parser=parser)
    datasets = client.gather(futures)
    for number, (path, vds) in enumerate(zip(files, datasets, strict=True)):
        header = read_header(path)
        assert vds.attrs == {"number": str(number)}
        assert sorted(vds.data_vars) == sorted(node_name(name) for name in header.tensors)
        manifest = vds["embed"].data.manifest.dict()
        assert [(entry["offset"], entry["length"]) for entry in manifest.values()] == [
            (offset, length) for _, offset, length in chunk_ranges(header.tensors["embed"], (1, 2))
        ]
        assert {entry["path"] for entry in manifest.values()} == {path.as_uri()}


def test_virtualizarr_parallel_dask_merges_shards(client: Any, files: list[Path]) -> None:
    pytest.importorskip("virtualizarr")
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_mfdataset

    from safetensors_header.virtualizarr import SafetensorsParser

    registry = ObjectStoreRegistry({"file://": LocalStore()})
    urls = [path.as_uri() for path in files[:4]]
    # One tensor per "shard" (the shared "embed" dropped): merged into one dataset.
    parser = SafetensorsParser(drop_variables=["embed"])
    vds = open_virtual_mfdataset(
        urls, registry=registry, parser=parser, parallel="dask", combine="nested"
    )
    assert sorted(vds.data_vars) == [f"only.{number}" for number in range(4)]
    for number in range(4):
        entry = next(iter(vds[f"only.{number}"].data.manifest.dict().values()))
        assert entry["path"] == files[number].as_uri()
