"""The writer: byte-identical to the reference, read back by both readers, safe on failure.

The reference is ``safetensors.serialize`` (0.8.0), fed ``TensorSpec``s that point at numpy
buffers. It takes torch-style dtype names and cannot write ``F6_E2M3``/``F6_E3M2`` at all, so
those two are checked by reading back with both readers, and their place in the order comes
from the reference's source (the ``Dtype`` enum in ``safetensors/src/tensor.rs`` puts them
between ``F4`` and ``U8``, as ``DTYPE_BITS`` does).
"""

from __future__ import annotations

import array
import io
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import (
    HAVE_REFERENCE,
    REFERENCE_WRITER_DTYPES,
    bounded,
    build,
    reference_header,
    reference_kind,
    tensor,
    untraced_environment,
)
from hypothesis import example, given
from hypothesis import strategies as st

import safetensors_header._encode as encode_module
import safetensors_header._replace as replace_module
from safetensors_header import (
    DTYPE_BITS,
    MAX_HEADER_SIZE,
    HeaderError,
    encode_header,
    parse_header,
    read_header,
    update_metadata,
    write_file,
)

U64_MAX = 2**64 - 1
DTYPES = tuple(DTYPE_BITS)
# The reference's names for our dtypes (TensorSpec rejects the format's own names).
REFERENCE_DTYPES = REFERENCE_WRITER_DTYPES
WRITABLE_BY_REFERENCE = tuple(d for d in DTYPES if d in REFERENCE_DTYPES)

Tensors = dict[str, tuple[str, tuple[int, ...], bytes]]


_settings = bounded


def nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    bits = DTYPE_BITS[dtype]
    for dim in shape:
        bits *= dim
    assert bits % 8 == 0
    return bits // 8


def reference_serialize(tensors: Tensors, metadata: Mapping[str, str] | None = None) -> bytes:
    """``safetensors.serialize`` on these tensors (name -> dtype, header shape, data)."""
    if not HAVE_REFERENCE:  # pragma: no cover
        pytest.skip("the safetensors package is not installed")
    from safetensors import TensorSpec, serialize

    keep_alive = []
    specs = {}
    for name, (dtype, shape, data) in tensors.items():
        buffer = np.frombuffer(data or b"\0", np.uint8)
        keep_alive.append(buffer)
        dims = list(shape)
        if dtype == "F4":  # the reference takes torch's storage shape: two values a byte
            dims[-1] //= 2
        specs[name] = TensorSpec(
            dtype=REFERENCE_DTYPES[dtype],
            shape=dims,
            data_ptr=buffer.ctypes.data,
            data_len=len(data),
        )
    return bytes(serialize(specs, metadata=None if metadata is None else dict(metadata)))


# The reference's output for no tensors and empty metadata, which nothing reads, and ours.
REFERENCE_BUG = b"\x18\0\0\0\0\0\0\0" + b'{},"__metadata__":{}}   '
FIXED = b"\x18\0\0\0\0\0\0\0" + b'{"__metadata__":{}}     '


def reference_bytes(tensors: Tensors, metadata: Mapping[str, str] | None = None) -> bytes:
    """What the reference writes, with its one known bug (empty everything) corrected."""
    out = reference_serialize(tensors, metadata)
    if not tensors and metadata == {}:
        assert out == REFERENCE_BUG
        return FIXED
    return out


def shapes_of(tensors: Tensors) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {name: (dtype, shape) for name, (dtype, shape, _) in tensors.items()}


