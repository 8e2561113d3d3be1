"""A safetensors file as a Zarr group: Zarr v2 and v3 metadata, and kerchunk references.

    >>> from safetensors_header import read_header
    >>> from safetensors_header.zarr import to_kerchunk, to_zarr
    >>> header = read_header("model.safetensors")  # doctest: +SKIP
    >>> refs = to_kerchunk(header, "s3://bucket/model.safetensors")  # doctest: +SKIP
    >>> to_zarr(header)["zarr.json"]  # doctest: +SKIP
    {'zarr_format': 3, 'node_type': 'group', 'attributes': {'format': 'pt'}}

Every tensor is one uncompressed Zarr array of one chunk, the tensor's byte range in the
file; the ``__metadata__`` map is the group's attributes. Plain dicts and JSON, standard
library only (importing this module imports no Zarr library): zarr, fsspec and VirtualiZarr
consume what it writes.

Choices, the same for both Zarr formats:

* **Names.** A tensor is the array at the key ``node_name(name)``: the name with ``%`` and
  ``/`` percent-encoded (``a/b`` becomes ``a%2Fb``, so that a ``/`` does not make a group), a
  leading ``.`` (``.zattrs``, ``..``) or ``__`` (reserved by Zarr) encoded too, and
  ``zarr.json`` (the group's own key) written ``%7Aarr.json``; the empty name is ``%``.
  Distinct tensors always get distinct keys, and the name as written is in the array's
  attributes (``safetensors_name``).
* **Dtypes** are ``Dtype.zarr`` (v3) and ``Dtype.zarr_v2`` of ``DTYPES``. Zarr (and numpy)
  have no bfloat16 or float8: ``BF16`` is stored as ``uint16`` and every ``F8_*`` as
  ``uint8``, the same bits, with the real dtype in the array's attributes
  (``safetensors_dtype``; every array has it). Reinterpret with ml_dtypes:
  ``z[...].view(ml_dtypes.bfloat16)``. Converting would need a copy and a codec no Zarr
  reader has; carrying the bits keeps the chunk a plain byte range of the file.
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
"""

from __future__ import annotations

import json

from ._format import DTYPES

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any, Literal

    from ._header import Header, TensorInfo

__all__ = ["array_metadata", "array_shape", "node_name", "to_kerchunk", "to_zarr"]


def node_name(name: str, /) -> str:
    """The key of a tensor's array in the Zarr group: the name, escaped where Zarr needs it.

    ``%`` and ``/`` are percent-encoded everywhere; a leading ``.`` or ``__``, and the name
    ``zarr.json``, have their first character encoded; the empty name is ``"%"``. Any other
    name is its own key (``model.layers.0.mlp.up_proj.weight`` stays as it is). Distinct names
    give distinct keys.
    """
    key = name.replace("%", "%25").replace("/", "%2F")
    if not key:
        return "%"  # a lone "%" is never the escape of another name
    if key.startswith("."):
        return "%2E" + key[1:]
    if key.startswith("__"):
        return "%5F" + key[1:]
    if key == "zarr.json":
        return "%7Aarr.json"
    return key


def to_kerchunk(header: Header, url: str, /, *, zarr_format: Literal[2, 3] = 2) -> dict[str, Any]:
    """Kerchunk references (version 1) that present the file as a Zarr group.

    Args:
        header: The file's header (from `read_header`).
        url: Where the file is, as the reader of the references will open it: a local path,
            ``file://``, ``https://``, ``s3://``, ... (fsspec's protocols). Written into
            every chunk reference, unchanged.
        zarr_format: 2 (the default, what kerchunk writes and VirtualiZarr's kerchunk
            parser reads): ``.zgroup``, ``.zattrs``, ``.zarray`` documents and chunk keys
            ``name/0.0``. 3: ``zarr.json`` documents and chunk keys ``name/c/0/0``; fsspec
            serves them as well, open them with ``zarr_format=3``. The documents are those
            of `to_zarr` with the same `zarr_format`.

    Returns:
        ``{"version": 1, "refs": {key: value}}``, JSON-serialisable: metadata documents are
        JSON strings, chunks are ``[url, offset, length]``. One array per tensor, one chunk
        per array (none for a zero-size tensor); see the module documentation for names,
        dtypes and attributes. Open with fsspec and zarr::

            fs = fsspec.filesystem("reference", fo=refs, asynchronous=True)
            group = zarr.open_group(zarr.storage.FsspecStore(fs, read_only=True), mode="r")

    Raises:
        ValueError: `zarr_format` is neither 2 nor 3.
    """
    refs: dict[str, Any] = {
        key: json.dumps(document, separators=(",", ":"))
        for key, document in to_zarr(header, zarr_format=zarr_format).items()
    }
    for info in header.tensors.values():
        shape = array_shape(info)
        if 0 in shape:
            continue  # a zero-size array has no chunk
        if zarr_format == 3:
            chunk = "/".join(("c", *("0" * len(shape))))
        else:
            chunk = ".".join("0" * len(shape)) or "0"
        refs[f"{node_name(info.name)}/{chunk}"] = [url, info.start, info.nbytes]
    return {"version": 1, "refs": refs}


