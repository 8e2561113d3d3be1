"""A VirtualiZarr parser for safetensors files: every tensor a virtual Zarr array.

    >>> from obspec_utils.registry import ObjectStoreRegistry  # doctest: +SKIP
    >>> from obstore.store import LocalStore  # doctest: +SKIP
    >>> from virtualizarr import open_virtual_dataset  # doctest: +SKIP
    >>> from safetensors_header.virtualizarr import SafetensorsParser  # doctest: +SKIP
    >>> registry = ObjectStoreRegistry({"file://": LocalStore()})  # doctest: +SKIP
    >>> vds = open_virtual_dataset(  # doctest: +SKIP
    ...     "file:///models/model.safetensors", registry=registry, parser=SafetensorsParser()
    ... )

Needs VirtualiZarr 2 (``pip install 'safetensors_header[virtualizarr]'``), which brings zarr,
numpy, xarray and obstore; importing this module imports them. Arrays, names, dtypes and
dimension names are those of `safetensors_header.zarr` (``to_zarr``): one chunk per tensor,
one dimension per axis (``"<name>/0"``, ``"<name>/1"``, ...), ``BF16`` and ``F8_*`` as
same-width unsigned integers with the real dtype in the ``safetensors_dtype`` attribute, and
``__metadata__`` as the dataset's attributes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np
from obspec import GetRange, Head
from obspec_utils.registry import ObjectStoreRegistry
from virtualizarr.manifests import ChunkManifest, ManifestArray, ManifestGroup, ManifestStore
from zarr.core.metadata.v3 import ArrayV3Metadata

from ._format import MAX_HEADER_SIZE, bytes_needed
from ._header import Header, TensorInfo
from ._parser import parse_header
from ._sources import FIRST_READ
from .zarr import array_metadata, array_shape, node_name

__all__ = ["SafetensorsParser"]


class SafetensorsParser:
    """Parse a safetensors file into a VirtualiZarr `ManifestStore`.

    A VirtualiZarr 2 parser: called as ``parser(url, registry)``, as
    ``virtualizarr.open_virtual_dataset(url, registry=registry, parser=parser)`` does. Only
    the header is read (one ranged read of the first 128 KiB after asking the store for the
    file's size, and a second read only when the header is longer), and it is validated as
    the reference does (`HeaderError` for a bad file).

    Args:
        drop_variables: Tensors to leave out, by name as in the file or as the variable
            (``safetensors_header.zarr.node_name(name)``).
        max_header_size: The largest header length accepted; see `parse_header`.
    """

    def __init__(
        self,
        *,
        drop_variables: Iterable[str] | None = None,
        max_header_size: int = MAX_HEADER_SIZE,
    ) -> None:
        self.drop_variables = frozenset(drop_variables or ())
        self.max_header_size = max_header_size

    def __call__(self, url: str, registry: ObjectStoreRegistry[Any]) -> ManifestStore:
        """Read the header of the file at `url` and map each tensor to a virtual array.

        Args:
            url: The file's URL with a scheme (``file:///...``, ``s3://...``); chunk
                references point at it.
            registry: Resolves `url` to an object store (for reading the header) and, later,
                serves the chunks of the variables that are loaded.
        """
        store, path = registry.resolve(url)
        header = _read_header(store, path, self.max_header_size)
        arrays = {}
        for info in header.tensors.values():
            node = node_name(info.name)
            if info.name in self.drop_variables or node in self.drop_variables:
                continue
            arrays[node] = _manifest_array(info, url)
        attributes = dict(header.metadata) if header.metadata is not None else {}
        return ManifestStore(ManifestGroup(arrays=arrays, attributes=attributes), registry=registry)


class _HeaderStore(Head, GetRange, Protocol):
    """What reading a header needs of an obspec store (obstore's stores have it all)."""


def _read_header(store: _HeaderStore, path: str, max_header_size: int) -> Header:
    """Read and validate the header from an obspec store: a HEAD, then one or two ranges."""
    size = store.head(path)["size"]
    # A first read large enough for most headers; `bytes_needed` then says what is missing.
    first = min(size, FIRST_READ)
    # obstore refuses an empty range: a file too short for a length prefix is judged empty.
    prefix = bytes(store.get_range(path, start=0, length=first)) if first else b""
    while True:
        # The header's end (or what a bad length prefix decides, raised); with the file's
        # size known, never past the end of the file.
        needed = bytes_needed(prefix, file_size=size, max_header_size=max_header_size)
        if needed <= len(prefix):
            return parse_header(prefix, file_size=size, max_header_size=max_header_size)
        prefix += bytes(store.get_range(path, start=len(prefix), end=needed))


def _manifest_array(info: TensorInfo, url: str) -> ManifestArray:
    metadata = ArrayV3Metadata.from_dict(array_metadata(info))
    shape = array_shape(info)
    if 0 in shape:
        # A zero-size array: a chunk grid with no chunk in it.
        manifest = ChunkManifest(entries={}, shape=tuple(0 if size == 0 else 1 for size in shape))
    else:
        grid = (1,) * len(shape)  # one chunk; () for a scalar, as VirtualiZarr's HDF parser
        manifest = ChunkManifest.from_arrays(
            paths=np.full(grid, url, dtype=np.dtypes.StringDType()),
            offsets=np.full(grid, info.start, dtype=np.uint64),
            lengths=np.full(grid, info.nbytes, dtype=np.uint64),
        )
    return ManifestArray(metadata=metadata, chunkmanifest=manifest)