def listing(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


# --- strategies -----------------------------------------------------------------------------

_SPECIAL_NAMES = (
    "",
    "a",
    "A",
    "a.b",
    "weight",
    "__METADATA__",
    "\x00",
    "\x1f",
    '"',
    "\\",
    "/",
    "\x7f",
    "\u00e9",
    "\u2028",
    "\uff00",
    "\U0001f600",
    "\\u0041",
)
TEXT = st.text(st.characters(codec="utf-8"), max_size=6)  # no lone surrogates
NAMES = st.one_of(st.sampled_from(_SPECIAL_NAMES), TEXT).filter(lambda s: s != "__metadata__")
SHAPES = st.lists(st.integers(0, 4), max_size=3).map(tuple)
ONE_KEY_METADATA = st.one_of(
    st.none(), st.just({}), st.dictionaries(TEXT, TEXT, min_size=1, max_size=1)
)


def _whole_bytes(dtype: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Make a sub-byte dtype's last dim fill whole bytes (F4: even; F6: a multiple of 4)."""
    factor = {4: 2, 6: 4}.get(DTYPE_BITS[dtype], 1)
    if factor == 1:
        return shape
    return (*shape[:-1], shape[-1] * factor) if shape else (factor,)


def tensor_sets(dtypes: tuple[str, ...]) -> st.SearchStrategy[Tensors]:
    """name -> (dtype, shape, random data of the right size)."""

    def with_data(specs: dict[str, tuple[str, tuple[int, ...]]], seed: int) -> Tensors:
        rng = random.Random(seed)
        out = {}
        for name, (dtype, shape) in specs.items():
            dims = _whole_bytes(dtype, shape)
            out[name] = (dtype, dims, rng.randbytes(nbytes(dtype, dims)))
        return out

    specs = st.dictionaries(NAMES, st.tuples(st.sampled_from(dtypes), SHAPES), max_size=8)
    return st.builds(with_data, specs, st.integers(0, 2**32))


# --- byte for byte what the reference writes ---------------------------------------------------


EVERY_ESCAPE = {
    name: ("F32" if i % 2 else "BF16", (i % 3,), bytes(4 * (i % 3) if i % 2 else 2 * (i % 3)))
    for i, name in enumerate(_SPECIAL_NAMES)
}


@_settings(150)
@given(tensors=tensor_sets(WRITABLE_BY_REFERENCE), metadata=ONE_KEY_METADATA)
@example(tensors={}, metadata=None)
@example(tensors={}, metadata={"k": "v"})
@example(tensors=EVERY_ESCAPE, metadata={'\x00"\\\n\x7f\u2028': "\x01\t\U0001f600/"})
@example(
    # Equal dtypes order by code point (= UTF-8 bytes), not UTF-16: U+FF00 before U+1F600.
    tensors=dict.fromkeys(("😀", "\uff00", "z", "Z", "é", ""), ("U8", (1,), b"x")),
    metadata=None,
)
def test_same_bytes_as_the_reference(
    tmp_path: Path, tensors: Tensors, metadata: dict[str, str] | None
) -> None:
    expected = reference_bytes(tensors, metadata)
    head = encode_header(shapes_of(tensors), metadata=metadata)
    assert head == expected[: len(head)]
    assert len(head) == 8 + int.from_bytes(expected[:8], "little")
    path = tmp_path / "model.safetensors"
    header = write_file(path, tensors, metadata=metadata)
    assert path.read_bytes() == expected
    assert read_header(path) == header
    assert listing(tmp_path) == ["model.safetensors"]


@_settings(60)
@given(
    tensors=tensor_sets(WRITABLE_BY_REFERENCE),
    metadata=st.dictionaries(TEXT, TEXT, min_size=2, max_size=5),
)
def test_same_file_as_the_reference_with_more_metadata_keys(
    tmp_path: Path, tensors: Tensors, metadata: dict[str, str]
) -> None:
    # The reference writes metadata keys in hash-map order; we write the mapping's order.
    expected = reference_bytes(tensors, metadata)
    path = tmp_path / "model.safetensors"
    header = write_file(path, tensors, metadata=metadata)
    ours = path.read_bytes()
    theirs = parse_header(expected, file_size=len(expected))
    assert header == theirs
    assert list(header.metadata or {}) == list(metadata)
    assert ours[header.data_start :] == expected[theirs.data_start :]
    assert reference_kind(ours) is None
    assert reference_header(ours) == reference_header(expected)


@_settings(80)
@given(tensors=tensor_sets(DTYPES), metadata=ONE_KEY_METADATA)
def test_every_dtype_reads_back(
    tmp_path: Path, tensors: Tensors, metadata: dict[str, str] | None
) -> None:
    path = tmp_path / "model.safetensors"
    header = write_file(path, tensors, metadata=metadata)
    data = path.read_bytes()
    assert read_header(path) == header == read_header(data)
    assert header.metadata == metadata
    rank = {dtype: i for i, dtype in enumerate(DTYPES)}
    assert list(header.tensors) == sorted(tensors, key=lambda n: (-rank[tensors[n][0]], n))
    for name, (dtype, shape, content) in tensors.items():
        info = header.tensors[name]
        assert (info.dtype, info.shape, data[info.start : info.end]) == (dtype, shape, content)
    layout = parse_header(encode_header(shapes_of(tensors), metadata=metadata))
    assert (layout.tensors, layout.header_size) == (header.tensors, header.header_size)
    assert reference_kind(data) is None
    assert reference_header(data) == tensors


def test_all_dtypes_in_one_file(tmp_path: Path) -> None:
    rng = random.Random(0)
    tensors = {}
    for dtype in DTYPES:
        shape = _whole_bytes(dtype, (3,))
        tensors[f"t_{dtype}"] = (dtype, shape, rng.randbytes(nbytes(dtype, shape)))
    header = write_file(tmp_path / "all.safetensors", tensors)
    # Largest enum value first: U64, I64, F64, C64, F32, ..., F6_E3M2, F6_E2M3, F4, BOOL.
    assert [t.dtype for t in header.tensors.values()] == list(reversed(DTYPES))
    data = (tmp_path / "all.safetensors").read_bytes()
    assert reference_header(data) == tensors
    # Without the two F6 dtypes (the reference's Python API cannot write them): the same bytes.
    some = {name: t for name, t in tensors.items() if t[0] in REFERENCE_DTYPES}
    write_file(tmp_path / "some.safetensors", some)
    assert (tmp_path / "some.safetensors").read_bytes() == reference_bytes(some)


def test_empty_metadata_without_tensors_avoids_the_reference_bug(tmp_path: Path) -> None:
    ours = encode_header({}, metadata={})
    assert ours == FIXED
    assert read_header(ours).metadata == {}
    assert reference_kind(ours) is None
    # The reference puts `{}` before the metadata, which no reader (its own included) accepts.
    theirs = reference_serialize({}, {})
    assert theirs == REFERENCE_BUG
    assert reference_kind(theirs) == "InvalidHeaderDeserialization"
    with pytest.raises(HeaderError) as caught:
        read_header(theirs)
    assert caught.value.kind == "InvalidHeaderDeserialization"

    path = tmp_path / "empty.safetensors"
    write_file(path, {}, metadata={})
    assert path.read_bytes() == ours
    update_metadata(path, None, in_place=True)  # N stays 24
    assert path.read_bytes() == b"\x18\0\0\0\0\0\0\0{}" + b" " * 22
    update_metadata(path, {}, in_place=True)
    assert path.read_bytes() == ours
    update_metadata(path, None, in_place=False)
    assert path.read_bytes() == encode_header({}) == reference_bytes({})


def test_offsets_come_from_parsing_the_encoded_header() -> None:
    encoded = encode_header(
        {"b": ("F32", [2]), "a": ("I64", []), "c": ("F4", [6])}, metadata={"k": "v"}
    )
    layout = parse_header(encoded)
    assert list(layout.tensors) == ["a", "b", "c"]
    assert [t.data_offsets for t in layout.tensors.values()] == [(0, 8), (8, 16), (16, 19)]
    assert layout.data_start == len(encoded) == layout.tensors["a"].start
    assert layout.data_size == 19
    assert layout.header_size % 8 == 0
    assert layout.metadata == {"k": "v"}


# --- inputs ----------------------------------------------------------------------------------


def test_buffers_of_every_kind(tmp_path: Path) -> None:
    matrix = np.arange(6, dtype=np.float32).reshape(2, 3)
    tensors: dict[str, tuple[str, Any, Any]] = {
        "matrix": ("F32", matrix.shape, matrix),
        "scalar": ("F64", (), np.array(2.5)),
        "mask": ("BOOL", [3], np.array([True, False, True])),
        "array": ("I16", [2], array.array("h", [1, -2])),
        "view": ("U8", (2,), memoryview(b"abcd")[1:3]),
        "mutable": ("U8", (1,), bytearray(b"z")),
        "packed": ("F4", (np.int64(4),), b"\x12\x34"),
        "structured": ("U8", [5], np.zeros(1, dtype=[("a", "<i4"), ("b", "u1")])),
    }
    header = write_file(tmp_path / "f.safetensors", tensors)
    data = (tmp_path / "f.safetensors").read_bytes()
    assert data[header.tensors["matrix"].start : header.tensors["matrix"].end] == matrix.tobytes()
    got = reference_header(data)
    assert got["scalar"] == ("F64", (), np.array(2.5).tobytes())
    assert got["mask"] == ("BOOL", (3,), b"\1\0\1")
    assert got["array"] == ("I16", (2,), array.array("h", [1, -2]).tobytes())
    assert got["view"] == ("U8", (2,), b"bc")
    assert got["packed"] == ("F4", (4,), b"\x12\x34")
    tensors["mutable"][2].append(0)  # the writer let go of every buffer


def test_buffers_are_streamed_not_copied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = np.arange(1000, dtype=np.int64)
    small = b"xyz"
    calls: list[tuple[object, int]] = []
    real = replace_module.write_all

    def spy(file: Any, data: Any) -> None:
        view = memoryview(data)
        calls.append((view.obj, view.nbytes))
        real(file, data)

    monkeypatch.setattr(replace_module, "write_all", spy)
    header = write_file(
        tmp_path / "f.safetensors", {"b": ("U8", [3], small), "a": ("I64", [1000], big)}
    )
    # One write for the header, then one per tensor straight from the caller's buffer.
    assert [size for _, size in calls] == [header.data_start, 8000, 3]
    assert calls[1][0] is big
    assert calls[2][0] is small


@pytest.mark.parametrize(
    ("tensors", "metadata", "kind", "match"),
    [
        ({"a": ("f32", [1])}, None, "InvalidHeaderDeserialization", "unknown dtype 'f32'"),
        ({"a": ("F32", [-1])}, None, "InvalidHeaderDeserialization", r"0\.\.2\^64-1, found -1"),
        (
            {"a": ("F32", [2**64])},
            None,
            "InvalidHeaderDeserialization",
            "found 18446744073709551616",
        ),
        (
            {"__metadata__": ("U8", [1])},
            None,
            "InvalidHeaderDeserialization",
            "cannot name a tensor",
        ),
        ({"a\ud800": ("U8", [1])}, None, "InvalidHeader", "lone surrogate"),
        ({"a": ("U8", [1])}, {"k": "\udc00"}, "InvalidHeader", "lone surrogate"),
        ({"a": ("U8", [1])}, {"\udc00": "v"}, "InvalidHeader", "lone surrogate"),
        ({"a": ("F4", [3])}, None, "MisalignedSlice", "12 bits"),
        ({"a": ("F6_E2M3", [2])}, None, "MisalignedSlice", "12 bits"),
        ({"a": ("F4", [])}, None, "MisalignedSlice", "4 bits"),
        ({"a": ("U8", [2**32, 2**32, 2])}, None, "ValidationOverflow", "element count"),
        # As the reader: the running product overflows before the 0 (the reference agrees).
        ({"a": ("U8", [2**32, 2**32, 0])}, None, "ValidationOverflow", "element count"),
        ({"a": ("U8", [2**61 - 1])}, None, None, None),  # the largest size: 2^64-8 bits
        ({"a": ("U8", [2**61])}, None, "ValidationOverflow", "size in bits"),
        (
            {f"t{i}": ("U8", [2**61 - 1]) for i in range(9)},
            None,
            "ValidationOverflow",
            "more than 2\\^64-1",
        ),
    ],
    ids=[
        "unknown-dtype",
        "negative-dim",
        "dim-above-u64",
        "metadata-as-a-name",
        "surrogate-name",
        "surrogate-value",
        "surrogate-key",
        "f4-half-byte",
        "f6-partial-byte",
        "f4-scalar",
        "count-overflow",
        "overflow-before-zero",
        "largest-tensor",
        "bits-overflow",
        "total-overflow",
    ],
)
def test_encode_header_rejects_what_no_reader_opens(
    tensors: dict[str, tuple[str, list[int]]],
    metadata: dict[str, str] | None,
    kind: str | None,
    match: str | None,
) -> None:
    if kind is None:
        assert parse_header(encode_header(tensors, metadata=metadata)).data_size == 2**61 - 1
        return
    with pytest.raises(HeaderError, match=match) as caught:
        encode_header(tensors, metadata=metadata)
    assert caught.value.kind == kind
    # The tensor at fault is named; a fault in the metadata or in the total names none.
    at_fault = next(iter(tensors)) if len(tensors) == 1 and metadata is None else None
    assert caught.value.tensor == at_fault


def test_header_too_large(monkeypatch: pytest.MonkeyPatch) -> None:
    assert encode_module._MAX_HEADER_SIZE == MAX_HEADER_SIZE == 10**8  # the reference's limit
    monkeypatch.setattr(encode_module, "_MAX_HEADER_SIZE", 64)
    encode_header({}, metadata={"k": "v" * 39})  # 64 bytes: fits
    with pytest.raises(HeaderError, match="would be 72 bytes, above the limit of 64") as caught:
        encode_header({}, metadata={"k": "v" * 40})
    assert caught.value.kind == "HeaderTooLarge"


@pytest.mark.parametrize(
    ("tensors", "metadata", "match"),
    [
        ([("a", ("U8", [1]))], None, "tensors must be a mapping"),
        ({1: ("U8", [1])}, None, "tensor names must be str"),
        ({"a": "U8"}, None, r"expected a tuple \(dtype, shape\)"),
        ({"a": ("U8", [1], b"x")}, None, r"expected a tuple \(dtype, shape\)"),
        ({"a": (8, [1])}, None, "dtype must be a str"),
        ({"a": ("U8", "12")}, None, "shape must be a sequence of integers"),
        ({"a": ("U8", 3)}, None, "shape must be a sequence of integers"),
        ({"a": ("U8", [1.0])}, None, "shape must hold integers, not float"),
        ({"a": ("U8", [True])}, None, "shape must hold integers, not True"),
        ({}, [("k", "v")], "metadata must be a mapping"),
        ({}, {"k": 1}, "metadata keys and values must be str"),
        ({}, {1: "v"}, "metadata keys and values must be str"),
    ],
    ids=[
        "tensors-list",
        "name-int",
        "value-str",
        "value-three",
        "dtype-int",
        "shape-str",
        "shape-int",
        "dim-float",
        "dim-bool",
        "metadata-list",
        "metadata-value-int",
        "metadata-key-int",
    ],
)
def test_wrong_python_types_are_type_errors(tensors: Any, metadata: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        encode_header(tensors, metadata=metadata)


def test_options_are_keyword_only(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="positional"):
        encode_header({}, {"k": "v"})  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="positional"):
        write_file(tmp_path / "f.safetensors", {}, {"k": "v"})  # type: ignore[call-arg]
    assert not (tmp_path / "f.safetensors").exists()
    path = tmp_path / "g.safetensors"
    write_file(path, {}, metadata={"k": "v"})
    with pytest.raises(TypeError, match="positional"):
        update_metadata(path, {"k": "w"}, False)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="positional-only"):
        update_metadata(path=path, metadata={"k": "w"})  # type: ignore[call-arg]
    # metadata: positional or keyword.
    assert update_metadata(path, {"k": "w"}).metadata == {"k": "w"}
    assert update_metadata(path, metadata={"k": "x"}, in_place=False).metadata == {"k": "x"}
    assert read_header(path).metadata == {"k": "x"}


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (12, "data must be a bytes-like object"),
        ("abcd", "data must be a bytes-like object"),
        (np.zeros((2, 4), np.uint8)[:, ::2], "not C-contiguous"),
        (np.zeros((2, 2), np.uint8).T, "not C-contiguous"),
        (np.zeros(4, ">u1").view(">i4"), "big-endian"),
    ],
    ids=["int", "str", "strided", "fortran", "big-endian"],
)
def test_write_file_rejects_unusable_buffers(tmp_path: Path, data: object, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        write_file(tmp_path / "f.safetensors", {"a": ("U8", [4], data)})
    assert listing(tmp_path) == []


# --- failures write nothing --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tensors", "kind", "match"),
    [
        (
            {"a": ("F32", [2], b"\0" * 8), "b": ("F32", [2], b"\0" * 4)},
            "TensorInvalidInfo",
            r"tensor 'b': dtype F32 and shape \[2\] need 8 bytes, but its data has 4 bytes",
        ),
        ({"a": ("U8", [0], b"x")}, "TensorInvalidInfo", "need 0 bytes, but its data has 1 bytes"),
        ({"a": ("F4", [3], b"\0\0")}, "MisalignedSlice", "12 bits"),
        ({"a": ("U8", [2**40, 2**40], b"")}, "ValidationOverflow", "element count"),
        ({"a": ("X", [1], b"x")}, "InvalidHeaderDeserialization", "unknown dtype"),
    ],
    ids=["short-buffer", "long-buffer", "misaligned", "overflow", "unknown-dtype"],
)
def test_a_bad_size_writes_nothing(tmp_path: Path, tensors: Tensors, kind: str, match: str) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"old")
    with pytest.raises(HeaderError, match=match) as caught:
        write_file(path, tensors)
    assert caught.value.kind == kind
    assert path.read_bytes() == b"old"
    assert listing(tmp_path) == ["model.safetensors"]
    if HAVE_REFERENCE and all(t[0] in REFERENCE_DTYPES for t in tensors.values()):
        from safetensors import SafetensorError

        with pytest.raises(SafetensorError):  # the reference refuses these too
            reference_serialize(tensors)


