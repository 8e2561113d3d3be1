"""A safetensors file as a Zarr group: kerchunk references and Zarr v3 metadata.

Every tensor is one uncompressed Zarr array of one chunk, the tensor's byte range in the
file; the ``__metadata__`` map is the group's attributes. Plain dicts and JSON, standard
library only: zarr, fsspec and VirtualiZarr consume what this module writes.

Choices, the same for both Zarr formats:

* **Names.** A tensor is the array at the key ``zarr_node_name(name)``: the name with ``%``
  and ``/`` percent-encoded (``a/b`` becomes ``a%2Fb``, so that a ``/`` does not make a
  group), a leading ``.`` (``.zattrs``, ``..``) or ``__`` (reserved by Zarr) encoded too, and
  ``zarr.json`` (the group's own key) written ``%7Aarr.json``; the empty name is ``%``.
  Distinct tensors always get distinct keys, and the name as written is in the array's
  attributes (``safetensors_name``).
* **Dtypes.** Zarr (and numpy) have no bfloat16 or float8: ``BF16`` is stored as ``uint16``
  and every ``F8_*`` as ``uint8``, the same bits, with the real dtype in the array's
  attributes (``safetensors_dtype``; every array has it). Reinterpret with ml_dtypes:
  ``z[...].view(ml_dtypes.bfloat16)``. Converting would need a copy and a codec no Zarr
  reader has; carrying the bits keeps the chunk a plain byte range of the file.
* **Sub-byte dtypes** (``F4``, ``F6_*``: several values packed per byte) are a 1-d ``uint8``
  array of the tensor's bytes, with its shape in ``safetensors_shape``.
* **Dimensions.** Axis ``i`` of the array at key ``k`` is named ``"k/i"`` (``_ARRAY_DIMENSIONS``
  in Zarr v2, ``dimension_names`` in v3): one dimension per axis, never shared between
  tensors (their sizes are unrelated), and never equal to an array's name.
* **Scalars** are 0-d arrays with one chunk (key ``0`` in v2, ``c`` in v3); **zero-size**
  tensors are arrays with no chunk at all (their chunk shape has 1 where the shape has 0, as
  Zarr requires chunk sizes of at least 1).
* **Fill value**: ``null`` in v2, so that xarray does not mask zeros as missing; 0 (``false``,
  ``[0.0, 0.0]``) in v3, where it is required and xarray does not use it as a mask. No chunk
  is ever missing, so it is never used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from ._header import Header, TensorInfo

__all__ = ["to_kerchunk", "to_zarr_v3", "zarr_node_name"]

# safetensors dtype -> (numpy/Zarr v2 typestr, Zarr v3 data_type, v3 fill value). All data is
# little-endian. One-byte types are written "|u1" (not "<u1"): zarr-python 3 accepts only
# that form for them.
_STORAGE: Final[Mapping[str, tuple[str, str, object]]] = {
    "BOOL": ("|b1", "bool", False),
    "U8": ("|u1", "uint8", 0),
    "I8": ("|i1", "int8", 0),
    "I16": ("<i2", "int16", 0),
    "U16": ("<u2", "uint16", 0),
    "F16": ("<f2", "float16", 0.0),
    "I32": ("<i4", "int32", 0),
    "U32": ("<u4", "uint32", 0),
    "F32": ("<f4", "float32", 0.0),
    "C64": ("<c8", "complex64", [0.0, 0.0]),
    "F64": ("<f8", "float64", 0.0),
    "I64": ("<i8", "int64", 0),
    "U64": ("<u8", "uint64", 0),
}
# No Zarr reader knows these: the same bits as an unsigned integer of the same width.
_CARRIED: Final[Mapping[str, tuple[str, str, object]]] = {
    "BF16": _STORAGE["U16"],
    "F8_E5M2": _STORAGE["U8"],
    "F8_E4M3": _STORAGE["U8"],
    "F8_E8M0": _STORAGE["U8"],
    "F8_E4M3FNUZ": _STORAGE["U8"],
    "F8_E5M2FNUZ": _STORAGE["U8"],
}
_ONE_BYTE: Final = frozenset({"bool", "uint8", "int8"})


def zarr_node_name(name: str, /) -> str:
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
            ``name/0.0``. 3: ``zarr.json`` documents (those of `to_zarr_v3`) and chunk keys
            ``name/c/0/0``; fsspec serves them as well, open them with ``zarr_format=3``.

    Returns:
        ``{"version": 1, "refs": {key: value}}``, JSON-serialisable: metadata documents are
        JSON strings, chunks are ``[url, offset, length]``. One array per tensor, one chunk
        per array (none for a zero-size tensor); see the module documentation for names,
        dtypes and attributes. Open with fsspec and zarr::

            fs = fsspec.filesystem("reference", fo=refs, asynchronous=True)
            group = zarr.open_group(zarr.storage.FsspecStore(fs, read_only=True), mode="r")
    """
    if zarr_format not in (2, 3):
        raise ValueError(f"zarr_format must be 2 or 3, not {zarr_format!r}")
    refs: dict[str, Any] = {}
    if zarr_format == 3:
        for key, document in to_zarr_v3(header).items():
            refs[key] = _dumps(document)
        for info in header.tensors.values():
            chunk = _chunk_key_v3(info)
            if chunk is not None:
                refs[f"{zarr_node_name(info.name)}/{chunk}"] = [url, info.start, info.nbytes]
        return {"version": 1, "refs": refs}
    refs[".zgroup"] = _dumps({"zarr_format": 2})
    refs[".zattrs"] = _dumps(_group_attributes(header))
    for info in header.tensors.values():
        node = zarr_node_name(info.name)
        shape, typestr, _, _ = _layout(info)
        refs[f"{node}/.zarray"] = _dumps(
            {
                "zarr_format": 2,
                "shape": list(shape),
                "chunks": _chunk_shape(shape),
                "dtype": typestr,
                "compressor": None,
                "filters": None,
                "fill_value": None,
                "order": "C",
                "dimension_separator": ".",
            }
        )
        attributes = {"_ARRAY_DIMENSIONS": _dimension_names(node, shape)}
        attributes.update(_array_attributes(info))
        refs[f"{node}/.zattrs"] = _dumps(attributes)
        if 0 not in shape:
            chunk = ".".join("0" * len(shape)) or "0"
            refs[f"{node}/{chunk}"] = [url, info.start, info.nbytes]
    return {"version": 1, "refs": refs}