def to_zarr(header: Header, /, *, zarr_format: Literal[2, 3] = 3) -> dict[str, dict[str, Any]]:
    """The Zarr metadata documents that present the file as a Zarr group.

    Args:
        header: The file's header (from `read_header`).
        zarr_format: 3 (the default): a ``zarr.json`` document per node. 2: ``.zgroup``,
            ``.zattrs`` and ``.zarray`` documents.

    Returns:
        Store key -> the JSON document at that key (a dict, to be written as JSON). For Zarr
        v3, ``"zarr.json"`` for the group (the ``__metadata__`` map as its attributes) and
        ``"<key>/zarr.json"`` for each tensor's array, ``<key>`` being ``node_name(name)``
        and the document its `array_metadata`. For Zarr v2, ``".zgroup"`` and ``".zattrs"``
        (the ``__metadata__`` map) for the group, ``"<key>/.zarray"`` and
        ``"<key>/.zattrs"`` for each array. Each array has one chunk, uncompressed
        (little-endian), at ``<key>/c/0/0...`` in v3 (``<key>/c`` for a scalar) and
        ``<key>/0.0...`` in v2 (``<key>/0`` for a scalar), none for a zero-size tensor,
        whose bytes are ``file[t.start:t.end]``. Serve the documents and those byte ranges
        from any store and zarr-python 3 reads the tensors; or use `to_kerchunk`, which adds
        the chunk references.

    Raises:
        ValueError: `zarr_format` is neither 2 nor 3.
    """
    _check_zarr_format(zarr_format)
    group_attributes = dict(header.metadata) if header.metadata is not None else {}
    documents: dict[str, dict[str, Any]]
    if zarr_format == 3:
        documents = {
            "zarr.json": {"zarr_format": 3, "node_type": "group", "attributes": group_attributes}
        }
    else:
        documents = {".zgroup": {"zarr_format": 2}, ".zattrs": group_attributes}
    for info in header.tensors.values():
        node = node_name(info.name)
        if zarr_format == 3:
            documents[f"{node}/zarr.json"] = array_metadata(info)
        else:
            documents[f"{node}/.zarray"] = array_metadata(info, zarr_format=2)
            documents[f"{node}/.zattrs"] = {
                "_ARRAY_DIMENSIONS": _dimension_names(node, array_shape(info)),
                **_tensor_attributes(info),
            }
    return documents


def array_metadata(info: TensorInfo, /, *, zarr_format: Literal[2, 3] = 3) -> dict[str, Any]:
    """The metadata document of one tensor's Zarr array, as `to_zarr` writes it.

    For Zarr v3 (the default), the array's ``zarr.json`` (its attributes and dimension
    names included); for Zarr v2, its ``.zarray`` (v2 keeps the attributes, with the
    dimension names, in a ``.zattrs`` document of their own: see `to_zarr`).

    Raises:
        ValueError: `zarr_format` is neither 2 nor 3.
    """
    _check_zarr_format(zarr_format)
    dtype = DTYPES[info.dtype]
    shape = array_shape(info)
    chunk_shape = [max(size, 1) for size in shape]  # Zarr needs chunk sizes of at least 1
    if zarr_format == 2:
        return {
            "zarr_format": 2,
            "shape": list(shape),
            "chunks": chunk_shape,
            "dtype": dtype.zarr_v2,
            "compressor": None,
            "filters": None,
            "fill_value": None,
            "order": "C",
            "dimension_separator": ".",
        }
    # The bytes codec's "endian" is required for multi-byte types and meaningless (and
    # left out by zarr-python) for one-byte types, the "|" of a v2 type string.
    codec: dict[str, Any] = {"name": "bytes"}
    if not dtype.zarr_v2.startswith("|"):
        codec["configuration"] = {"endian": "little"}
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": dtype.zarr,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunk_shape}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": _zero_of(dtype.zarr),
        "codecs": [codec],
        "attributes": _tensor_attributes(info),
        "dimension_names": _dimension_names(node_name(info.name), shape),
    }


def array_shape(info: TensorInfo, /) -> tuple[int, ...]:
    """The shape of the tensor's Zarr array: its shape, or ``(nbytes,)`` for a packed dtype."""
    return (info.nbytes,) if DTYPES[info.dtype].packed else info.shape


def _check_zarr_format(zarr_format: object) -> None:
    if zarr_format not in (2, 3):
        raise ValueError(f"zarr_format must be 2 or 3, not {zarr_format!r}")


def _zero_of(data_type: str) -> object:
    """The v3 fill value: the data type's zero, in the JSON form Zarr v3 gives it."""
    if data_type == "bool":
        return False
    if data_type.startswith("complex"):
        return [0.0, 0.0]
    if data_type.startswith("float"):
        return 0.0
    return 0


def _dimension_names(node: str, shape: tuple[int, ...]) -> list[str]:
    return [f"{node}/{axis}" for axis in range(len(shape))]


def _tensor_attributes(info: TensorInfo) -> dict[str, Any]:
    attributes: dict[str, Any] = {"safetensors_name": info.name, "safetensors_dtype": info.dtype}
    if DTYPES[info.dtype].packed:
        attributes["safetensors_shape"] = list(info.shape)
    return attributes