def _failing_write(after: int, error: BaseException) -> Callable[[Any, Any], None]:
    """A `write_all` that works `after` times, then writes half and raises once, then works."""
    real = replace_module.write_all
    count = 0

    def write(file: Any, data: Any) -> None:
        nonlocal count
        count += 1
        if count != after + 1:
            real(file, data)
            return
        with memoryview(data) as view:
            real(file, view.cast("B")[: view.nbytes // 2])
        raise error

    return write


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
@pytest.mark.parametrize("after", [0, 1, 2])
def test_an_interrupted_write_file_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: int, error: BaseException
) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"old")
    monkeypatch.setattr(replace_module, "write_all", _failing_write(after, error))
    with pytest.raises(type(error)):
        write_file(path, {"a": ("U8", [4], b"abcd"), "b": ("F32", [1], b"\0" * 4)})
    assert path.read_bytes() == b"old"
    assert listing(tmp_path) == ["model.safetensors"]


def test_a_failed_rename_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"old")

    def fail(*args: object) -> None:
        raise PermissionError("refused")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(PermissionError):
        write_file(path, {"a": ("U8", [1], b"a")})
    assert path.read_bytes() == b"old"
    assert listing(tmp_path) == ["model.safetensors"]


def test_a_missing_directory_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_file(tmp_path / "no" / "f.safetensors", {})


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_permissions(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    os.umask(umask)
    new = tmp_path / "new.safetensors"
    write_file(new, {})
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~umask
    old = tmp_path / "old.safetensors"
    old.write_bytes(b"")
    old.chmod(0o640)
    write_file(old, {})
    assert stat.S_IMODE(old.stat().st_mode) == 0o640
    update_metadata(old, {"k": "v" * 100})  # does not fit: rewritten
    assert stat.S_IMODE(old.stat().st_mode) == 0o640


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="symbolic links")
def test_symbolic_links_are_followed(tmp_path: Path) -> None:
    (tmp_path / "blobs").mkdir()
    blob = tmp_path / "blobs" / "abc"
    link = tmp_path / "model.safetensors"
    link.symlink_to(Path("blobs") / "abc")
    write_file(link, {"a": ("U8", [1], b"a")})
    assert link.is_symlink()
    assert read_header(blob).tensors["a"].nbytes == 1
    update_metadata(link, {"k": "v" * 100})  # rewritten: the link still points at the file
    assert link.is_symlink()
    assert read_header(blob).metadata == {"k": "v" * 100}
    assert listing(tmp_path / "blobs") == ["abc"]


