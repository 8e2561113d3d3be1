"""A VirtualiZarr parser for safetensors files and checkpoints: every tensor a virtual array.

Layer: adapters (on the checkpoint reader and the source layer).

    >>> from obspec_utils.registry import ObjectStoreRegistry  # doctest: +SKIP
    >>> from obstore.store import LocalStore  # doctest: +SKIP
    >>> from virtualizarr import open_virtual_dataset  # doctest: +SKIP
    >>> from safetensors_header.virtualizarr import SafetensorsParser  # doctest: +SKIP
    >>> registry = ObjectStoreRegistry({"file://": LocalStore()})  # doctest: +SKIP
    >>> vds = open_virtual_dataset(  # doctest: +SKIP
    ...     "file:///models/model.safetensors", registry=registry, parser=SafetensorsParser()
    ... )

Needs VirtualiZarr 2 (``pip install 'safetensors_header[virtualizarr]'``), which brings zarr,
numpy, xarray and obstore; importing this module imports them. Arrays, names, dtypes, chunks
and dimension names are those of `safetensors_header.zarr` (``to_zarr``): one chunk per tensor
unless ``chunks=`` says otherwise, one dimension per axis (``"<name>/0"``, ``"<name>/1"``,
...), ``BF16`` and ``F8_*`` as same-width unsigned integers with the real dtype in the
``safetensors_dtype`` attribute, and ``__metadata__`` as the dataset's attributes. The URL of
a checkpoint's index (``.../model.safetensors.index.json``) gives one dataset of all its
shards' tensors.

The parser and the datasets it makes can be pickled, so that many files can be virtualized in
worker processes (``dask.distributed``'s ``client.map(open_virtual_dataset, urls, ...)``, or
``virtualizarr.open_virtual_mfdataset(..., parallel="dask")``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ._extras import optional_imports

with optional_imports("virtualizarr", "safetensors_header.virtualizarr"):
    import numpy as np
    from obspec_utils.registry import ObjectStoreRegistry
    from virtualizarr.manifests import ChunkManifest, ManifestArray, ManifestGroup, ManifestStore
    from virtualizarr.manifests.manifest import validate_and_normalize_path_to_uri
    from zarr.core.metadata.v3 import ArrayV3Metadata

from ._checkpoint import Checkpoint, is_checkpoint, read_checkpoint
from ._core.fileformat import DTYPES, MAX_HEADER_SIZE
from ._core.header import Header, TensorInfo
from ._fetch import beside
from ._sources import read_header
from ._sources.hub import hub_url
from ._sources.options import WORKERS
from ._zarr_layout import ZARR_TYPES, chunk_grid
from .zarr import (
    array_metadata,
    attributes_of_group,
    check_chunks_option,
    chunk_shape,
    dimension_names,
    node_name,
    tensor_attributes,
    tensor_entries,
)

if TYPE_CHECKING:
    from .zarr import Chunks

__all__ = ["SafetensorsParser", "read_checkpoint_from_store"]


class SafetensorsParser:
    """Parse a safetensors file into a VirtualiZarr `ManifestStore`.

    A VirtualiZarr 2 parser: called as ``parser(url, registry)``, as
    ``virtualizarr.open_virtual_dataset(url, registry=registry, parser=parser)`` does. Only
    the header is read (one ranged read of the first 128 KiB, which brings the file's size
    with it, and a second read only when the header is longer; a store of ``head`` and
    ``get_range`` only is asked the size first), and it is validated as the reference does
    (`HeaderError` for a bad file).

    Args:
        drop_variables: Tensors to leave out, by name as in the file or as the variable
            (``safetensors_header.zarr.node_name(name)``).
        max_header_size: The largest header length accepted; see `parse_header`.
        chunks: One chunk per tensor (``None``), a target chunk size in bytes, or tensor
            name -> chunk shape (checked against each file it parses); see
            ``safetensors_header.zarr.chunk_shape``.
        max_workers: The threads that read a checkpoint's shards' headers.
        extension_dtypes: Give ``BF16`` and ``F8_*`` arrays their Zarr extension data types
            (``bfloat16``, ``float8_e4m3fn``, ...; see ``safetensors_header.zarr``) instead
            of unsigned integers of the same width. zarr-python 3.1 knows none of them, and
            VirtualiZarr builds its arrays with zarr-python: this works only where a package
            registers those data types with zarr-python (else a ``ValueError`` says so). For
            TensorStore, write the documents with ``to_zarr`` or ``to_kerchunk`` instead.

    Raises:
        ValueError: `chunks` is a target below 1 byte, or neither an int nor a mapping.
    """

    def __init__(
        self,
        *,
        drop_variables: Iterable[str] | None = None,
        max_header_size: int = MAX_HEADER_SIZE,
        chunks: Chunks = None,
        max_workers: int = WORKERS,
        extension_dtypes: bool = False,
    ) -> None:
        check_chunks_option(chunks, None)  # the names are checked against each file
        self.drop_variables = frozenset(drop_variables or ())
        self.max_header_size = max_header_size
        # A plain dict, so that the parser pickles whatever mapping it was given.
        self.chunks: Chunks = dict(chunks) if isinstance(chunks, Mapping) else chunks
        self.max_workers = max_workers
        self.extension_dtypes = extension_dtypes

    def __call__(self, url: str, registry: ObjectStoreRegistry[Any]) -> ManifestStore:
        """Read the header of the file at `url` and map each tensor to a virtual array.

        Args:
            url: The file's URL with a scheme (``file:///...``, ``s3://...``,
                ``https://...``); chunk references point at it. An ``hf://`` path of the
                Hugging Face Hub is read, and referred to, at its HTTPS URL (`hub_url`:
                ``https://huggingface.co/<org>/<repo>/resolve/main/<file>``), which the
                registry must resolve. A URL ending in ``.json`` is a checkpoint's index:
                its shards, the files it names next to it, are read (their headers only, in
                parallel) and checked against it as `read_checkpoint` does, and each array
                refers to its own shard (named in its ``safetensors_file`` attribute).
            registry: Resolves `url` to an object store (for reading the header) and, later,
                serves the chunks of the variables that are loaded.

        Raises:
            HeaderError: A file is not a valid safetensors file, or an index is not valid or
                does not match its shards (``InvalidIndex``, ``IndexMismatch``).
            ValueError: ``chunks`` names a tensor that is not there, or a chunk shape that
                cannot work (see ``safetensors_header.zarr.chunk_shape``); or
                ``extension_dtypes`` asks for a data type zarr-python does not know.
        """
        url = hub_url(url)
        source: Header | Checkpoint
        if is_checkpoint(url):
            source = read_checkpoint_from_store(
                url,
                registry,
                max_header_size=self.max_header_size,
                max_workers=self.max_workers,
            )
        else:
            store, path = registry.resolve(url)
            source = _read_header(store, path, self.max_header_size)
        entries = _entries_with_urls(source, url)
        check_chunks_option(self.chunks, [(info, None) for info, _, _ in entries])
        arrays = _Arrays(self.chunks, self.extension_dtypes)
        for info, shard, shard_url in entries:
            node = node_name(info.name)
            if info.name in self.drop_variables or node in self.drop_variables:
                continue
            arrays.add(info, node, shard_url, shard)
        group = ManifestGroup(arrays=arrays.arrays(), attributes=attributes_of_group(source))
        return _ManifestStore(group, registry=registry)

    def __repr__(self) -> str:
        return (
            f"SafetensorsParser(drop_variables={sorted(self.drop_variables)!r}, "
            f"max_header_size={self.max_header_size!r}, chunks={self.chunks!r}, "
            f"extension_dtypes={self.extension_dtypes!r})"
        )


def read_checkpoint_from_store(
    url: str,
    registry: ObjectStoreRegistry[Any],
    /,
    *,
    max_header_size: int = MAX_HEADER_SIZE,
    max_workers: int = WORKERS,
) -> Checkpoint:
    """`read_checkpoint` for the URL of an index, through an obspec object store.

    The index is read whole, then every shard's header at once (at most `max_workers`
    requests in flight), from the store that `registry` resolves the URL to; the shards are
    the files the index names, next to it. The checks are `read_checkpoint`'s; its
    non-fatal findings are in ``problems``.
    """
    store, path = registry.resolve(hub_url(url))
    return read_checkpoint((store, path), max_header_size=max_header_size, max_workers=max_workers)


class _ManifestStore(ManifestStore):
    """A `ManifestStore` whose ``str()`` does not show every array.

    zarr-python formats ``str(store)`` into each array's and group's path (for its error
    messages) as it opens them, and VirtualiZarr's ``__str__`` is the repr of the whole
    group: opening n arrays formats n x n array reprs. For 64 tensors that was 70 % of
    ``open_virtual_dataset`` (VirtualiZarr 2.8.0, zarr 3.4.2); for a checkpoint's thousands,
    minutes.
    """

    def __str__(self) -> str:
        return f"ManifestStore(<{len(self._group.arrays):,} safetensors arrays>)"


def _read_header(store: Any, path: str, max_header_size: int) -> Header:
    """Read and validate the header from an obspec store: one ranged GET for a typical
    header, which brings the size with it (a store of ``head`` and ``get_range`` only: a
    HEAD, then one or two ranges)."""
    return read_header((store, path), max_header_size=max_header_size)


def _next_to(url: str, name: str) -> str:
    return beside(url, name)


def _entries_with_urls(
    source: Header | Checkpoint, url: str
) -> list[tuple[TensorInfo, str | None, str]]:
    """Each tensor, with its shard's name (``None`` for a file) and URL."""
    return [
        (info, shard, url if shard is None else _next_to(url, shard))
        for info, shard in tensor_entries(source)
    ]