def to_zarr_v3(header: Header, /) -> dict[str, dict[str, Any]]:
    """Zarr v3 metadata documents that present the file as a Zarr group.

    Returns:
        Store key -> the ``zarr.json`` document at that key (a dict, to be written as JSON):
        ``"zarr.json"`` for the group (the ``__metadata__`` map as its attributes) and
        ``"<key>/zarr.json"`` for each tensor's array, ``<key>`` being
        ``zarr_node_name(name)``. Each array has one chunk, uncompressed (the ``bytes``
        codec, little-endian), at ``<key>/c/0/0...`` (``<key>/c`` for a scalar; none for a
        zero-size tensor), whose bytes are ``file[t.start:t.end]``. Serve the documents and
        those byte ranges from any store and zarr-python 3 reads the tensors; or use
        ``to_kerchunk(header, url, zarr_format=3)``, which adds the chunk references.
    """
    documents: dict[str, dict[str, Any]] = {
        "zarr.json": {
            "zarr_format": 3,
            "node_type": "group",
            "attributes": _group_attributes(header),
        }
    }
    for info in header.tensors.values():
        node = zarr_node_name(info.name)
        documents[f"{node}/zarr.json"] = array_v3(info, node)
    return documents


def array_v3(info: TensorInfo, node: str) -> dict[str, Any]:
    """The ``zarr.json`` document of one tensor's array (`node` is its key)."""
    shape, _, data_type, fill_value = _layout(info)
    # The bytes codec's "endian" is required for multi-byte types and meaningless (and
    # left out by zarr-python) for one-byte types.
    codec: dict[str, Any] = {"name": "bytes"}
    if data_type not in _ONE_BYTE:
        codec["configuration"] = {"endian": "little"}
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": data_type,
        "chunk_grid": {
            "name": "regular",
            "configuration": {"chunk_shape": _chunk_shape(shape)},
        },
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill_value,
        "codecs": [codec],
        "attributes": _array_attributes(info),
        "dimension_names": _dimension_names(node, shape),
    }


def stored_shape(info: TensorInfo) -> tuple[int, ...]:
    """The shape of the tensor's Zarr array: its shape, or ``(nbytes,)`` for sub-byte."""
    return _layout(info)[0]


def _chunk_key_v3(info: TensorInfo) -> str | None:
    shape = stored_shape(info)
    if 0 in shape:
        return None  # a zero-size array has no chunk
    return "/".join(("c", *("0" * len(shape))))


def _layout(info: TensorInfo) -> tuple[tuple[int, ...], str, str, object]:
    """(shape as stored, v2 typestr, v3 data_type, v3 fill value)."""
    storage = _STORAGE.get(info.dtype) or _CARRIED.get(info.dtype)
    if storage is not None:
        return (info.shape, *storage)
    # Sub-byte (F4, F6_*): the packed bytes, as they are.
    return ((info.nbytes,), *_STORAGE["U8"])


def _chunk_shape(shape: tuple[int, ...]) -> list[int]:
    return [max(size, 1) for size in shape]


def _dimension_names(node: str, shape: tuple[int, ...]) -> list[str]:
    return [f"{node}/{axis}" for axis in range(len(shape))]


def _array_attributes(info: TensorInfo) -> dict[str, Any]:
    attributes: dict[str, Any] = {"safetensors_name": info.name, "safetensors_dtype": info.dtype}
    if info.dtype not in _STORAGE and info.dtype not in _CARRIED:
        attributes["safetensors_shape"] = list(info.shape)
    return attributes


def _group_attributes(header: Header) -> dict[str, Any]:
    return dict(header.metadata) if header.metadata is not None else {}


def _dumps(document: object) -> str:
    return json.dumps(document, separators=(",", ":"))