# --- update_metadata ---------------------------------------------------------------------------


def _reference_file(path: Path, metadata: dict[str, str] | None) -> Tensors:
    tensors: Tensors = {
        "w": ("BF16", (2, 3), bytes(range(12))),
        "b": ("F32", (3,), bytes(range(100, 112))),
        "n": ("I64", (1,), bytes(range(200, 208))),
    }
    path.write_bytes(reference_bytes(tensors, metadata))
    return tensors


def _json_text(data: bytes) -> bytes:
    return data[8 : 8 + int.from_bytes(data[:8], "little")].rstrip(b" ")


def _data(path: Path) -> bytes:
    data = path.read_bytes()
    return data[8 + int.from_bytes(data[:8], "little") :]


@pytest.mark.parametrize(
    ("new", "in_place", "same_inode", "byte_identical"),
    [
        ({"format": "np"}, True, True, True),  # same padded length: the reference's bytes
        ({"f": "pt"}, True, True, False),  # shorter: more padding, same N
        ({}, True, True, False),
        (None, True, True, False),
        ({"format": "x" * 60}, True, False, True),  # longer: rewritten
        ({"f": "pt"}, False, False, True),  # asked to rewrite: the reference's layout
        (None, False, False, True),
    ],
    ids=["same-length", "shorter", "empty", "none", "longer", "rewrite-shorter", "rewrite-none"],
)
def test_update_metadata(
    tmp_path: Path,
    new: dict[str, str] | None,
    in_place: bool,
    same_inode: bool,
    byte_identical: bool,
) -> None:
    path = tmp_path / "model.safetensors"
    tensors = _reference_file(path, {"format": "pt"})
    before = os.stat(path)
    old = read_header(path)
    data = _data(path)
    header = update_metadata(path, new, in_place=in_place)
    assert header == read_header(path)
    assert header.metadata == new
    assert _data(path) == data  # the tensor bytes never change
    assert [t.data_offsets for t in header.tensors.values()] == [
        t.data_offsets for t in old.tensors.values()
    ]
    assert (os.stat(path).st_ino == before.st_ino) is same_inode
    if same_inode:
        assert header.header_size == old.header_size
    assert reference_kind(path.read_bytes()) is None
    assert reference_header(path.read_bytes()) == tensors
    if byte_identical:
        assert path.read_bytes() == reference_bytes(tensors, new)
    assert listing(tmp_path) == ["model.safetensors"]


def test_update_metadata_with_the_same_metadata_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "model.safetensors"
    _reference_file(path, {"format": "pt"})
    before = path.read_bytes()

    def no_write(*args: object) -> None:
        raise AssertionError("wrote")

    monkeypatch.setattr(replace_module, "write_all", no_write)
    assert update_metadata(path, {"format": "pt"}).metadata == {"format": "pt"}
    assert path.read_bytes() == before