class _Layout(NamedTuple):
    """What the tensors of one dtype, shape and chunk shape share."""

    metadata: ArrayV3Metadata  # made and checked by zarr, for the first of them
    copied: bool  # whether the others' metadata can be copies of it (zarr's is a dataclass)
    axes: tuple[str, ...]  # "/0", "/1", ...: the dimension names after the array's key
    grid: tuple[int, ...]  # the array's chunk grid
    length: int  # bytes a chunk
    chunk_count: int  # 0 for a zero-size tensor


class _Arrays:
    """The virtual arrays of one parse: zarr's checks once per layout, the manifests in bulk.

    zarr's `ArrayV3Metadata` checks the shape, data type, chunk grid, fill value and codecs
    of each array it is made for (two thirds of a parse when made per tensor); a
    checkpoint's tensors have few layouts (a Llama-like file: about 6 among 300 tensors).
    The first array of a layout is made and checked by zarr; the others of that layout are
    copies of it with their own attributes and dimension names, the only fields that differ
    (tests compare each copy with zarr's own). The chunks' paths, offsets and lengths of all
    arrays with the same chunk grid are computed at once, in three arrays of which each
    manifest holds a view; each URL is checked and made absolute by VirtualiZarr once.
    """

    def __init__(self, chunks: Chunks, extension_dtypes: bool) -> None:
        self.chunks = chunks
        self.per_name = isinstance(chunks, Mapping)
        self.extension_dtypes = extension_dtypes
        self.layouts: dict[tuple[object, ...], _Layout] = {}
        self.uris: dict[str, int] = {}  # URL -> its place in `uri_list`
        self.uri_list: list[str] = []
        # Per array, in order: its key, metadata and layout; its URL's place and its start.
        self.added: list[tuple[str, ArrayV3Metadata, _Layout, int, int]] = []

    def add(self, info: TensorInfo, node: str, url: str, shard: str | None) -> None:
        key: tuple[object, ...] = (info.dtype, info.shape)
        if self.per_name:
            wanted = self.chunks.get(info.name)  # type: ignore[union-attr]
            key = (*key, tuple(wanted) if isinstance(wanted, list) else wanted)
        layout = self.layouts.get(key)
        if layout is None or not layout.copied:
            layout = self.layouts[key] = self._layout(info, shard)
            metadata = layout.metadata
        else:
            metadata = object.__new__(ArrayV3Metadata)
            fields = metadata.__dict__
            fields.update(layout.metadata.__dict__)
            fields["attributes"] = tensor_attributes(info, shard)
            fields["dimension_names"] = tuple([node + axis for axis in layout.axes])
        uri = self.uris.get(url)
        if uri is None:
            uri = self.uris[url] = len(self.uri_list)
            self.uri_list.append(validate_and_normalize_path_to_uri(url))
        self.added.append((node, metadata, layout, uri, info.start))

    def _layout(self, info: TensorInfo, shard: str | None) -> _Layout:
        sizes = chunk_shape(info, chunks=self.chunks)
        document = array_metadata(info, chunks=sizes, extension_dtypes=self.extension_dtypes)
        if shard is not None:
            document["attributes"]["safetensors_file"] = shard
        try:
            metadata = ArrayV3Metadata.from_dict(document)
        except ValueError as error:
            if document["data_type"] == ZARR_TYPES[info.dtype]:
                raise
            raise ValueError(
                f"zarr-python has no data type {document['data_type']!r} (for the "
                f"{info.dtype} tensor {info.name!r}), which extension_dtypes=True asks "
                "for: register one with zarr-python, or leave extension_dtypes off (the "
                "same bits as unsigned integers)"
            ) from error
        grid, length = chunk_grid(info, sizes)
        if DTYPES[info.dtype].packed:  # a 1-d array of the bytes: chunks in file order
            grid = (math.prod(grid),)
        # Chunk j of the grid (C order) is the j-th piece of the tensor's bytes; a scalar's
        # grid is (), as VirtualiZarr's HDF parser makes it; a zero-size array's grid has
        # no chunk in it.
        return _Layout(
            metadata,
            hasattr(metadata, "__dict__"),
            tuple(dimension_names("", metadata.shape)),  # each name is the key, then these
            grid,
            length,
            math.prod(grid) if info.numel else 0,
        )

    def arrays(self) -> dict[str, ManifestArray]:
        """Node -> virtual array, in the order they were added."""
        manifests: dict[int, ChunkManifest] = {}
        by_grid: dict[tuple[int, ...], list[int]] = {}
        for number, (_, _, layout, _, _) in enumerate(self.added):
            if layout.chunk_count:
                by_grid.setdefault(layout.grid, []).append(number)
            else:
                manifests[number] = ChunkManifest(entries={}, shape=layout.grid)
        for grid, numbers in by_grid.items():
            table = np.array(
                [(self.added[n][3], self.added[n][4], self.added[n][2].length) for n in numbers],
                dtype=np.uint64,
            )
            count = math.prod(grid)
            shape = (len(numbers), *grid)
            steps = np.arange(count, dtype=np.uint64)
            offsets = (table[:, 1:2] + steps * table[:, 2:3]).reshape(shape)
            lengths = np.repeat(table[:, 2], count).reshape(shape)
            # From a list: numpy 2.1's StringDType fails to repeat or fancy-index.
            uris = [self.uri_list[self.added[number][3]] for number in numbers]
            paths: Any = np.array(
                uris if count == 1 else [uri for uri in uris for _ in range(count)],
                dtype=np.dtypes.StringDType(),
            ).reshape(shape)
            for row, number in enumerate(numbers):
                # [row, ...]: a view of the grid's shape, 0-d for a scalar (never a scalar)
                manifests[number] = ChunkManifest.from_arrays(
                    paths=paths[row, ...],
                    offsets=offsets[row, ...],
                    lengths=lengths[row, ...],
                    validate_paths=False,
                )
        return {
            node: ManifestArray(metadata=metadata, chunkmanifest=manifests[number])
            for number, (node, metadata, _, _, _) in enumerate(self.added)
        }
