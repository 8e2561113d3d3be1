"""A safetensors file or checkpoint as a Zarr group: Zarr v2 and v3 metadata, kerchunk references.

Layer: adapters (on the core and the checkpoint reader).

    >>> from safetensors_header import read_checkpoint, read_header
    >>> from safetensors_header.zarr import read_tensors, to_kerchunk, to_zarr
    >>> header = read_header("model.safetensors")  # doctest: +SKIP
    >>> refs = to_kerchunk(header, "s3://bucket/model.safetensors")  # doctest: +SKIP
    >>> refs = to_kerchunk(header, "model.safetensors", chunks=1 << 20)  # doctest: +SKIP
    >>> checkpoint = read_checkpoint("llama/model.safetensors.index.json")  # doctest: +SKIP
    >>> refs = to_kerchunk(checkpoint, "s3://bucket/llama/")  # doctest: +SKIP
    >>> to_zarr(header)["zarr.json"]  # doctest: +SKIP
    {'zarr_format': 3, 'node_type': 'group', 'attributes': {'format': 'pt'}}

Every tensor is one uncompressed Zarr array whose chunks are byte ranges of the file: one chunk
(the tensor's whole range) by default, or a contiguous chunking (``chunks=``, below). The
``__metadata__`` map is the group's attributes. Plain dicts and JSON, standard library only
(importing this module imports no Zarr library): zarr, fsspec and VirtualiZarr consume what it
writes; `read_tensors` reads the tensors back (with numpy).

Choices, the same for both Zarr formats:

* **Names.** A tensor is the array at the key ``node_name(name)``: the name with ``%`` and
  ``/`` percent-encoded (``a/b`` becomes ``a%2Fb``, so that a ``/`` does not make a group), a
  leading ``.`` (``.zattrs``, ``..``) or ``__`` (reserved by Zarr) encoded too, and
  ``zarr.json`` (the group's own key) written ``%7Aarr.json``; the empty name is ``%``.
  Distinct tensors always get distinct keys, and the name as written is in the array's
  attributes (``safetensors_name``).
* **Dtypes** are the real type where Zarr has one (``F32`` is ``float32``). Zarr (and numpy)
  have no bfloat16 or float8: ``BF16`` is stored as ``uint16`` and every ``F8_*`` as
  ``uint8``, the same bits, with the real dtype in the array's attributes
  (``safetensors_dtype``; every array has it). Reinterpret with ml_dtypes:
  ``z[...].view(ml_dtypes.bfloat16)``, or let `read_tensors` do it. Converting would need a
  copy and a codec no Zarr reader has; carrying the bits keeps each chunk a plain byte range
  of the file. For readers that know them (TensorStore's ``zarr3`` driver, zarrs), Zarr v3
  documents can name the real types instead, from the zarr-extensions registry
  (``extension_dtypes=True``: ``bfloat16``, ``float8_e4m3fn``, ``float8_e5m2``,
  ``float8_e8m0fnu``, ``float8_e4m3fnuz``, ``float8_e5m2fnuz``; fill value the zero bit
  pattern, ``"0x0000"`` or ``"0x00"``). zarr-python 3.1 reads none of them.
* **Sub-byte dtypes** (``F4``, ``F6_*``: several values packed per byte) are a 1-d ``uint8``
  array of the tensor's bytes (`array_shape`), with its shape in ``safetensors_shape``.
* **Dimensions.** Axis ``i`` of the array at key ``k`` is named ``"k/i"`` (``_ARRAY_DIMENSIONS``
  in Zarr v2, ``dimension_names`` in v3): one dimension per axis, never shared between
  tensors (their sizes are unrelated), and never equal to an array's name.
* **Scalars** are 0-d arrays with one chunk (key ``0`` in v2, ``c`` in v3); **zero-size**
  tensors are arrays with no chunk at all (their chunk shape has 1 where the shape has 0, as
  Zarr requires chunk sizes of at least 1).
* **Fill value**: ``null`` in v2, so that xarray does not mask zeros as missing; the zero of
  the data type (``false``, ``0``, ``0.0``, ``[0.0, 0.0]``) in v3, where it is required and
  xarray does not use it as a mask. No chunk is ever missing, so it is never used.
* **Chunks** (``chunks=``): ``None``, one chunk per tensor; an ``int``, a target size in bytes
  for every tensor (`chunk_shape`: the largest contiguous chunking not above it, unless that
  is below a quarter of it: then the smallest above it); or a mapping of tensor name to
  chunk shape, the others keeping one chunk. A chunk shape is
  ``(1, ..., 1, c, d_k+1, ..., d_n)`` with ``c`` dividing ``d_k``, in the tensor's own shape
  (for ``F4``/``F6_*`` too, whose chunks must then hold whole bytes): chunk ``j`` of the grid
  is then bytes ``start + j * size`` of the file, so chunking costs nothing, and reading one
  row of a large tensor reads that row's chunk only. See `chunk_ranges`.
* **Checkpoints** (what `read_checkpoint` returns) are one group of all the shards' tensors,
  each array's chunks in its own shard's file and its shard named in the array's
  ``safetensors_file`` attribute. The group's attributes are the ``__metadata__`` entries that
  every shard has with the same value (usually ``{"format": "pt"}``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from itertools import product

from ._checkpoint import Checkpoint
from ._core.fileformat import DTYPE_BITS, DTYPES
from ._extras import optional_imports
from ._zarr_layout import ZARR_TYPES, ZARR_V2_TYPES, check_chunk_shape, chunk_grid, chunk_ranges

__all__ = ["array_metadata", "array_shape", "chunk_ranges", "chunk_shape", "node_name"]
__all__ += ["read_tensors"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence
    from typing import Any, Final, Literal, TypeAlias

    from ._core.header import Header, TensorInfo

    #: The ``chunks=`` option: one chunk, a target in bytes, or name -> chunk shape.
    Chunks: TypeAlias = int | Mapping[str, Sequence[int] | int] | None

__all__ += ["to_kerchunk", "to_zarr"]

# The divisor search tries at most this many candidates per axis. Dimensions of real files are
# far below 2**40, where the search always ends sooner; past it (a header that claims a huge
# tensor) the result is still a divisor, maybe not the one nearest the target.
_MAX_DIVISOR_TRIES: Final = 1 << 20

# What `node_name` percent-encodes anywhere in a name: the escape character itself, the
# separators zarr-python splits a path at ("/", and "\\", which it turns into "/"), and the
# control characters (no file system or JSON reader wants those in a key).
_ESCAPES: Final = {
    ord(character): f"%{ord(character):02X}"
    for character in ("%", "/", "\\", *map(chr, range(32)), "\x7f")
}
_ESCAPED: Final = re.compile("%([0-9A-F]{2})")


def node_name(name: str, /) -> str:
    """The key of a tensor's array in the Zarr group: the name, escaped where Zarr needs it.

    ``%``, the separators ``/`` and ``\\`` (zarr-python reads a backslash as a slash) and the
    control characters are percent-encoded everywhere; a leading ``.`` (so ``.``, ``..``,
    ``.zarray``), a leading ``__`` and the name ``zarr.json`` have their first character
    encoded; the empty name is ``"%"``. Any other name is its own key
    (``model.layers.0.mlp.up_proj.weight`` stays as it is). Distinct names give distinct
    keys, and every key is one path segment that zarr-python accepts.
    """
    key = name.translate(_ESCAPES)
    if not key:
        return "%"  # a lone "%" is never the escape of another name
    if key.startswith("."):
        return "%2E" + key[1:]
    if key.startswith("__"):
        return "%5F" + key[1:]
    if key == "zarr.json":
        return "%7Aarr.json"
    return key


def to_kerchunk(
    source: Header | Checkpoint,
    url: str | Mapping[str, str],
    /,
    *,
    zarr_format: Literal[2, 3] = 2,
    chunks: Chunks = None,
    extension_dtypes: bool = False,
) -> dict[str, Any]:
    """Kerchunk references (version 1) that present the file or checkpoint as a Zarr group.

    Args:
        source: A file's header (from `read_header`), or a checkpoint (from
            `read_checkpoint`): all its shards' tensors in one group.
        url: Where the file is, as the reader of the references will open it: a local path,
            ``file://``, ``https://``, ``s3://``, ... (fsspec's protocols), written into every
            chunk reference unchanged. For a checkpoint, where its shards are: the URL of its
            index or of its directory (ending in ``/``), each shard's name (as the index
            writes it) put after the last ``/``; or a mapping of shard name to URL.
        zarr_format: 2 (the default, what kerchunk writes and VirtualiZarr's kerchunk
            parser reads): ``.zgroup``, ``.zattrs``, ``.zarray`` documents and chunk keys
            ``name/0.0``. 3: ``zarr.json`` documents and chunk keys ``name/c/0/0``; fsspec
            serves them as well, open them with ``zarr_format=3``. The documents are those
            of `to_zarr` with the same `zarr_format`.
        chunks: One chunk per tensor (``None``), a target chunk size in bytes, or tensor
            name -> chunk shape; see `chunk_shape` and the module documentation.
        extension_dtypes: With ``zarr_format=3``, name ``BF16`` and ``F8_*`` by their Zarr
            extension data types (``bfloat16``, ``float8_e4m3fn``, ...) rather than as
            unsigned integers of the same width: for readers that know them, such as
            TensorStore; zarr-python 3.1 does not. See the module documentation.

    Returns:
        ``{"version": 1, "refs": {key: value}}``, JSON-serialisable: metadata documents are
        JSON strings, chunks are ``[url, offset, length]``. One array per tensor, its chunks
        in C order of the grid (none for a zero-size tensor); see the module documentation
        for names, dtypes and attributes. Open with fsspec and zarr::

            fs = fsspec.filesystem("reference", fo=refs, asynchronous=True)
            group = zarr.open_group(zarr.storage.FsspecStore(fs, read_only=True), mode="r")

    Raises:
        ValueError: `zarr_format` is neither 2 nor 3, or 2 with `extension_dtypes`;
            `chunks` is not a positive size or names a tensor that is not there, or a chunk
            shape that is not a contiguous, dividing chunking of its tensor (the message
            says why).
        KeyError: `url` is a mapping without one of the checkpoint's shards.
    """
    documents = to_zarr(
        source, zarr_format=zarr_format, chunks=chunks, extension_dtypes=extension_dtypes
    )
    refs: dict[str, Any] = {
        key: json.dumps(document, separators=(",", ":")) for key, document in documents.items()
    }
    for info, shard in tensor_entries(source):
        if isinstance(source, Checkpoint):
            where = _shard_url(url, shard)
        elif isinstance(url, str):
            where = url
        else:
            raise TypeError("url must be a string for a single file's header")
        node = node_name(info.name)
        for key, offset, length in _chunk_refs(info, chunk_shape(info, chunks=chunks), zarr_format):
            refs[f"{node}/{key}"] = [where, offset, length]
    return {"version": 1, "refs": refs}


def to_zarr(
    source: Header | Checkpoint,
    /,
    *,
    zarr_format: Literal[2, 3] = 3,
    chunks: Chunks = None,
    extension_dtypes: bool = False,
) -> dict[str, dict[str, Any]]:
    """The Zarr metadata documents that present the file or checkpoint as a Zarr group.

    Args:
        source: A file's header (from `read_header`), or a checkpoint (from
            `read_checkpoint`).
        zarr_format: 3 (the default): a ``zarr.json`` document per node. 2: ``.zgroup``,
            ``.zattrs`` and ``.zarray`` documents.
        chunks: As for `to_kerchunk`.
        extension_dtypes: As for `to_kerchunk`: Zarr v3 only.

    Returns:
        Store key -> the JSON document at that key (a dict, to be written as JSON). For Zarr
        v3, ``"zarr.json"`` for the group (the ``__metadata__`` map as its attributes) and
        ``"<key>/zarr.json"`` for each tensor's array, ``<key>`` being ``node_name(name)``
        and the document its `array_metadata`. For Zarr v2, ``".zgroup"`` and ``".zattrs"``
        (the ``__metadata__`` map) for the group, ``"<key>/.zarray"`` and
        ``"<key>/.zattrs"`` for each array. Uncompressed (little-endian) chunks at
        ``<key>/c/0/0...`` in v3 (``<key>/c`` for a scalar) and ``<key>/0.0...`` in v2
        (``<key>/0`` for a scalar), none for a zero-size tensor; chunk ``j`` of an array (in
        C order of its grid) is bytes ``t.start + j * size`` to ``t.start + (j + 1) * size``
        of its file (`chunk_ranges` lists them). Serve the documents and those byte
        ranges from any store and zarr-python 3 reads the tensors; or use `to_kerchunk`,
        which adds the chunk references.

    Raises:
        ValueError: `zarr_format` is neither 2 nor 3, or `chunks` is not valid (see
            `to_kerchunk`).
    """
    _check_zarr_format(zarr_format, extension_dtypes)
    entries = list(tensor_entries(source))
    check_chunks_option(chunks, entries)
    group_attributes = attributes_of_group(source)
    documents: dict[str, dict[str, Any]]
    if zarr_format == 3:
        documents = {
            "zarr.json": {"zarr_format": 3, "node_type": "group", "attributes": group_attributes}
        }
    else:
        documents = {".zgroup": {"zarr_format": 2}, ".zattrs": group_attributes}
    for info, shard in entries:
        node = node_name(info.name)
        sizes = chunk_shape(info, chunks=chunks)
        if zarr_format == 3:
            document = _array_metadata(info, 3, sizes, extension_dtypes)
            if shard is not None:
                document["attributes"]["safetensors_file"] = shard
            documents[f"{node}/zarr.json"] = document
        else:
            documents[f"{node}/.zarray"] = _array_metadata(info, 2, sizes, False)
            documents[f"{node}/.zattrs"] = {
                "_ARRAY_DIMENSIONS": dimension_names(node, array_shape(info)),
                **tensor_attributes(info, shard),
            }
    return documents


def array_metadata(
    info: TensorInfo,
    /,
    *,
    zarr_format: Literal[2, 3] = 3,
    chunks: int | Sequence[int] | None = None,
    extension_dtypes: bool = False,
) -> dict[str, Any]:
    """The metadata document of one tensor's Zarr array, as `to_zarr` writes it.

    For Zarr v3 (the default), the array's ``zarr.json`` (its attributes and dimension
    names included); for Zarr v2, its ``.zarray`` (v2 keeps the attributes, with the
    dimension names, in a ``.zattrs`` document of their own: see `to_zarr`). `chunks` is the
    tensor's chunk shape, a target size in bytes, or ``None`` for one chunk (`chunk_shape`).
    `extension_dtypes` is as for `to_kerchunk`.

    Raises:
        ValueError: `zarr_format` is neither 2 nor 3, or 2 with `extension_dtypes`, or
            `chunks` is not valid.
    """
    _check_zarr_format(zarr_format, extension_dtypes)
    sizes = chunk_shape(info, chunks=chunks)
    return _array_metadata(info, zarr_format, sizes, extension_dtypes)


def chunk_shape(info: TensorInfo, /, *, chunks: Chunks | Sequence[int] = None) -> tuple[int, ...]:
    """The tensor's chunk shape (in its own shape) for a ``chunks=`` option.

    ``None``: the whole tensor, one chunk. An ``int``: a target size in bytes, the largest
    contiguous chunking whose chunks are not above it if they are at least a quarter of it,
    else the smallest whose chunks are above it (up to the whole tensor): never chunks below
    a quarter of the target unless the tensor is, so that one target works for every tensor
    of a file (an axis of 30,522 = 2 x 3 x 5,087 rows of 1.5 KiB, with a 1 MiB target, is
    cut in 6 chunks of 5,087 rows, not 5,087 chunks of 6). A mapping: the tensor's entry (by
    its name as in the file: a chunk shape, or a target of its own), or the whole tensor when
    it has none. A sequence: that shape. Scalars always get ``()``; zero-size tensors, which
    have no chunk, their shape with 0s made 1 unless a shape is given.

    Raises:
        ValueError: A target below 1 byte, or a chunk shape that is not a contiguous,
            dividing chunking of the tensor (``(1, ..., 1, c, d_k+1, ..., d_n)``, ``c``
            dividing ``d_k``), saying why.
    """
    if isinstance(chunks, Mapping):
        chunks = chunks.get(info.name)
    if chunks is None:
        return tuple(max(size, 1) for size in info.shape)
    if isinstance(chunks, bool):
        raise ValueError(f"chunks must be a size in bytes or a chunk shape, not {chunks!r}")
    if isinstance(chunks, int):
        _check_target(chunks)
        return auto_chunk_shape(info, chunks)
    return check_chunk_shape(info, chunks)


def read_tensors(source: Any, /, *, names: Iterable[str] | None = None) -> dict[str, Any]:
    """Read the tensors back from what this module (or the VirtualiZarr parser) made.

    Args:
        source: A zarr ``Group`` (of kerchunk references through fsspec, an Icechunk
            store, a VirtualiZarr ``ManifestStore``, ...) or an xarray ``Dataset`` whose
            variables can be loaded (``xarray.open_zarr``, or ``loadable_variables``).
        names: The tensors to read, by name as in the file; all of them by default.

    Returns:
        Tensor name (from each array's ``safetensors_name``) -> numpy array of the tensor's
        shape and dtype. ``BF16`` and ``F8_*`` are viewed as ml_dtypes types (their bits are
        unchanged); ``F4`` and ``F6_*``, which numpy cannot hold, are their packed bytes, a
        1-d ``uint8`` array (their shape is ``safetensors_shape`` in the attributes).

    Raises:
        KeyError: A name in `names` is not in `source`.
        ModuleNotFoundError: A ``BF16`` or ``F8_*`` tensor is read without ml_dtypes.
    """
    if hasattr(source, "data_vars"):  # an xarray Dataset
        found = {
            str(variable.attrs.get("safetensors_name", _decoded(str(key)))): (variable, False)
            for key, variable in source.data_vars.items()
        }
    else:  # a zarr Group
        found = {
            str(array.attrs.get("safetensors_name", _decoded(key))): (array, True)
            for key, array in source.arrays()
        }
    wanted = list(found) if names is None else list(names)
    tensors: dict[str, Any] = {}
    for name in wanted:
        if name not in found:
            raise KeyError(f"no tensor named {name!r}")
        node, is_zarr = found[name]
        values = node[...] if is_zarr else node.values
        tensors[name] = _real_dtype(values, node.attrs.get("safetensors_dtype"))
    return tensors


def array_shape(info: TensorInfo, /) -> tuple[int, ...]:
    """The shape of the tensor's Zarr array: its shape, or ``(nbytes,)`` for a packed dtype."""
    return (info.nbytes,) if DTYPES[info.dtype].packed else info.shape


def _array_metadata(
    info: TensorInfo, zarr_format: int, sizes: tuple[int, ...], extension_dtypes: bool
) -> dict[str, Any]:
    dtype = DTYPES[info.dtype]
    shape = array_shape(info)
    chunks = list(_array_chunks(info, sizes))
    if zarr_format == 2:
        return {
            "zarr_format": 2,
            "shape": list(shape),
            "chunks": chunks,
            "dtype": ZARR_V2_TYPES[dtype.name],
            "compressor": None,
            "filters": None,
            "fill_value": None,
            "order": "C",
            "dimension_separator": ".",
        }
    # The bytes codec's "endian" is required for multi-byte types and meaningless (and
    # left out by zarr-python) for one-byte types, the "|" of a v2 type string.
    codec: dict[str, Any] = {"name": "bytes"}
    if not ZARR_V2_TYPES[dtype.name].startswith("|"):
        codec["configuration"] = {"endian": "little"}
    data_type = ZARR_TYPES[dtype.name]
    fill_value = _zero_of(data_type)
    if extension_dtypes and dtype.ml_dtypes is not None and not dtype.packed:
        # The registry's name is ml_dtypes' name; its fill value, the zero bit pattern
        # (float8_e8m0fnu has no zero value).
        data_type, fill_value = dtype.ml_dtypes, "0x" + "00" * (dtype.bits // 8)
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill_value,
        "codecs": [codec],
        "attributes": tensor_attributes(info, None),
        "dimension_names": dimension_names(node_name(info.name), shape),
    }


def _array_chunks(info: TensorInfo, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The Zarr array's chunk shape: the tensor's, or its bytes for a packed dtype."""
    if not DTYPES[info.dtype].packed:
        return sizes
    if info.numel == 0:
        return (1,)
    return (chunk_grid(info, sizes)[1],)


def _chunk_refs(
    info: TensorInfo, sizes: tuple[int, ...], zarr_format: int
) -> Iterator[tuple[str, int, int]]:
    """(chunk key, offset, length) of each chunk of the tensor's array, in file order."""
    if info.numel == 0:
        return
    grid, length = chunk_grid(info, sizes)
    if DTYPES[info.dtype].packed:  # a 1-d array of bytes: chunk j is the j-th in file order
        grid = (math.prod(grid),)
    offset = info.start
    for index in product(*map(range, grid)):
        if zarr_format == 3:
            key = "/".join(("c", *map(str, index)))
        else:
            key = ".".join(map(str, index)) or "0"  # a scalar's one chunk is "0"
        yield key, offset, length
        offset += length


def tensor_entries(source: Header | Checkpoint) -> Iterator[tuple[TensorInfo, str | None]]:
    """Each tensor with its shard's name (``None`` for a single file's header)."""
    if isinstance(source, Checkpoint):
        for shard, header in source.files.items():
            for info in header.tensors.values():
                yield info, shard
    else:
        for info in source.tensors.values():
            yield info, None


def attributes_of_group(source: Header | Checkpoint) -> dict[str, Any]:
    if not isinstance(source, Checkpoint):
        return dict(source.metadata) if source.metadata is not None else {}
    shared: dict[str, Any] | None = None
    for header in source.files.values():
        metadata = dict(header.metadata or {})
        shared = (
            metadata
            if shared is None
            else {key: value for key, value in shared.items() if metadata.get(key) == value}
        )
    return shared or {}


def _shard_url(url: str | Mapping[str, str], shard: str | None) -> str:
    assert shard is not None  # a checkpoint's entries name their shard
    if isinstance(url, str):
        from ._fetch import beside  # the rule every reader names a shard by

        return beside(url, shard)
    return url[shard]


def check_chunks_option(
    chunks: object, entries: list[tuple[TensorInfo, str | None]] | None
) -> None:
    """A mapping must name tensors that are there (unless `entries` is None); a target must
    be a positive integer."""
    if isinstance(chunks, Mapping):
        if entries is None:
            return
        names = {info.name for info, _ in entries}
        unknown = [name for name in chunks if name not in names]
        if unknown:
            raise ValueError(f"chunks names tensors that are not there: {unknown[:5]!r}")
    elif isinstance(chunks, bool) or not (chunks is None or isinstance(chunks, int)):
        raise ValueError(
            "chunks must be None, a target size in bytes (an int) or a mapping of tensor "
            f"name to chunk shape, not {chunks!r}"
        )
    elif isinstance(chunks, int):
        _check_target(chunks)


def _check_target(target: int) -> None:
    if target < 1:
        raise ValueError(f"a target chunk size must be at least 1 byte, not {target!r}")


def _check_zarr_format(zarr_format: object, extension_dtypes: bool = False) -> None:
    if zarr_format not in (2, 3):
        raise ValueError(f"zarr_format must be 2 or 3, not {zarr_format!r}")
    if extension_dtypes and zarr_format == 2:
        raise ValueError(
            "extension_dtypes needs zarr_format=3: Zarr v2 has no names for bfloat16 or float8"
        )


def _zero_of(data_type: str) -> object:
    """The v3 fill value: the data type's zero, in the JSON form Zarr v3 gives it."""
    if data_type == "bool":
        return False
    if data_type.startswith("complex"):
        return [0.0, 0.0]
    if data_type.startswith("float"):
        return 0.0
    return 0


def dimension_names(node: str, shape: tuple[int, ...]) -> list[str]:
    """The dimension names of a tensor's array: ``<key>/0``, ``<key>/1``, ..."""
    return [f"{node}/{axis}" for axis in range(len(shape))]


def tensor_attributes(info: TensorInfo, shard: str | None) -> dict[str, Any]:
    """The attributes of a tensor's array: its name and dtype (and shape, when packed) as in
    the file, and its shard's name in a checkpoint."""
    attributes: dict[str, Any] = {"safetensors_name": info.name, "safetensors_dtype": info.dtype}
    if DTYPES[info.dtype].packed:
        attributes["safetensors_shape"] = list(info.shape)
    if shard is not None:
        attributes["safetensors_file"] = shard
    return attributes


def _decoded(key: str) -> str:
    """The tensor name of a key made by `node_name` (for arrays without their attributes):
    every ``%XX`` decoded (a ``%`` of the name is ``%25`` in its key)."""
    if key == "%":
        return ""
    return _ESCAPED.sub(lambda match: chr(int(match[1], 16)), key)


def _real_dtype(values: Any, dtype: object) -> Any:
    """The values as numpy holds the safetensors dtype: ml_dtypes types for BF16 and F8."""
    with optional_imports("numpy", "safetensors_header.zarr.read_tensors"):
        import numpy as np

    values = np.asarray(values)
    kind = DTYPES.get(dtype) if isinstance(dtype, str) else None
    if kind is None or kind.ml_dtypes is None:
        return values
    with optional_imports("ml-dtypes", f"reading a {dtype} tensor"):
        import ml_dtypes
    return values.view(getattr(ml_dtypes, kind.ml_dtypes))


def auto_chunk_shape(info: TensorInfo, target: int, /) -> tuple[int, ...]:
    """The contiguous chunk shape for a target chunk size of `target` bytes.

    The largest contiguous chunk not above `target`, when it is at least a quarter of it;
    otherwise the smallest one above `target` (up to the whole tensor). A chunk is never below
    a quarter of the target unless the whole tensor is, because a tensor whose axis has no
    divisor near the target (an embedding of 30,522 = 2 x 3 x 5,087 rows) would otherwise be
    cut into thousands of tiny chunks, each a request: a few chunks larger than the target
    cost far less to read than many much smaller. A tensor at most `target` bytes is one
    chunk; a scalar is always one; a zero-size tensor, which has no chunk, gets its shape with
    0s made 1 (Zarr's chunk sizes are at least 1). Packed dtypes (``F4``, ``F6_*``) are cut
    into whole bytes only.
    """
    shape = info.shape
    if 0 in shape:
        return tuple(max(size, 1) for size in shape)
    if not shape:
        return ()
    bits = DTYPE_BITS[info.dtype]
    budget = target * 8  # in bits, for the packed dtypes
    below: tuple[int, int, int] | None = None  # (bits, axis, size): the largest not above
    above: tuple[int, int, int] | None = None  # the smallest above the budget
    tail = 1  # elements after `axis`
    for axis in reversed(range(len(shape))):
        unit = tail * bits  # the bits of a chunk that takes 1 on `axis`
        step = 8 // math.gcd(unit, 8)  # sizes on `axis` must be multiples of it: whole bytes
        length = shape[axis]
        if length % step == 0:
            groups, group = length // step, step * unit  # sizes are k * step, k dividing groups
            count = budget // group
            if count >= 1:
                size = step * _largest_divisor_at_most(groups, count)
                if below is None or size * unit > below[0]:
                    below = (size * unit, axis, size)
            need = -(-budget // group)  # the fewest groups above (or at) the budget
            if need <= groups:
                size = step * (groups // _largest_divisor_at_most(groups, groups // need))
                if size * unit > budget and (above is None or size * unit < above[0]):
                    above = (size * unit, axis, size)
        tail *= length
    # The first axis always gives one of the two: the whole tensor's bytes.
    if below is not None and (4 * below[0] >= budget or above is None):
        _, axis, size = below
    else:
        assert above is not None
        _, axis, size = above
    return (1,) * axis + (size,) + shape[axis + 1 :]


def _largest_divisor_at_most(number: int, limit: int) -> int:
    """The largest divisor of `number` (>= 1) that is at most `limit` (>= 1)."""
    if limit >= number:
        return number
    best = 1
    # Divisors pair up as (i, number // i) with i <= sqrt(number); the large halves shrink as
    # i grows, so the first that fits is the largest of them, and above every small half.
    for tries, small in enumerate(range(1, math.isqrt(number) + 1)):
        if tries >= _MAX_DIVISOR_TRIES:
            break
        if number % small:
            continue
        if number // small <= limit:
            return number // small
        if small <= limit:
            best = small
        else:
            break  # every later small half is larger still, and no large half fits yet
    return best