def test_update_metadata_keeps_any_valid_layout(tmp_path: Path) -> None:
    # Not the reference's order (U8 before F64), extra fields, the array form, a null dtype
    # map, whitespace: the offsets stay, the header is rewritten in the reference's form.
    header = {
        "__metadata__": None,
        "a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "extra": [1, {}]},
        "b": ["F64", [1], [1, 9]],
        "c": {"dtype": {"BOOL": None}, "shape": [0], "data_offsets": [9, 9]},
    }
    path = tmp_path / "odd.safetensors"
    path.write_bytes(build(json.dumps(header, indent=4), bytes(range(9))))
    new = update_metadata(path, {"k": "v"})
    assert [(t.name, t.data_offsets) for t in new.tensors.values()] == [
        ("a", (0, 1)),
        ("b", (1, 9)),
        ("c", (9, 9)),
    ]
    text = path.read_bytes()[8 : new.data_start].decode()
    assert text.rstrip(" ") == (
        '{"__metadata__":{"k":"v"},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
        '"b":{"dtype":"F64","shape":[1],"data_offsets":[1,9]},'
        '"c":{"dtype":"BOOL","shape":[0],"data_offsets":[9,9]}}'
    )
    assert _data(path) == bytes(range(9))
    assert reference_kind(path.read_bytes()) is None


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        (b"abc", "HeaderTooSmall"),
        (build({"a": tensor("F32", [2], 0, 8)}, 4), "MetadataIncompleteBuffer"),
        (build('{"a":1}'), "InvalidHeaderDeserialization"),
    ],
    ids=["too-small", "short-data", "bad-json"],
)
@pytest.mark.parametrize("in_place", [True, False])
def test_update_metadata_refuses_an_invalid_file(
    tmp_path: Path, content: bytes, kind: str, in_place: bool
) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    with pytest.raises(HeaderError) as caught:
        update_metadata(path, {"k": "v"}, in_place=in_place)
    assert caught.value.kind == kind
    assert path.read_bytes() == content
    assert listing(tmp_path) == ["bad.safetensors"]


def test_update_metadata_refuses_bad_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "model.safetensors"
    _reference_file(path, None)
    before = path.read_bytes()
    with pytest.raises(TypeError, match="metadata keys and values must be str"):
        update_metadata(path, {"k": 1})  # type: ignore[dict-item]
    with pytest.raises(HeaderError, match="lone surrogate"):
        update_metadata(path, {"k": "\ud800"})
    monkeypatch.setattr(encode_module, "_MAX_HEADER_SIZE", 512)
    with pytest.raises(HeaderError) as caught:
        update_metadata(path, {"k": "v" * 1000})
    assert caught.value.kind == "HeaderTooLarge"
    assert path.read_bytes() == before
    assert listing(tmp_path) == ["model.safetensors"]


def test_update_metadata_in_place_puts_the_old_header_back_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "model.safetensors"
    tensors = _reference_file(path, {"format": "pt"})
    before = path.read_bytes()
    monkeypatch.setattr(replace_module, "write_all", _failing_write(0, OSError(5, "I/O error")))
    with pytest.raises(OSError, match="I/O error"):
        update_metadata(path, {"format": "np"}, in_place=True)
    assert path.read_bytes() == before  # the half-written header was undone
    assert reference_header(path.read_bytes()) == tensors


def test_update_metadata_in_place_when_even_the_undo_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The documented limit of the in-place path: the first error is the one raised.
    path = tmp_path / "model.safetensors"
    _reference_file(path, {"format": "pt"})
    first, second = OSError(5, "first"), OSError(5, "second")
    errors = iter([first, second])
    real = replace_module.write_all

    def write(file: Any, data: Any) -> None:
        real(file, bytes(memoryview(data).cast("B")[:10]))
        raise next(errors)

    monkeypatch.setattr(replace_module, "write_all", write)
    with pytest.raises(OSError, match="first"):
        update_metadata(path, {"format": "np"}, in_place=True)
    # The marker stayed: the file says it is torn rather than being read half old, half new.
    with pytest.raises(HeaderError) as caught:
        read_header(path)
    assert caught.value.kind == "HeaderTooLarge"
    assert caught.value.hint is not None
    assert caught.value.hint.startswith("the header is torn")


_SECTOR = 512  # a disk writes whole sectors; a page (4 KiB or more) is a multiple of it


@pytest.mark.parametrize(
    "new",
    [{"format": "n" * 3000}, {"format": "n" * 1000}, None],
    ids=["same-length", "shorter", "none"],
)
def test_update_metadata_in_place_cut_at_any_sector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, new: dict[str, str] | None
) -> None:
    # Every write the update makes, in order; then the file as a kill or a power loss would
    # leave it with each write cut at each sector boundary (Linux cuts a write at a page
    # boundary when a fatal signal is pending): the old header, the new one, or one that
    # says it is torn, never a mix of the two.
    path = tmp_path / "model.safetensors"
    tensors = _reference_file(path, {"format": "p" * 3000})
    original = path.read_bytes()
    writes: list[tuple[int, bytes]] = []
    real = replace_module.write_all

    def record(file: Any, data: Any) -> None:
        writes.append((file.tell(), bytes(memoryview(data).cast("B"))))
        real(file, data)

    monkeypatch.setattr(replace_module, "write_all", record)
    update_metadata(path, new, in_place=True)
    monkeypatch.undo()
    assert [offset for offset, _ in writes] == [0, 8, 0]  # the marker, the header, the prefix
    final = path.read_bytes()
    seen = []
    state = bytearray(original)
    for offset, data in writes:
        cuts = [0, *range(-offset % _SECTOR or _SECTOR, len(data), _SECTOR), len(data)]
        for cut in cuts:
            cut_state = bytearray(state)
            cut_state[offset : offset + cut] = data[:cut]
            seen.append(_cut_state(bytes(cut_state), original, final, tensors))
        state[offset : offset + len(data)] = data
    assert bytes(state) == final
    assert seen.count("torn") > 6  # the header's write, cut at each of its sectors
    assert {"old", "new"} <= set(seen)


def _cut_state(data: bytes, original: bytes, final: bytes, tensors: Tensors) -> str:
    try:
        read_header(data)
    except HeaderError as error:
        torn = error
    else:
        assert data in (original, final), "a mixed header reads as valid"
        assert reference_header(data) == tensors
        return "old" if data == original else "new"
    assert torn.hint is not None, torn
    assert torn.hint.startswith("the header is torn"), torn
    return "torn"


def test_update_metadata_rewrite_leaves_the_original_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "model.safetensors"
    _reference_file(path, {"format": "pt"})
    before = path.read_bytes()
    monkeypatch.setattr(replace_module, "_COPY_CHUNK", 5)
    # The header, then two chunks of data, then the next write fails half-way.
    monkeypatch.setattr(replace_module, "write_all", _failing_write(3, KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        update_metadata(path, {"format": "x" * 60})
    assert path.read_bytes() == before
    assert listing(tmp_path) == ["model.safetensors"]


def test_update_metadata_copies_the_data_in_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "model.safetensors"
    tensors = _reference_file(path, None)
    monkeypatch.setattr(replace_module, "_COPY_CHUNK", 7)
    update_metadata(path, {"note": "x" * 50})
    assert path.read_bytes() == reference_bytes(tensors, {"note": "x" * 50})


@_settings(60)
@given(
    tensors=tensor_sets(WRITABLE_BY_REFERENCE),
    old=ONE_KEY_METADATA,
    new=ONE_KEY_METADATA,
    in_place=st.booleans(),
)
def test_update_metadata_property(
    tmp_path: Path,
    tensors: Tensors,
    old: dict[str, str] | None,
    new: dict[str, str] | None,
    in_place: bool,
) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(reference_bytes(tensors, old))
    data = _data(path)
    before = read_header(path)
    header = update_metadata(path, new, in_place=in_place)
    assert header == read_header(path)
    assert header.metadata == new
    assert _data(path) == data
    assert [(t.name, t.data_offsets) for t in header.tensors.values()] == [
        (t.name, t.data_offsets) for t in before.tensors.values()
    ]
    ours = path.read_bytes()
    expected = reference_bytes(tensors, new)
    if not in_place or header.header_size != before.header_size:
        assert ours == expected  # rewritten: the reference's bytes
    else:  # in place: the reference's JSON, padded to the old length
        assert _json_text(ours) == _json_text(expected)
        assert reference_kind(ours) is None


# --- the I/O helpers ----------------------------------------------------------------------------


class _Trickle(io.RawIOBase):
    """A raw file that takes at most `most` bytes a write, or none at all."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.out = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        with memoryview(data) as view:
            chunk = bytes(view[: self.most])
        self.out += chunk
        return len(chunk)


def test_write_all_finishes_short_writes() -> None:
    file = _Trickle(3)
    replace_module.write_all(file, memoryview(np.arange(5, dtype=np.int16)))  # type: ignore[arg-type]
    assert bytes(file.out) == np.arange(5, dtype=np.int16).tobytes()


def test_write_all_gives_up_when_nothing_is_written() -> None:
    with pytest.raises(OSError, match="the write stopped after 0 of 4 bytes"):
        replace_module.write_all(_Trickle(0), b"abcd")  # type: ignore[arg-type]


def test_a_file_truncated_while_copying() -> None:
    chunks: Iterator[bytes] = replace_module.read_chunks(io.BytesIO(b"abc"), 5)  # type: ignore[arg-type]
    assert next(chunks) == b"abc"
    with pytest.raises(HeaderError, match="ended 2 bytes early") as caught:
        next(chunks)
    assert caught.value.kind == "MetadataIncompleteBuffer"


# --- killed mid-write: a real process, a real signal ---------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
_KILL_VALUE = 8 * 2**20  # bytes of one metadata value: a write of 2,048 pages

_CHILD = """
import sys
from safetensors_header import update_metadata
path, letter, in_place = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
metadata = {{"note": letter * {size}}}
print("go", flush=True)
update_metadata(path, metadata, in_place=in_place)
print("done", flush=True)
"""


def _killable(path: Path, letter: str, *, in_place: bool) -> subprocess.Popen[str]:
    """A fresh interpreter that prints "go", then updates `path`'s metadata to `letter`s."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD.format(size=_KILL_VALUE), str(path), letter, str(+in_place)],
        stdout=subprocess.PIPE,
        text=True,
        env=untraced_environment(PYTHONPATH=str(ROOT)),  # (its kills are its test, not lines)
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "go\n"  # imported, the new metadata built
    return child


def _state(path: Path) -> str:
    """What a reader makes of the file: "old", "new" or "torn"; anything else fails."""
    try:
        header = read_header(path)
    except HeaderError as error:
        torn = error
    else:
        metadata = header.metadata
        assert metadata is not None
        assert set(metadata) == {"note"}
        value = metadata["note"]
        assert value in ("a" * _KILL_VALUE, "b" * _KILL_VALUE), "a mixed header reads as valid"
        assert _data(path) == bytes(range(16))
        return "old" if value[0] == "a" else "new"
    assert torn.kind == "HeaderTooLarge", torn
    assert torn.hint is not None, torn
    assert torn.hint.startswith("the header is torn"), torn
    torn_file = path.read_bytes()
    assert torn_file[:8] == b"TORN-HDR"
    assert torn_file[-16:] == bytes(range(16))  # the data, untouched
    return "torn"


def _changing(path: Path, *, in_place: bool, deadline: float) -> None:
    """Return as soon as the update has begun to write (or at the deadline)."""
    if in_place:
        with path.open("rb", buffering=0) as file:
            prefix = file.read(8)
            while time.monotonic() < deadline:
                # the length prefix, or a byte of the value (it begins near offset 30)
                if (
                    os.pread(file.fileno(), 8, 0) != prefix
                    or os.pread(file.fileno(), 1, 200) != b"a"
                ):
                    return
    else:
        before = set(os.listdir(path.parent))
        while time.monotonic() < deadline and set(os.listdir(path.parent)) <= before:
            pass  # until a temporary file appears


@pytest.mark.slow  # 24 processes started and killed
@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize(
    ("in_place", "trials"), [(True, 14), (False, 8)], ids=["in-place", "rename"]
)
def test_a_killed_update_never_leaves_a_mixed_header(
    tmp_path: Path, in_place: bool, trials: int
) -> None:
    # Linux stops a large write() at a page boundary when a fatal signal arrives, so a kill
    # during the one write of an 8 MiB header used to leave half old, half new bytes that
    # parsed: this test (then with 20 kills) failed on that code in 11 runs of 11. Now every
    # kill leaves the old header, the new one, or one that says it is torn (about half of
    # the trials).
    path = tmp_path / "model.safetensors"
    original = reference_bytes({"w": ("U8", (16,), bytes(range(16)))}, {"note": "a" * _KILL_VALUE})
    path.write_bytes(original)
    with _killable(path, "b", in_place=in_place) as child:
        started = time.monotonic()  # how long an update takes: the kills are spread over it
        assert child.wait(timeout=60) == 0
        span = time.monotonic() - started
    assert _state(path) == "new"
    rng = random.Random(17)
    seen = []
    for trial in range(trials):
        path.write_bytes(original)
        with _killable(path, "b", in_place=in_place) as child:
            if trial % 4 == 0:  # at any moment of the update
                time.sleep(rng.uniform(0, span))
            else:  # once it writes: during the write, or soon after it
                _changing(path, in_place=in_place, deadline=time.monotonic() + 2 * span)
                time.sleep(rng.choice([0, 0, 0, 0.002, 0.02]))
            child.send_signal(signal.SIGKILL if trial % 2 else signal.SIGTERM)
            child.wait(timeout=60)
        seen.append(_state(path))
    print(f"{span * 1000:.0f} ms an update; after the kills: {seen}")
    if not in_place:
        assert "torn" not in seen  # the file itself is never written, only renamed over
        # The killed rewrites' temporary files are removed by the next rewrite.
        update_metadata(path, {"note": "c"}, in_place=False)
        assert listing(tmp_path) == ["model.safetensors"]


# --- the temporary files killed writers leave ------------------------------------------------


def _ours(base: str) -> str:
    return replace_module.temporary_name(base)


def _stale(directory: Path, name: str, content: bytes = b"half a file") -> Path:
    path = directory / name
    path.write_bytes(content)
    return path


@pytest.mark.skipif(os.name != "posix", reason="POSIX locks")
def test_stale_temporary_files_are_removed_and_only_those(tmp_path: Path) -> None:
    target = tmp_path / "model.safetensors"
    stale = [_stale(tmp_path, _ours("model.safetensors")) for _ in range(3)]
    stale.append(_stale(tmp_path, _ours("model.safetensors"), b""))  # killed before a byte
    token = _ours("model.safetensors")[len(".model.safetensors.") : -len(".tmp")]
    kept = [
        _stale(tmp_path, _ours("other.safetensors")),  # another file's
        _stale(tmp_path, f".model.safetensors.{token[:8]}{'0' * 8}.tmp"),  # not our checksum
        _stale(tmp_path, f".model.safetensors.{token.upper()}.tmp"),  # not our spelling
        _stale(tmp_path, f".model.safetensors.{token}.tmp.bak"),
        _stale(tmp_path, f"model.safetensors.{token}.tmp"),
    ]
    (tmp_path / _ours("model.safetensors")).mkdir()  # not a regular file
    outside = _stale(tmp_path, "outside")
    (tmp_path / _ours("model.safetensors")).symlink_to(outside)  # a link is never followed
    write_file(target, {"a": ("U8", [1], b"a")})
    assert not any(path.exists() for path in stale)
    assert all(path.read_bytes() == b"half a file" for path in kept)
    assert outside.read_bytes() == b"half a file"
    assert len(listing(tmp_path)) == 1 + len(kept) + 1 + 1 + 1


@pytest.mark.skipif(os.name != "posix", reason="POSIX locks")
def test_a_live_writers_temporary_file_is_left_alone(tmp_path: Path) -> None:
    import fcntl

    target = tmp_path / "model.safetensors"
    live = _stale(tmp_path, _ours("model.safetensors"))
    with live.open("rb") as held:  # another writer's lock, as _create_temporary takes it
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        write_file(target, {})
        update_metadata(target, {"k": "v"}, in_place=False)
        assert live.read_bytes() == b"half a file"
    write_file(target, {})  # the writer is gone: now it is stale
    assert listing(tmp_path) == ["model.safetensors"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX locks")
def test_a_temporary_file_removed_before_its_lock_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another writer's clean-up may find the new file before it is locked and remove it.
    real_open = os.open
    made: list[str] = []

    def open_then_lose(path: Any, flags: int, mode: int = 0o777) -> int:
        fd = real_open(path, flags, mode)
        if flags & os.O_EXCL:
            made.append(os.fspath(path))
            if len(made) == 1:
                os.unlink(path)
        return fd

    monkeypatch.setattr(os, "open", open_then_lose)
    write_file(tmp_path / "model.safetensors", {"a": ("U8", [1], b"a")})
    monkeypatch.undo()
    assert len(made) == 2
    assert listing(tmp_path) == ["model.safetensors"]
    assert read_header(tmp_path / "model.safetensors").tensors["a"].nbytes == 1


# --- who may read the new file, and whose it is ----------------------------------------------

_IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
_OTHER_ID = 65534  # nobody and nogroup on Linux: a user and a group that are not the caller


def _rewrite(how: str, path: Path) -> None:
    """Replace `path` through the rename path: `write_file` or `update_metadata`."""
    if how == "write_file":
        write_file(path, {"a": ("U8", [4096], bytes(4096)), "b": ("F32", [2], bytes(8))})
    else:
        update_metadata(path, {"note": "x" * 200}, in_place=False)


def _temporaries(directory: Path) -> list[Path]:
    return [path for path in directory.iterdir() if path.name.endswith(".tmp")]


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
@pytest.mark.parametrize(
    "umask", [0o022, 0o077, 0o002], ids=["umask-022", "umask-077", "umask-002"]
)
@pytest.mark.parametrize(
    ("how", "mode"),
    [
        *(("write_file", mode) for mode in (0o600, 0o640, 0o644, None)),
        *(("update_metadata", mode) for mode in (0o600, 0o640, 0o644)),
    ],
    ids=[
        "write-600",
        "write-640",
        "write-644",
        "write-new",
        "update-600",
        "update-640",
        "update-644",
    ],
)
def test_the_temporary_file_is_never_more_readable_than_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, umask: int, mode: int | None
) -> None:
    # A copy of a private file must never be readable by more users than the file itself,
    # not even for a moment: each write into the temporary file sees its mode.
    path = tmp_path / "model.safetensors"
    if mode is not None:
        path.write_bytes(reference_bytes({"w": ("U8", (16,), bytes(16))}, {"note": "a"}))
        path.chmod(mode)
    seen: list[int] = []
    real_write_all = replace_module.write_all

    def watched(file: Any, data: Any) -> None:
        (temporary,) = _temporaries(tmp_path)
        seen.extend([stat.S_IMODE(os.fstat(file.fileno()).st_mode), temporary.stat().st_mode])
        real_write_all(file, data)

    monkeypatch.setattr(replace_module, "write_all", watched)
    old_umask = os.umask(umask)
    try:
        _rewrite(how, path)
    finally:
        os.umask(old_umask)
    assert seen
    # An existing file's bytes go to a file only its writer may read; a new file is made as
    # any new file is (0o666 less the umask).
    expected = 0o600 if mode is not None else 0o666 & ~umask
    assert {stat.S_IMODE(m) for m in seen} == {expected}
    assert stat.S_IMODE(path.stat().st_mode) == (mode if mode is not None else 0o666 & ~umask)
    assert listing(tmp_path) == ["model.safetensors"]


_STALLED_CHILD = """
import os, sys, time
import safetensors_header._replace as replace
from safetensors_header import update_metadata, write_file

path, how, umask = sys.argv[1], sys.argv[2], int(sys.argv[3], 8)
real_write_all = replace.write_all

def stalled(file, data):  # a writer that stops half-way: its temporary file stays
    real_write_all(file, bytes(data)[: len(data) // 2])
    print("writing", flush=True)
    time.sleep(120)

replace.write_all = stalled
os.umask(umask)
if how == "write_file":
    write_file(path, {"a": ("U8", [4096], bytes(4096))})
else:
    update_metadata(path, {"note": "x" * 200}, in_place=False)
"""


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits and signals")
@pytest.mark.parametrize(
    ("how", "mode", "umask"),
    [
        ("update_metadata", 0o600, 0o022),
        ("write_file", 0o600, 0o000),
        ("write_file", 0o644, 0o022),
        ("write_file", None, 0o077),
        ("write_file", None, 0o022),
    ],
    ids=["update-600", "write-600-umask-000", "write-644", "new-umask-077", "new-umask-022"],
)
def test_a_killed_writers_temporary_file_is_as_private(
    tmp_path: Path, how: str, mode: int | None, umask: int
) -> None:
    # What another user could open while a writer is stopped half-way, or after it is killed.
    path = tmp_path / "model.safetensors"
    original = reference_bytes({"w": ("U8", (16,), bytes(16))}, {"note": "a"})
    if mode is not None:
        path.write_bytes(original)
        path.chmod(mode)
    child = subprocess.Popen(
        [sys.executable, "-c", _STALLED_CHILD, str(path), how, f"{umask:o}"],
        stdout=subprocess.PIPE,
        text=True,
        env=untraced_environment(PYTHONPATH=str(ROOT)),
    )
    with child:
        assert child.stdout is not None
        assert child.stdout.readline() == "writing\n"
        (temporary,) = _temporaries(tmp_path)
        during = stat.S_IMODE(temporary.stat().st_mode)
        child.kill()
        child.wait(timeout=60)
    (left,) = _temporaries(tmp_path)
    assert stat.S_IMODE(left.stat().st_mode) == during
    assert during == (0o600 if mode is not None else 0o666 & ~umask)
    if mode is not None:
        assert path.read_bytes() == original
        assert stat.S_IMODE(path.stat().st_mode) == mode
    else:
        assert not path.exists()
    write_file(path, {})  # the next writer removes what the killed one left
    assert listing(tmp_path) == ["model.safetensors"]


@pytest.mark.skipif(not _IS_ROOT, reason="giving a file to another user needs root")
@pytest.mark.parametrize("how", ["write_file", "update_metadata"])
@pytest.mark.parametrize(
    "mode", [0o640, 0o600, 0o4750, 0o2640], ids=["640", "600", "setuid", "setgid"]
)
def test_root_keeps_the_owner_and_group_of_another_users_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, mode: int
) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(reference_bytes({"w": ("U8", (16,), bytes(16))}, {"note": "a"}))
    os.chown(path, _OTHER_ID, _OTHER_ID)
    path.chmod(mode)  # (after the chown, which clears setuid and setgid)
    during: list[tuple[int, int, int]] = []
    real_write_all = replace_module.write_all

    def watched(file: Any, data: Any) -> None:
        status = os.fstat(file.fileno())
        during.append((status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)))
        real_write_all(file, data)

    monkeypatch.setattr(replace_module, "write_all", watched)
    before = path.stat().st_ino
    _rewrite(how, path)
    after = path.stat()
    assert after.st_ino != before  # the rename path, not an overwrite
    assert (after.st_uid, after.st_gid, stat.S_IMODE(after.st_mode)) == (
        _OTHER_ID,
        _OTHER_ID,
        mode,
    )
    # The owner's from the start; private to the owner until the rename.
    assert set(during) == {(_OTHER_ID, _OTHER_ID, 0o600)}
    assert listing(tmp_path) == ["model.safetensors"]


@pytest.mark.skipif(not _IS_ROOT, reason="a file of another user needs root to make")
@pytest.mark.parametrize("how", ["write_file", "update_metadata"])
def test_an_owner_that_cannot_be_kept_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    # As a non-root user's fchown fails (the file system's refusal, simulated here; the
    # next test has a real user's): refused before a byte is written, nothing changed.
    path = tmp_path / "model.safetensors"
    original = reference_bytes({"w": ("U8", (16,), bytes(16))}, {"note": "a"})
    path.write_bytes(original)
    os.chown(path, _OTHER_ID, _OTHER_ID)

    def refuse(*args: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "fchown", refuse)
    monkeypatch.setattr(replace_module, "write_all", None)  # a write would be a TypeError
    with pytest.raises(PermissionError, match="keep its owner and group") as caught:
        _rewrite(how, path)
    assert caught.value.filename == str(path)
    assert f"uid {_OTHER_ID}, gid {_OTHER_ID}" in str(caught.value)
    assert "Operation not permitted" in str(caught.value)
    assert path.read_bytes() == original
    assert path.stat().st_uid == _OTHER_ID
    assert listing(tmp_path) == ["model.safetensors"]


_AS_ANOTHER_USER = """
import sys
from safetensors_header import update_metadata, write_file
path, how = sys.argv[1], sys.argv[2]
try:
    if how == "write_file":
        write_file(path, {"a": ("U8", [1], b"a")})
    else:
        update_metadata(path, {"note": "x" * 200}, in_place=False)
except PermissionError as error:
    print(type(error).__name__, error.errno, error.filename == path, error.strerror)
else:
    print("written")
"""


@pytest.mark.skipif(not _IS_ROOT, reason="running as another user needs root")
@pytest.mark.parametrize("how", ["write_file", "update_metadata"])
def test_a_user_cannot_take_another_users_file_by_rewriting_it(how: str) -> None:
    # A real unprivileged process (uid and gid 65534) in a directory it may write, rewriting
    # a file of root's that it may read and write: refused, the file is still root's.
    import tempfile

    with tempfile.TemporaryDirectory(dir="/tmp") as directory:
        os.chmod(directory, 0o777)  # (not sticky: a rename over root's file is allowed)
        path = Path(directory) / "model.safetensors"
        original = reference_bytes({"w": ("U8", (16,), bytes(16))}, {"note": "a"})
        path.write_bytes(original)
        path.chmod(0o666)
        setpriv = shutil.which("setpriv")
        if setpriv is None:  # pragma: no cover - util-linux is on every Linux CI image
            pytest.skip("setpriv is not installed")

        def as_another_user(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [
                    *(setpriv, f"--reuid={_OTHER_ID}", f"--regid={_OTHER_ID}", "--clear-groups"),
                    *(sys.executable, *args),
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
                env=untraced_environment(PYTHONPATH=str(ROOT)),
                cwd=directory,
            )

        probe = as_another_user("-c", "import safetensors_header")
        if probe.returncode != 0:  # pragma: no cover - an interpreter or checkout it cannot read
            pytest.skip(f"user {_OTHER_ID} cannot run this checkout: {probe.stderr[-200:]}")
        done = as_another_user("-c", _AS_ANOTHER_USER, str(path), how)
        assert done.returncode == 0, done.stderr
        verdict, number, named, reason = done.stdout.split(" ", 3)
        assert (verdict, number, named) == ("PermissionError", "1", "True"), done.stdout
        assert "cannot replace it and keep its owner and group (uid 0, gid 0)" in reason
        assert f"the new file would be uid {_OTHER_ID}" in reason
        assert path.read_bytes() == original
        assert (path.stat().st_uid, path.stat().st_gid) == (0, 0)
        assert listing(Path(directory)) == ["model.safetensors"]
