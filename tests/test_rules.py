"""One small case per rule of format-rules.md sections 1-3, each judged by us and the reference.

Every case states its expected verdict: ``None`` (accept) or the reference's error kind. The
test first asks the reference (the Rust core of ``safetensors`` 0.8.0) and checks that it
agrees with the expectation, so a wrong expectation shows up as a reference mismatch; then it
checks our parser: the same kind and, where the rule names one, the same tensor; for accepted
files the same names, dtypes, shapes, byte ranges and metadata as the reference reads.

Where format-rules.md and the reference disagree, the case follows the reference and says so.
"""

from __future__ import annotations

import math
import re
import struct
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from helpers import HAVE_REFERENCE, build, reference_header, reference_kind, tensor

from safetensors_header import DTYPE_BITS, HeaderError, parse_header, read_header

if HAVE_REFERENCE:
    import safetensors

U64_MAX = 2**64 - 1
LIMIT = 100_000_000  # the reference's MAX_HEADER_SIZE, inclusive
HEADER_LENGTH = 8  # the u64 N that opens the file


# --- helpers -------------------------------------------------------------------------------


def buf(n: int) -> bytes:
    """A data buffer of n distinct-looking bytes, so that wrong slices show."""
    return bytes((7 * i + 1) % 256 for i in range(n))


def entry(
    extra: str = "", *, dtype: str = '"U8"', shape: str = "[1]", offsets: str = "[0,1]"
) -> str:
    """A tensor entry as JSON text; `extra` is appended inside the object (",\"x\":1")."""
    return f'{{"dtype":{dtype},"shape":{shape},"data_offsets":{offsets}{extra}}}'


def one(value: str, *, name: str = '"a"', data: bytes = b"*") -> bytes:
    """A file with one top-level entry `name: value` and a 1-byte data buffer."""
    return build("{" + name + ":" + value + "}", data)


def ignored(token: str) -> bytes:
    """`token` as the value of an unknown (ignored) field of a valid U8[1] tensor."""
    return one(entry(',"x":' + token))


def in_shape(token: str) -> bytes:
    """`token` as the only dimension of a U8 tensor on [0, 1]."""
    return one(entry(shape=f"[{token}]"))


def in_metadata(token: str) -> bytes:
    """`token` as a metadata value, next to a valid tensor."""
    return build('{"__metadata__":{"k":' + token + '},"a":' + entry() + "}", b"*")


def named(name: str) -> bytes:
    """A valid U8[1] tensor whose name is the JSON string body `name` (escapes as written)."""
    return one(entry(), name=f'"{name}"')


def nested(levels: int, *, container: str = "array") -> bytes:
    """`levels` nested arrays/objects in total: the outer object, the entry, then an
    ignored field holding levels - 2 more."""
    inner = levels - 2
    if container == "array":
        value = "[" * inner + "]" * inner
    else:
        value = '{"k":' * inner + "0" + "}" * inner
    return ignored(value)


Tensors = dict[str, tuple[str, tuple[int, ...], tuple[int, int]]]


class Case(NamedTuple):
    data: bytes
    expected: str | None  # None: accept; else the reference's error kind
    tensors: Tensors | None  # accepts: name -> (dtype, shape, data_offsets)
    metadata: dict[str, str] | None  # accepts: the metadata (None: absent or null)
    tensor: str | tuple[str, ...] | None  # rejects: the tensor named (a tuple: any of these)
    offset: int | None  # InvalidHeader: the file offset of the first non-UTF-8 byte


def case(
    case_id: str,
    data: bytes,
    expected: str | None,
    tensors: Tensors | None = None,
    *,
    metadata: dict[str, str] | None = None,
    tensor: str | tuple[str, ...] | None = None,
    offset: int | None = None,
) -> Any:
    """One case: the file, the expected verdict (None = accept, or the reference's kind).

    For accepts, `tensors` is name -> (dtype, shape, data_offsets) and `metadata` the
    expected metadata (None when absent or null). For rejects, `tensor` is the tensor the
    error names (a tuple: any of these), `offset` the file offset of the first non-UTF-8 byte.
    """
    if expected is None:
        assert tensors is not None, f"{case_id}: an accepted case states its tensors"
    return pytest.param(Case(data, expected, tensors, metadata, tensor, offset), id=case_id)


A1 = {"a": ("U8", (1,), (0, 1))}  # what one() / ignored() / in_shape("1") hold


def reference_error(data: bytes) -> str | None:
    try:
        safetensors.deserialize(data)
    except safetensors.SafetensorError as error:
        return str(error)
    return None


def reference_metadata(data: bytes, path: Path) -> dict[str, str] | None:
    path.write_bytes(data)
    with safetensors.safe_open(str(path), framework="numpy") as file:
        return file.metadata()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rules") / "case.safetensors"


def check(rule: Case, scratch: Path) -> None:
    data, expected, tensors, metadata, tensor, offset = rule
    # (2) The reference agrees with the case's expectation (where it is installed).
    if HAVE_REFERENCE:
        assert reference_kind(data) == expected, "the reference's verdict differs from the case"
    # (1) Our verdict.
    if expected is not None:
        with pytest.raises(HeaderError) as info:
            read_header(data)
        assert info.value.kind == expected
        message = reference_error(data) if HAVE_REFERENCE else None
        if tensor is not None:
            if isinstance(tensor, tuple):
                assert info.value.tensor in tensor
            else:
                assert info.value.tensor == tensor
                named_by_reference = message and re.search(
                    r"for tensor `(.*)`$", message, re.DOTALL
                )
                if named_by_reference:  # only InvalidOffset names it in the reference
                    assert named_by_reference.group(1) == tensor
        if offset is not None:
            assert info.value.offset == offset
            index = message and re.search(r"from index (\d+)", message)
            if index:
                assert HEADER_LENGTH + int(index.group(1)) == offset
        return
    assert tensors is not None
    header = read_header(data)
    n = int.from_bytes(data[:8], "little")
    assert header.header_size == n
    assert header.data_start == HEADER_LENGTH + n
    assert header.file_size == len(data)
    assert header.data_size == len(data) - HEADER_LENGTH - n
    got = {name: (t.dtype, t.shape, t.data_offsets) for name, t in header.tensors.items()}
    assert got == tensors
    spans = [t.data_offsets for t in header.tensors.values()]
    assert spans == sorted(spans), "tensors are in offset order"
    for name, t in header.tensors.items():
        assert t.name == name
        begin, end = t.data_offsets
        assert (t.start, t.end) == (header.data_start + begin, header.data_start + end)
        assert t.nbytes == t.end - t.start
        assert t.numel == math.prod(t.shape)
    # The same metadata, None and {} kept apart.
    got_metadata = None if header.metadata is None else dict(header.metadata)
    assert got_metadata == metadata
    if HAVE_REFERENCE:
        # The same names, dtypes, shapes, bytes and metadata as the reference reads.
        ours = {n: (t.dtype, t.shape, data[t.start : t.end]) for n, t in header.tensors.items()}
        assert ours == reference_header(data)
        assert reference_metadata(data, scratch) == metadata


# --- section 1: layout and the order of checks ----------------------------------------------


def n_only(n: int, tail: bytes = b"") -> bytes:
    return struct.pack("<Q", n) + tail


U8_4 = tensor("U8", [4], 0, 4)

LAYOUT_CASES = [
    # 1. L < 8
    case("L=0", b"", "HeaderTooSmall"),
    case("L=7-zeros", b"\0" * 7, "HeaderTooSmall"),
    case("L=7-0xff-small-before-large", b"\xff" * 7, "HeaderTooSmall"),
    case("N=0-empty-json-not-too-small", b"\0" * 8, "InvalidHeaderDeserialization"),
    case("N=0-with-data", build(b"", 4), "InvalidHeaderDeserialization"),
    # 2. N > 10^8, before the file-size check
    case("N=10^8+1-no-header", n_only(LIMIT + 1), "HeaderTooLarge"),
    case("N=10^8+1-7-byte-tail", n_only(LIMIT + 1, b"{}     "), "HeaderTooLarge"),
    case("N=2^64-1", n_only(U64_MAX, b"{}"), "HeaderTooLarge"),
    case("N=2^63", n_only(2**63, b"{}"), "HeaderTooLarge"),
    case("N=10^8-is-not-too-large", n_only(LIMIT, b"{}"), "InvalidHeaderLength"),
    # 3. 8 + N > L
    case("N-one-past-EOF", build(b"{}", n=3), "InvalidHeaderLength"),
    case("N-far-past-EOF", build(b"{}", n=4096), "InvalidHeaderLength"),
    case("length-before-utf8", build(b"\xff\xff", n=3), "InvalidHeaderLength"),
    case("length-before-json", build(b"{", n=2), "InvalidHeaderLength"),
    case("N-exactly-EOF", build(b"{}"), None, {}),
    case("N-odd-not-multiple-of-8", build(b"{}   "), None, {}),
    case(
        "N-multiple-of-8-padded",
        build({"a": U8_4}, buf(4), pad=True),
        None,
        {"a": ("U8", (4,), (0, 4))},
    ),
    # 4. strict UTF-8 over all N bytes (offset: file offset of the first bad byte)
    case("utf8-lone-continuation", build(b'{"\x80":1}'), "InvalidHeader", offset=10),
    case("utf8-0xff", build(b'{"\xff":1}'), "InvalidHeader", offset=10),
    case("utf8-0xfe", build(b'{"\xfe":1}'), "InvalidHeader", offset=10),
    case("utf8-overlong-2-byte-c0", build(b'{"\xc0\xaf":1}'), "InvalidHeader", offset=10),
    case("utf8-overlong-2-byte-c1", build(b'{"\xc1\xbf":1}'), "InvalidHeader", offset=10),
    case("utf8-overlong-3-byte", build(b'{"\xe0\x80\xaf":1}'), "InvalidHeader", offset=10),
    case("utf8-overlong-4-byte", build(b'{"\xf0\x80\x80\xaf":1}'), "InvalidHeader", offset=10),
    case("utf8-surrogate-d800", build(b'{"\xed\xa0\x80":1}'), "InvalidHeader", offset=10),
    case("utf8-surrogate-dfff", build(b'{"\xed\xbf\xbf":1}'), "InvalidHeader", offset=10),
    case("utf8-cesu8-pair", build(b'{"\xed\xa0\xbd\xed\xb8\x80":1}'), "InvalidHeader", offset=10),
    case("utf8-above-10ffff", build(b'{"\xf4\x90\x80\x80":1}'), "InvalidHeader", offset=10),
    case("utf8-lead-f5", build(b'{"\xf5\x80\x80\x80":1}'), "InvalidHeader", offset=10),
    case("utf8-truncated-in-string", build(b'{"\xe2\x82":1}'), "InvalidHeader", offset=10),
    case("utf8-truncated-4-byte", build(b'{"\xf0\x9f\x98":1}'), "InvalidHeader", offset=10),
    case(
        "utf8-after-valid-chars",
        build('{"é€'.encode() + b'\x80":1}'),
        "InvalidHeader",
        offset=8 + 7,
    ),
    # a character cut by the end of the header is truncated even if the data completes it
    case(
        "utf8-truncated-at-header-end", build(b"{} \xe2\x82", b"\xac"), "InvalidHeader", offset=11
    ),
    case("utf8-invalid-in-padding", build(b"{}    \xff "), "InvalidHeader", offset=14),
    case(
        "utf8-invalid-in-padding-valid-tensor",
        build(b'{"a":' + entry().encode() + b"}\x80", b"*"),
        "InvalidHeader",
        offset=8 + len('{"a":' + entry() + "}"),
    ),
    case("utf8-before-json", build(b'{"a":\xff'), "InvalidHeader", offset=13),
    case(
        "utf8-before-layout",
        build(b'{"a":' + entry(offsets="[5,1]").encode() + b"}\xc0", b"*"),
        "InvalidHeader",
        offset=8 + len('{"a":' + entry() + "}"),
    ),
    case(
        "utf8-valid-2-3-4-byte-and-10ffff",
        build('{"__metadata__":{"é":"€\U0001f600\U0010ffff"}}'),
        None,
        {},
        metadata={"é": "€\U0001f600\U0010ffff"},
    ),
    case(
        "utf8-invalid-bytes-in-data-are-fine",
        build({"a": U8_4}, b"\xff\xfe\x80\xc0"),
        None,
        {"a": ("U8", (4,), (0, 4))},
    ),
    # JSON whitespace (space, tab, CR, LF) before and after; nothing else
    case("ws-space-before", build(b" {}"), None, {}),
    case("ws-tab-before", build(b"\t{}"), None, {}),
    case("ws-cr-before", build(b"\r{}"), None, {}),
    case("ws-lf-before", build(b"\n{}"), None, {}),
    case("ws-all-four-before-and-after", build(b" \t\r\n{} \t\r\n"), None, {}),
    case("ws-space-after", build(b"{} "), None, {}),
    case("ws-tab-after", build(b"{}\t"), None, {}),
    case("ws-cr-after", build(b"{}\r"), None, {}),
    case("ws-lf-after", build(b"{}\n"), None, {}),
    case(
        "ws-between-tokens",
        build(
            b'\n{ "a"\t:\r\n{ "dtype" : "U8" ,\t"shape" : [ 1 ] , "data_offsets" : [ 0 , 1 ] } }',
            b"*",
        ),
        None,
        A1,
    ),
    case("ws-nul-before", build(b"\0{}"), "InvalidHeaderDeserialization"),
    case("ws-nul-after", build(b"{}\0"), "InvalidHeaderDeserialization"),
    case("ws-nul-padding", build(b"{}\0\0\0\0\0\0"), "InvalidHeaderDeserialization"),
    case("ws-formfeed-before", build(b"\x0c{}"), "InvalidHeaderDeserialization"),
    case("ws-formfeed-after", build(b"{}\x0c"), "InvalidHeaderDeserialization"),
    case("ws-formfeed-between-tokens", build(b"{\x0c}"), "InvalidHeaderDeserialization"),
    case("ws-vertical-tab-before", build(b"\x0b{}"), "InvalidHeaderDeserialization"),
    case("ws-bom-before", build(b"\xef\xbb\xbf{}"), "InvalidHeaderDeserialization"),
    case("ws-bom-after", build(b"{}\xef\xbb\xbf"), "InvalidHeaderDeserialization"),
    case("ws-nbsp-before", build("\u00a0{}"), "InvalidHeaderDeserialization"),
    case(
        "json-before-layout",
        build('{"a":' + entry(offsets="[5,1]") + ",}", b"*"),
        "InvalidHeaderDeserialization",
    ),
    # 6. sort by (begin, end), walk with a cursor
    case("one-tensor", build({"a": U8_4}, buf(4)), None, {"a": ("U8", (4,), (0, 4))}),
    case(
        "json-order-irrelevant",
        build({"b": tensor("F32", [1], 4, 8), "a": U8_4}, buf(8)),
        None,
        {"a": ("U8", (4,), (0, 4)), "b": ("F32", (1,), (4, 8))},
    ),
    case(
        "json-order-irrelevant-three",
        build(
            {
                "c": tensor("U8", [1], 6, 7),
                "a": tensor("U8", [2], 0, 2),
                "b": tensor("I16", [2], 2, 6),
            },
            buf(7),
        ),
        None,
        {"a": ("U8", (2,), (0, 2)), "b": ("I16", (2,), (2, 6)), "c": ("U8", (1,), (6, 7))},
    ),
    case("hole-at-start", build({"a": tensor("U8", [4], 4, 8)}, 8), "InvalidOffset", tensor="a"),
    case(
        "hole-between",
        build({"a": U8_4, "b": tensor("U8", [4], 5, 9)}, 9),
        "InvalidOffset",
        tensor="b",
    ),
    case(
        "hole-between-json-order-reversed",
        build({"b": tensor("U8", [4], 5, 9), "a": U8_4}, 9),
        "InvalidOffset",
        tensor="b",
    ),
    case(
        "overlap", build({"a": U8_4, "b": tensor("U8", [4], 2, 6)}, 6), "InvalidOffset", tensor="b"
    ),
    # two non-empty tensors on one range: the reference names either (random map order)
    case("same-range-twice", build({"a": U8_4, "b": U8_4}, 4), "InvalidOffset", tensor=("a", "b")),
    case(
        "zero-length-before-at-cursor",
        build({"a": tensor("F32", [2], 0, 8), "z": tensor("F32", [0], 0, 0)}, buf(8)),
        None,
        {"z": ("F32", (0,), (0, 0)), "a": ("F32", (2,), (0, 8))},
    ),
    case(
        "zero-length-after-at-cursor",
        build({"z": tensor("F32", [0], 8, 8), "a": tensor("F32", [2], 0, 8)}, buf(8)),
        None,
        {"a": ("F32", (2,), (0, 8)), "z": ("F32", (0,), (8, 8))},
    ),
    case(
        "zero-length-between",
        build({"a": U8_4, "z": tensor("U8", [3, 0], 4, 4), "b": tensor("U8", [4], 4, 8)}, buf(8)),
        None,
        {"a": ("U8", (4,), (0, 4)), "z": ("U8", (3, 0), (4, 4)), "b": ("U8", (4,), (4, 8))},
    ),
    case(
        "zero-length-sorts-by-end-too",
        build({"a": U8_4, "b": tensor("U8", [4], 4, 8), "z": tensor("U8", [0], 4, 4)}, buf(8)),
        None,
        {"a": ("U8", (4,), (0, 4)), "z": ("U8", (0,), (4, 4)), "b": ("U8", (4,), (4, 8))},
    ),
    case(
        "two-zero-length-on-one-spot",
        build({"y": tensor("U8", [0], 0, 0), "z": tensor("U8", [0], 0, 0), "a": U8_4}, buf(4)),
        None,
        {"y": ("U8", (0,), (0, 0)), "z": ("U8", (0,), (0, 0)), "a": ("U8", (4,), (0, 4))},
    ),
    case(
        "zero-length-only", build({"z": tensor("U8", [0], 0, 0)}), None, {"z": ("U8", (0,), (0, 0))}
    ),
    case(
        "zero-length-past-cursor",
        build({"a": U8_4, "z": tensor("U8", [0], 5, 5)}, 5),
        "InvalidOffset",
        tensor="z",
    ),
    case(
        "zero-length-inside-a-tensor",
        build({"a": U8_4, "z": tensor("U8", [0], 2, 2)}, 4),
        "InvalidOffset",
        tensor="z",
    ),
    case(
        "zero-length-at-start-not-zero",
        build({"z": tensor("U8", [0], 1, 1)}, 1),
        "InvalidOffset",
        tensor="z",
    ),
    case(
        "end-before-begin",
        build({"a": U8_4, "b": tensor("U8", [0], 4, 2)}, 4),
        "InvalidOffset",
        tensor="b",
    ),
    case(
        "end-before-begin-json-first",
        build({"b": tensor("U8", [0], 4, 2), "a": U8_4}, 4),
        "InvalidOffset",
        tensor="b",
    ),
    case(
        "end-before-begin-sorts-before-same-begin",
        build({"a": U8_4, "c": tensor("U8", [4], 4, 8), "b": tensor("U8", [0], 4, 3)}, 8),
        "InvalidOffset",
        tensor="b",
    ),
    # per tensor: offsets first, then overflow, then misalignment, then size
    case(
        "offset-before-size", build({"a": tensor("U8", [9], 1, 3)}, 3), "InvalidOffset", tensor="a"
    ),
    case(
        "offset-before-overflow",
        build({"a": tensor("U8", [2**32, 2**32, 0], 1, 1)}, 1),
        "InvalidOffset",
        tensor="a",
    ),
    case(
        "first-sorted-tensor-fault-wins",
        build({"b": tensor("U8", [1], 5, 6), "a": tensor("U8", [2], 0, 4)}, 6),
        "TensorInvalidInfo",
        tensor="a",
    ),
    case(
        "offset-fault-before-later-size-fault",
        build({"a": U8_4, "b": tensor("U8", [1], 5, 6), "c": tensor("U8", [9], 6, 7)}, 7),
        "InvalidOffset",
        tensor="b",
    ),
    # overflow: element count left to right in u64, then bits
    case(
        "overflow-2^32-2^32-0",
        build({"a": tensor("U8", [2**32, 2**32, 0], 0, 0)}),
        "ValidationOverflow",
        tensor="a",
    ),
    case(
        "no-overflow-0-2^32-2^32",
        build({"a": tensor("U8", [0, 2**32, 2**32], 0, 0)}),
        None,
        {"a": ("U8", (0, 2**32, 2**32), (0, 0))},
    ),
    case(
        "no-overflow-2^64-1-0",
        build({"a": tensor("F64", [U64_MAX, 0], 0, 0)}),
        None,
        {"a": ("F64", (U64_MAX, 0), (0, 0))},
    ),
    case(
        "overflow-count-2^32-2^32",
        build({"a": tensor("U8", [2**32, 2**32], 0, 1)}, 1),
        "ValidationOverflow",
        tensor="a",
    ),
    case(
        "overflow-count-2^63-2-0",
        build({"a": tensor("U8", [2**63, 2, 0], 0, 0)}),
        "ValidationOverflow",
        tensor="a",
    ),
    case(
        "overflow-bits-U8-2^64-1",
        build({"a": tensor("U8", [U64_MAX], 0, U64_MAX)}),
        "ValidationOverflow",
        tensor="a",
    ),
    case(
        "overflow-bits-U8-2^61",
        build({"a": tensor("U8", [2**61], 0, 2**61)}),
        "ValidationOverflow",
        tensor="a",
    ),
    case(
        "overflow-bits-F64-2^58",
        build({"a": tensor("F64", [2**58], 0, 2**61)}),
        "ValidationOverflow",
        tensor="a",
    ),
    case(
        "overflow-bits-F4-2^62",
        build({"a": tensor("F4", [2**62], 0, 2**61)}),
        "ValidationOverflow",
        tensor="a",
    ),
    case(
        "overflow-bits-before-misaligned-F4-2^64-1",
        build({"a": tensor("F4", [U64_MAX], 0, 1)}, 1),
        "ValidationOverflow",
        tensor="a",
    ),
    case(
        "overflow-bits-U8-2^32-(2^32-1)",
        build({"a": tensor("U8", [2**32, 2**32 - 1], 0, 1)}, 1),
        "ValidationOverflow",
        tensor="a",
    ),
    case(
        "no-overflow-U8-2^61-1-then-short-buffer",
        build({"a": tensor("U8", [2**61 - 1], 0, 2**61 - 1)}),
        "MetadataIncompleteBuffer",
    ),
    case(
        "many-dims",
        build({"a": tensor("U8", [1] * 39 + [2], 0, 2)}, buf(2)),
        None,
        {"a": ("U8", (1,) * 39 + (2,), (0, 2))},
    ),
    case(
        "many-dims-overflow-then-0",
        build({"a": tensor("U8", [2**32] * 3 + [0] * 37, 0, 0)}),
        "ValidationOverflow",
        tensor="a",
    ),
    case(
        "scalar-shape-is-one-element",
        build({"a": tensor("F32", [], 0, 4)}, buf(4)),
        None,
        {"a": ("F32", (), (0, 4))},
    ),
    case(
        "scalar-shape-zero-bytes",
        build({"a": tensor("F32", [], 0, 0)}),
        "TensorInvalidInfo",
        tensor="a",
    ),
    # sub-byte dtypes: bits % 8
    case(
        "misaligned-F4-[1]", build({"a": tensor("F4", [1], 0, 1)}, 1), "MisalignedSlice", tensor="a"
    ),
    case(
        "misaligned-F4-[3]", build({"a": tensor("F4", [3], 0, 2)}, 2), "MisalignedSlice", tensor="a"
    ),
    case(
        "misaligned-F4-[3,1]",
        build({"a": tensor("F4", [3, 1], 0, 2)}, 2),
        "MisalignedSlice",
        tensor="a",
    ),
    case(
        "misaligned-F4-scalar",
        build({"a": tensor("F4", [], 0, 1)}, 1),
        "MisalignedSlice",
        tensor="a",
    ),
    case(
        "aligned-F4-[2,3]-3-bytes",
        build({"a": tensor("F4", [2, 3], 0, 3)}, buf(3)),
        None,
        {"a": ("F4", (2, 3), (0, 3))},
    ),
    case(
        "aligned-F4-[0]", build({"a": tensor("F4", [0], 0, 0)}), None, {"a": ("F4", (0,), (0, 0))}
    ),
    case(
        "misaligned-F6_E2M3-[1]",
        build({"a": tensor("F6_E2M3", [1], 0, 1)}, 1),
        "MisalignedSlice",
        tensor="a",
    ),
    case(
        "misaligned-F6_E2M3-[2]",
        build({"a": tensor("F6_E2M3", [2], 0, 2)}, 2),
        "MisalignedSlice",
        tensor="a",
    ),
    case(
        "misaligned-F6_E2M3-[3]",
        build({"a": tensor("F6_E2M3", [3], 0, 3)}, 3),
        "MisalignedSlice",
        tensor="a",
    ),
    case(
        "misaligned-F6_E3M2-[5]",
        build({"a": tensor("F6_E3M2", [5], 0, 4)}, 4),
        "MisalignedSlice",
        tensor="a",
    ),
    case(
        "aligned-F6_E3M2-[4]-3-bytes",
        build({"a": tensor("F6_E3M2", [4], 0, 3)}, buf(3)),
        None,
        {"a": ("F6_E3M2", (4,), (0, 3))},
    ),
    case(
        "misaligned-before-size",
        build({"a": tensor("F4", [3], 0, 100)}, 100),
        "MisalignedSlice",
        tensor="a",
    ),
    # end - begin != bits / 8
    case(
        "size-too-small", build({"a": tensor("F32", [2], 0, 4)}, 4), "TensorInvalidInfo", tensor="a"
    ),
    case(
        "size-too-large",
        build({"a": tensor("F32", [2], 0, 12)}, 12),
        "TensorInvalidInfo",
        tensor="a",
    ),
    case(
        "size-F4-[2]-is-1-byte",
        build({"a": tensor("F4", [2], 0, 2)}, 2),
        "TensorInvalidInfo",
        tensor="a",
    ),
    case(
        "size-before-coverage",
        build({"a": tensor("F32", [1], 0, 8)}, 9),
        "TensorInvalidInfo",
        tensor="a",
    ),
    # 7. the tensors cover the data buffer exactly
    case("trailing-byte", build({"a": U8_4}, 5), "MetadataIncompleteBuffer"),
    case("short-buffer", build({"a": U8_4}, 3), "MetadataIncompleteBuffer"),
    case("short-buffer-header-only", build({"a": U8_4}), "MetadataIncompleteBuffer"),
    case("no-tensors-but-data", build(b"{}", 1), "MetadataIncompleteBuffer"),
    case(
        "metadata-only-but-data", build({"__metadata__": {"k": "v"}}, 8), "MetadataIncompleteBuffer"
    ),
    case(
        "zero-length-only-but-data",
        build({"z": tensor("U8", [0], 0, 0)}, 1),
        "MetadataIncompleteBuffer",
    ),
    case("no-tensors-no-data", build(b"{}"), None, {}),
]


@pytest.mark.parametrize("rule", LAYOUT_CASES)
def test_layout(rule, scratch):
    check(rule, scratch)


def test_header_of_exactly_10_to_the_8_bytes_is_accepted():
    data = n_only(LIMIT, b"{}" + b" " * (LIMIT - 2))
    assert reference_kind(data) is None
    header = read_header(data)
    assert header.header_size == LIMIT
    assert dict(header.tensors) == {}
    assert header.metadata is None


def test_max_header_size_moves_the_limit():
    # Our own option, not the reference's: the reference accepts both files.
    at_limit, above = build(b"{}" + b" " * 14), build(b"{}" + b" " * 15)
    assert reference_kind(at_limit) is None
    assert reference_kind(above) is None
    assert parse_header(at_limit, max_header_size=16).header_size == 16
    assert read_header(at_limit, max_header_size=16).header_size == 16
    for reader in (parse_header, read_header):
        with pytest.raises(HeaderError) as info:
            reader(above, max_header_size=16)
        assert info.value.kind == "HeaderTooLarge"
    # Raised above 10^8, the limit no longer hides the short file.
    with pytest.raises(HeaderError) as info:
        read_header(n_only(LIMIT + 1, b"{}"), max_header_size=LIMIT + 1)
    assert info.value.kind == "InvalidHeaderLength"


# --- section 2: dtypes ------------------------------------------------------------------------

DTYPE_TABLE = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
    "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}  # fmt: skip


def test_dtype_bits_table():
    assert dict(DTYPE_BITS) == DTYPE_TABLE
    assert list(DTYPE_BITS) == list(DTYPE_TABLE), "enum order, BOOL first, U64 last"


# Shape [8]: the tensor takes exactly `bits` bytes.
DTYPE_CASES = [
    *(
        case(
            f"{dtype}-[8]-is-{bits}-bytes",
            build({"a": tensor(dtype, [8], 0, bits)}, buf(bits)),
            None,
            {"a": (dtype, (8,), (0, bits))},
        )
        for dtype, bits in DTYPE_TABLE.items()
    ),
    *(
        case(
            f"{dtype}-[8]-not-{bits + 1}-bytes",
            build({"a": tensor(dtype, [8], 0, bits + 1)}, bits + 1),
            "TensorInvalidInfo",
            tensor="a",
        )
        for dtype, bits in DTYPE_TABLE.items()
    ),
    *(
        case(
            f"unknown-dtype-{name!r}", one(entry(dtype=f'"{name}"')), "InvalidHeaderDeserialization"
        )
        for name in (
            "f32",
            "bf16",
            "Bool",
            "F8_E4M3FN",
            "F8_E5M2FN",
            "F4_E2M1",
            "F6",
            "BF8",
            "Q4_0",
            "U128",
            "STR",
            "",
            " U8",
            "U8 ",
            "U8\\u0000",
        )
    ),
    case("dtype-escaped-name", one(entry(dtype=r'"U\u0038"')), None, A1),
    case(
        "dtype-escaped-solidus-is-not-a-name",
        one(entry(dtype=r'"U\/8"')),
        "InvalidHeaderDeserialization",
    ),
]


@pytest.mark.parametrize("rule", DTYPE_CASES)
def test_dtypes(rule, scratch):
    check(rule, scratch)


# --- section 3: what the JSON may contain -----------------------------------------------------

BAD = "InvalidHeaderDeserialization"
F64_MAX_EXACT = 2**1024 - 2**970 - 1  # the largest integer that rounds to f64::MAX
TOP_LEVEL_CASES = [
    case("top-empty-object", build(b"{}"), None, {}),
    case("top-array", build(b"[]"), BAD),
    case("top-array-of-object", build(b"[{}]"), BAD),
    case("top-null", build(b"null"), BAD),
    case("top-string", build(b'"{}"'), BAD),
    case("top-number", build(b"1"), BAD),
    case("top-true", build(b"true"), BAD),
    case("top-false", build(b"false"), BAD),
    case("top-whitespace-only", build(b"        "), BAD),
    # tensor names: any string
    case("name-empty", named(""), None, {"": ("U8", (1,), (0, 1))}),
    case("name-nul-escape", named(r"\u0000"), None, {"\0": ("U8", (1,), (0, 1))}),
    case("name-emoji-raw", named("\U0001f600"), None, {"\U0001f600": ("U8", (1,), (0, 1))}),
    case(
        "name-punctuation",
        named("model.layers.0/attn:q[0]"),
        None,
        {"model.layers.0/attn:q[0]": ("U8", (1,), (0, 1))},
    ),
    case(
        "name-__METADATA__-is-a-tensor",
        named("__METADATA__"),
        None,
        {"__METADATA__": ("U8", (1,), (0, 1))},
    ),
    case(
        "name-__metadata__-space-is-a-tensor",
        named("__metadata__ "),
        None,
        {"__metadata__ ": ("U8", (1,), (0, 1))},
    ),
    case(
        "name-_metadata_-is-a-tensor",
        named("_metadata_"),
        None,
        {"_metadata_": ("U8", (1,), (0, 1))},
    ),
    case("name-dtype-is-a-tensor", named("dtype"), None, {"dtype": ("U8", (1,), (0, 1))}),
    case("__METADATA__-with-metadata-value", build(b'{"__METADATA__":{"k":"v"}}'), BAD),
    # __metadata__
    case("metadata-null", build(b'{"__metadata__":null}'), None, {}),
    case("metadata-empty-kept", build(b'{"__metadata__":{}}'), None, {}, metadata={}),
    case(
        "metadata-strings",
        build('{"__metadata__":{"format":"pt","":"","é":"\\n"}}'),
        None,
        {},
        metadata={"format": "pt", "": "", "é": "\n"},
    ),
    case(
        "metadata-after-tensors",
        build('{"a":' + entry() + ',"__metadata__":{"k":"v"}}', b"*"),
        None,
        A1,
        metadata={"k": "v"},
    ),
    case(
        "metadata-between-tensors",
        build(
            '{"a":' + entry() + ',"__metadata__":{"k":"v"},"b":' + entry(offsets="[1,2]") + "}",
            b"*+",
        ),
        None,
        {"a": ("U8", (1,), (0, 1)), "b": ("U8", (1,), (1, 2))},
        metadata={"k": "v"},
    ),
    case(
        "metadata-escaped-key",
        build(rb'{"\u005f_metadata__":{"k":"v"}}'),
        None,
        {},
        metadata={"k": "v"},
    ),
    case("metadata-escaped-key-is-checked", build(rb'{"\u005f_metadata__":1}'), BAD),
    case("metadata-int-value", in_metadata("1"), BAD),
    case("metadata-null-value", in_metadata("null"), BAD),
    case("metadata-bool-value", in_metadata("true"), BAD),
    case("metadata-array-value", in_metadata('["v"]'), BAD),
    case("metadata-object-value", in_metadata("{}"), BAD),
    case("metadata-array", build(b'{"__metadata__":[]}'), BAD),
    case("metadata-array-of-pairs", build(b'{"__metadata__":[["k","v"]]}'), BAD),
    case("metadata-string", build(b'{"__metadata__":"k=v"}'), BAD),
    case("metadata-number", build(b'{"__metadata__":0}'), BAD),
    case("metadata-bool", build(b'{"__metadata__":false}'), BAD),
    case("metadata-twice", build(b'{"__metadata__":{},"__metadata__":{}}'), BAD),
    case(
        "metadata-twice-first-null", build(b'{"__metadata__":null,"__metadata__":{"k":"v"}}'), BAD
    ),
    case("metadata-twice-both-null", build(b'{"__metadata__":null,"__metadata__":null}'), BAD),
    case(
        "metadata-twice-second-null", build(b'{"__metadata__":{"k":"v"},"__metadata__":null}'), BAD
    ),
    case("metadata-twice-one-escaped", build(rb'{"__metadata__":{},"\u005f_metadata__":{}}'), BAD),
    case(
        "metadata-twice-around-tensor",
        build('{"__metadata__":{},"a":' + entry() + ',"__metadata__":{}}', b"*"),
        BAD,
    ),
    case(
        "metadata-duplicate-key-last-wins",
        build(b'{"__metadata__":{"k":"1","k":"2"}}'),
        None,
        {},
        metadata={"k": "2"},
    ),
    case(
        "metadata-duplicate-key-escaped-last-wins",
        build(rb'{"__metadata__":{"k":"1","\u006b":"2","j":"3"}}'),
        None,
        {},
        metadata={"k": "2", "j": "3"},
    ),
    case(
        "metadata-duplicate-key-earlier-not-string", build(b'{"__metadata__":{"k":1,"k":"2"}}'), BAD
    ),
    # tensor entry forms
    case("entry-extra-number", ignored("1"), None, A1),
    case(
        "entry-extra-nested",
        ignored('{"y":[1,{"z":null,"w":[true,false,"s"]}],"v":-2.5e-3}'),
        None,
        A1,
    ),
    case("entry-extra-string", ignored('"junk"'), None, A1),
    case("entry-extra-null", ignored("null"), None, A1),
    case(
        "entry-extra-first",
        one('{"offset":7,"dtype":"U8","shape":[1],"data_offsets":[0,1]}'),
        None,
        A1,
    ),
    case(
        "entry-extra-case-variants-of-fields", one(entry(',"Dtype":"bad","SHAPE":null')), None, A1
    ),
    case("entry-any-field-order", one('{"data_offsets":[0,1],"shape":[1],"dtype":"U8"}'), None, A1),
    case("entry-missing-dtype", one('{"shape":[1],"data_offsets":[0,1]}'), BAD),
    case("entry-missing-shape", one('{"dtype":"U8","data_offsets":[0,1]}'), BAD),
    case("entry-missing-data_offsets", one('{"dtype":"U8","shape":[1]}'), BAD),
    case("entry-empty-object", one("{}"), BAD),
    case("entry-null", one("null"), BAD),
    case("entry-number", one("0"), BAD),
    case("entry-string", one('"U8"'), BAD),
    case("entry-true", one("true"), BAD),
    case("entry-false", one("false"), BAD),
    case("entry-array-form", one('["U8",[1],[0,1]]'), None, A1),
    case("entry-array-form-map-dtype", one('[{"U8":null},[1],[0,1]]'), None, A1),
    case("entry-array-form-2", one('["U8",[1]]'), BAD),
    case("entry-array-form-4", one('["U8",[1],[0,1],null]'), BAD),
    case("entry-array-form-empty", one("[]"), BAD),
    case("entry-array-form-wrong-order", one('[[1],"U8",[0,1]]'), BAD),
    case("dtype-map-form", one(entry(dtype='{"U8":null}')), None, A1),
    case("dtype-map-form-escaped", one(entry(dtype=r'{"U\u0038":null}')), None, A1),
    case("dtype-map-form-value-0", one(entry(dtype='{"U8":0}')), BAD),
    case("dtype-map-form-value-array", one(entry(dtype='{"U8":[]}')), BAD),
    case("dtype-map-form-value-object", one(entry(dtype='{"U8":{}}')), BAD),
    case("dtype-map-form-two-keys", one(entry(dtype='{"U8":null,"I8":null}')), BAD),
    case("dtype-map-form-empty", one(entry(dtype="{}")), BAD),
    case("dtype-map-form-unknown", one(entry(dtype='{"u8":null}')), BAD),
    case("dtype-array", one(entry(dtype='["U8"]')), BAD),
    case("dtype-null", one(entry(dtype="null")), BAD),
    case("dtype-number", one(entry(dtype="8")), BAD),
    case("dtype-bool", one(entry(dtype="true")), BAD),
    case("shape-empty-array", one(entry(shape="[]")), None, {"a": ("U8", (), (0, 1))}),
    case("shape-number", one(entry(shape="1")), BAD),
    case("shape-string", one(entry(shape='"1"')), BAD),
    case("shape-null", one(entry(shape="null")), BAD),
    case("shape-object", one(entry(shape='{"0":1}')), BAD),
    case("shape-nested", one(entry(shape="[[1]]")), BAD),
    case("shape-string-dim", in_shape('"1"'), BAD),
    case("shape-null-dim", in_shape("null"), BAD),
    case("shape-bool-dim", in_shape("true"), BAD),
    case("offsets-one", one(entry(offsets="[1]")), BAD),
    case("offsets-three", one(entry(offsets="[0,1,1]")), BAD),
    case("offsets-empty", one(entry(offsets="[]")), BAD),
    case("offsets-number", one(entry(offsets="1")), BAD),
    case("offsets-null", one(entry(offsets="null")), BAD),
    case("offsets-object", one(entry(offsets='{"0":0,"1":1}')), BAD),
    case("offsets-string-end", one(entry(offsets='[0,"1"]')), BAD),
    case("offsets-float-begin", one(entry(offsets="[0.0,1]")), BAD),
    case("offsets-float-end", one(entry(offsets="[0,1.0]")), BAD),
    case("offsets-negative-zero", one(entry(offsets="[-0,1]")), BAD),
    case("offsets-negative", one(entry(offsets="[-1,1]")), BAD),
    case("offsets-2^64", one(entry(offsets=f"[0,{2**64}]")), BAD),
    case("offsets-bool", one(entry(offsets="[false,true]")), BAD),
    case(
        "offsets-2^64-1-is-an-integer",
        one(entry(offsets=f"[0,{U64_MAX}]")),
        "TensorInvalidInfo",
        tensor="a",
    ),
]

# Integers where an integer is required (a dimension), then the same tokens where any JSON
# value goes (an ignored field): the lexical rules apply everywhere, the type rules only there.
NUMBER_CASES = [
    case("shape-0", in_shape("0"), "TensorInvalidInfo", tensor="a"),
    case("shape-1", in_shape("1"), None, A1),
    case("shape-negative-zero", in_shape("-0"), BAD),
    case("shape-negative-zero-float", in_shape("-0.0"), BAD),
    case("shape-negative", in_shape("-1"), BAD),
    case("shape-float", in_shape("1.0"), BAD),
    case("shape-exponent", in_shape("1e0"), BAD),
    case("shape-exponent-upper", in_shape("1E0"), BAD),
    case(
        "shape-2^64-1-is-an-integer",
        one(entry(shape=f"[{U64_MAX},0]", offsets="[0,0]"), data=b""),
        None,
        {"a": ("U8", (U64_MAX, 0), (0, 0))},
    ),
    case("shape-2^64-is-a-float", one(entry(shape=f"[{2**64},0]", offsets="[0,0]"), data=b""), BAD),
    case("shape-leading-zero", in_shape("01"), BAD),
    case("shape-plus", in_shape("+1"), BAD),
    case("shape-trailing-dot", in_shape("1."), BAD),
    case("shape-leading-dot", in_shape(".5"), BAD),
    case("shape-NaN", in_shape("NaN"), BAD),
    case("shape-Infinity", in_shape("Infinity"), BAD),
    case("ignored-negative-zero", ignored("-0"), None, A1),
    case("ignored-negative", ignored("-1"), None, A1),
    case("ignored-float", ignored("1.5"), None, A1),
    case("ignored-exponents", ignored("[1E5,1.5e+3,1.5E-3,0e400]"), None, A1),
    case("ignored-2^64", ignored(str(2**64)), None, A1),
    case("ignored-below-i64", ignored(str(-(2**63) - 1)), None, A1),
    case("ignored-leading-zero", ignored("01"), BAD),
    case("ignored-double-zero", ignored("00"), BAD),
    case("ignored-negative-leading-zero", ignored("-01"), BAD),
    case("ignored-plus", ignored("+1"), BAD),
    case("ignored-trailing-dot", ignored("1."), BAD),
    case("ignored-leading-dot", ignored(".5"), BAD),
    case("ignored-bare-minus", ignored("-"), BAD),
    case("ignored-bare-exponent", ignored("1e"), BAD),
    case("ignored-hex", ignored("0x10"), BAD),
    case("ignored-NaN", ignored("NaN"), BAD),
    case("ignored-nan", ignored("nan"), BAD),
    case("ignored-Infinity", ignored("Infinity"), BAD),
    case("ignored-minus-Infinity", ignored("-Infinity"), BAD),
    case("ignored-NaN-in-array", ignored("[1,NaN]"), BAD),
    case("metadata-NaN", in_metadata("NaN"), BAD),
    case("tensor-value-NaN", one("NaN"), BAD),
    case("top-NaN", build(b"NaN"), BAD),
    case("ignored-1e400", ignored("1e400"), BAD),
    case("ignored-minus-1e400", ignored("-1e400"), BAD),
    case("ignored-1e-400-underflow-ok", ignored("1e-400"), None, A1),
    case("ignored-minus-1e-400-underflow-ok", ignored("-1e-400"), None, A1),
    case("ignored-310-digit-int", ignored("1" + "0" * 309), BAD),
    case("ignored-310-digit-negative-int", ignored("-1" + "0" * 309), BAD),
    case("ignored-309-digit-int-1e308", ignored("1" + "0" * 308), None, A1),
    case("ignored-309-digit-int-2e308", ignored("2" + "0" * 308), BAD),
    case("ignored-huge-exponent", ignored("1e99999999999"), BAD),
    case("ignored-huge-negative-exponent", ignored("1e-99999999999"), None, A1),
    case("shape-1e400", in_shape("1e400"), BAD),
    case("metadata-1e400", in_metadata("1e400"), BAD),
    case("ignored-f64-max-shortest", ignored("1.7976931348623157e308"), None, A1),
    case("ignored-f64-max-halfway-int", ignored(str(2**1024 - 2**970)), BAD),
    case("ignored-1.8e308", ignored("1.8e308"), BAD),
    # format-rules.md says a literal is rejected when "its value overflows f64". The reference
    # (serde_json without float_roundtrip) does not round correctly: it keeps the first
    # 19-20 significant digits as a u64 (truncating the rest), converts that to f64 and
    # multiplies by 10^exp in f64 arithmetic, rejecting when the product is infinite. These
    # literals round to f64::MAX (finite) under correct rounding, yet the reference rejects
    # them.
    case("ignored-f64-max-rounding-1.7976931348623158e308", ignored("1.7976931348623158e308"), BAD),
    case("ignored-f64-max-rounding-17976931348623158e292", ignored("17976931348623158e292"), BAD),
    case("ignored-f64-max-rounding-309-digit-int", ignored(str(F64_MAX_EXACT)), BAD),
]

STRING_CASES = [
    # raw control characters U+0000-U+001F, wherever a string is
    *(
        case(f"raw-control-{code:#04x}-in-{where}", make(chr(code)), BAD)
        for code in (0x00, 0x01, 0x09, 0x0A, 0x0D, 0x1F)
        for where, make in (
            ("name", named),
            ("metadata-value", lambda s: in_metadata(f'"{s}"')),
            ("ignored-value", lambda s: ignored(f'"{s}"')),
        )
    ),
    case("raw-control-in-metadata-key", build('{"__metadata__":{"\x01":"v"}}'), BAD),
    case("raw-control-in-ignored-key", one(entry(',"\t":1')), BAD),
    case("raw-DEL-is-fine", named("\x7f"), None, {"\x7f": ("U8", (1,), (0, 1))}),
    case("raw-C1-is-fine", named("\u0085"), None, {"\u0085": ("U8", (1,), (0, 1))}),
    # escapes
    case(
        "escapes-all-valid",
        named(r"\"\\\/\b\f\n\r\t\u0041\u00e9\u20ac"),
        None,
        {'"\\/\b\f\n\r\tA\u00e9\u20ac': ("U8", (1,), (0, 1))},
    ),
    *(
        case(f"bad-escape-{label}-in-{where}", make(esc), BAD)
        for label, esc in (
            ("a", r"\a"),
            ("x41", r"\x41"),
            ("quote", r"\'"),
            ("0", r"\0"),
            ("U0041", r"\U0041"),
            ("u-short", r"\u12"),
            ("u-not-hex", r"\uZZZZ"),
            ("u-nonhex-tail", r"\u12G4"),
            ("backslash-space", "\\ "),
        )
        for where, make in (
            ("name", named),
            ("ignored-value", lambda s: ignored(f'"{s}"')),
        )
    ),
    case("bad-escape-in-metadata-value", in_metadata(r'"\a"'), BAD),
    case("bad-escape-at-end-of-string", ignored('"\\"'), BAD),
    # surrogate escapes: only a high one followed by a low one
    *(
        case(f"surrogate-{label}-in-{where}", make(esc), expected, tensors)
        for label, esc, expected, tensors in (
            ("d800-alone", r"\ud800", BAD, None),
            ("dc00-alone", r"\udc00", BAD, None),
            ("dbff-alone", r"\uDBFF", BAD, None),
            ("d800-then-ascii", r"\ud800x", BAD, None),
            ("d800-then-escaped-ascii", r"\ud800\u0041", BAD, None),
            ("d800-then-d800", r"\ud800\ud800", BAD, None),
            ("reversed-pair", r"\udc00\ud800", BAD, None),
            ("d800-at-end", r"x\ud800", BAD, None),
            ("valid-pair", r"\ud83d\ude00", None, A1),
            ("valid-pair-upper", r"\uD83D\uDE00", None, A1),
        )
        for where, make in (
            ("ignored-value", lambda s: ignored(f'"{s}"')),
            ("ignored-key", lambda s: one(entry(f',"{s}":1'))),
        )
    ),
    *(
        case(f"surrogate-{label}-in-name", named(esc), expected, tensors)
        for label, esc, expected, tensors in (
            ("d800-alone", r"\ud800", BAD, None),
            ("dc00-alone", r"\udc00", BAD, None),
            ("d800-then-escaped-ascii", r"\ud800\u0041", BAD, None),
            ("valid-pair", r"\ud83d\ude00", None, {"\U0001f600": ("U8", (1,), (0, 1))}),
        )
    ),
    case("surrogate-d800-in-metadata-value", in_metadata(r'"\ud800"'), BAD),
    case("surrogate-dc00-in-metadata-key", build(rb'{"__metadata__":{"\udc00":"v"}}'), BAD),
    case(
        "surrogate-valid-pair-in-metadata",
        build(rb'{"__metadata__":{"\ud83d\ude00":"\ud83d\ude00"}}'),
        None,
        {},
        metadata={"\U0001f600": "\U0001f600"},
    ),
    case("surrogate-d800-in-dtype", one(entry(dtype=r'"\ud800"')), BAD),
]

STRUCTURE_CASES = [
    # nesting: at most 127 arrays/objects in total, the outer object included
    case("nesting-126-arrays", nested(126), None, A1),
    case("nesting-127-arrays", nested(127), None, A1),
    case("nesting-128-arrays", nested(128), BAD),
    case("nesting-127-objects", nested(127, container="object"), None, A1),
    case("nesting-128-objects", nested(128, container="object"), BAD),
    case("nesting-127-top-array", build("[" * 127 + "]" * 127), BAD),
    # an earlier copy of a repeated name is parsed too, nesting limit included
    case(
        "nesting-127-in-earlier-duplicate",
        build('{"a":' + entry(',"x":' + "[" * 125 + "]" * 125) + ',"a":' + entry() + "}", b"*"),
        None,
        A1,
    ),
    case(
        "nesting-128-in-earlier-duplicate",
        build('{"a":' + entry(',"x":' + "[" * 126 + "]" * 126) + ',"a":' + entry() + "}", b"*"),
        BAD,
    ),
    # after the value only whitespace
    case("trailing-second-object", build(b"{}{}"), BAD),
    case("trailing-second-object-spaced", build(b"{} {}"), BAD),
    case("trailing-letter", build(b"{}x"), BAD),
    case("trailing-number", build(b"{} 1"), BAD),
    case("trailing-comma", build(b"{},"), BAD),
    case("trailing-bracket", build(b"{}]"), BAD),
    case("trailing-brace", build(b"{}}"), BAD),
    case("trailing-line-comment", build(b"{}//c"), BAD),
    case("trailing-block-comment", build(b"{}/**/"), BAD),
    case("leading-comment", build(b"/**/{}"), BAD),
    case("trailing-after-valid-tensor", build('{"a":' + entry() + "}x", b"*"), BAD),
    case("trailing-comma-in-object", build('{"a":' + entry() + ",}", b"*"), BAD),
    case("unterminated-object", build(b'{"a":1'), BAD),
    case("single-quotes", build(b"{'a':1}"), BAD),
    case("unquoted-key", build(b"{a:1}"), BAD),
    case("literal-case", build(b'{"__metadata__":Null}'), BAD),
    # the same tensor name twice: last wins, earlier copies must be well-formed
    case(
        "dup-name-last-wins",
        build(
            '{"a":'
            + entry(offsets="[0,1]")
            + ',"a":'
            + entry(dtype='"I16"', shape="[2]", offsets="[0,4]")
            + "}",
            buf(4),
        ),
        None,
        {"a": ("I16", (2,), (0, 4))},
    ),
    case(
        "dup-name-last-wins-order",
        build(
            '{"a":'
            + entry(offsets="[0,1]")
            + ',"b":'
            + entry(offsets="[1,2]")
            + ',"a":'
            + entry(offsets="[2,3]")
            + "}",
            buf(3),
        ),
        "InvalidOffset",
        tensor="b",
    ),
    case(
        "dup-name-earlier-bad-layout-not-checked",
        build('{"a":' + entry(shape="[5]", offsets="[7,99]") + ',"a":' + entry() + "}", b"*"),
        None,
        A1,
    ),
    case(
        "dup-name-earlier-overflow-not-checked",
        build('{"a":' + entry(shape=f"[{2**32},{2**32},0]") + ',"a":' + entry() + "}", b"*"),
        None,
        A1,
    ),
    case(
        "dup-name-earlier-array-form",
        build('{"a":["U8",[7],[3,4]],"a":' + entry() + "}", b"*"),
        None,
        A1,
    ),
    case(
        "dup-name-earlier-unknown-dtype",
        build('{"a":' + entry(dtype='"X8"') + ',"a":' + entry() + "}", b"*"),
        BAD,
    ),
    case(
        "dup-name-earlier-missing-field",
        build('{"a":{"dtype":"U8","shape":[1]},"a":' + entry() + "}", b"*"),
        BAD,
    ),
    case("dup-name-earlier-null", build('{"a":null,"a":' + entry() + "}", b"*"), BAD),
    case(
        "dup-name-earlier-negative-dim",
        build('{"a":' + entry(shape="[-1]") + ',"a":' + entry() + "}", b"*"),
        BAD,
    ),
    case(
        "dup-name-earlier-float-offset",
        build('{"a":' + entry(offsets="[0,1.5]") + ',"a":' + entry() + "}", b"*"),
        BAD,
    ),
    case(
        "dup-name-earlier-dup-field",
        build('{"a":' + entry(',"dtype":"U8"') + ',"a":' + entry() + "}", b"*"),
        BAD,
    ),
    case(
        "dup-name-later-bad",
        build('{"a":' + entry() + ',"a":' + entry(dtype='"X8"') + "}", b"*"),
        BAD,
    ),
    case(
        "dup-name-escaped",
        build(r'{"a":' + entry(shape="[9]") + r',"\u0061":' + entry() + "}", b"*"),
        None,
        A1,
    ),
    case(
        "dup-name-with-colons",
        build(
            '{"a:b":' + entry(shape="[9]") + ',"__metadata__":{"x":"a:b"},"a:b":' + entry() + "}",
            b"*",
        ),
        None,
        {"a:b": ("U8", (1,), (0, 1))},
        metadata={"x": "a:b"},
    ),
    # fields repeated inside one entry
    case("dup-field-dtype", one(entry(',"dtype":"U8"')), BAD),
    case("dup-field-dtype-different", one(entry(',"dtype":"I8"')), BAD),
    case("dup-field-shape", one(entry(',"shape":[1]')), BAD),
    case("dup-field-data_offsets", one(entry(',"data_offsets":[0,1]')), BAD),
    case("dup-field-dtype-escaped", one(entry(r',"d\u0074ype":"U8"')), BAD),
    case("dup-field-dtype-map-form", one(entry(',"dtype":{"U8":null}')), BAD),
    case("dup-field-unknown-accepted", one(entry(',"x":1,"x":[2],"x":"3"')), None, A1),
    case(
        "dup-key-inside-ignored-object-accepted", ignored('[{"k":1,"k":{"j":2,"j":[]}}]'), None, A1
    ),
    # keys are compared after unescaping
    case(
        "escaped-field-names",
        one(
            r'{"\u0064type":"U8","sh\u0061pe":[1],'
            r'"data\u005foffsets":[0,1]}'
        ),
        None,
        A1,
    ),
    case(
        "escaped-field-name-not-matching",
        one(
            r'{"dtype\u0020":"U8","shape":[1],'
            r'"data_offsets":[0,1]}'
        ),
        BAD,
    ),
]


@pytest.mark.parametrize("rule", TOP_LEVEL_CASES + NUMBER_CASES + STRING_CASES + STRUCTURE_CASES)
def test_json(rule, scratch):
    check(rule, scratch)


# --- parse_header on a prefix -----------------------------------------------------------------

PREFIX_FILE = build({"a": tensor("F32", [2], 0, 8), "b": tensor("U8", [3], 8, 11)}, buf(11))
PREFIX_N = int.from_bytes(PREFIX_FILE[:8], "little")
PREFIX_END = 8 + PREFIX_N  # where the header ends


def test_prefix_holding_the_header_without_file_size_skips_coverage():
    prefix = PREFIX_FILE[:PREFIX_END]
    assert reference_kind(prefix) == "MetadataIncompleteBuffer"  # as a whole file
    header = parse_header(prefix)
    assert header.file_size is None
    assert list(header.tensors) == ["a", "b"]
    assert header.tensors["b"].data_offsets == (8, 11)
    assert (header.tensors["b"].start, header.tensors["b"].end) == (PREFIX_END + 8, PREFIX_END + 11)
    assert header.data_size == 11
    # Trailing bytes: the reference rejects the file, parse_header without file_size does not.
    longer = PREFIX_FILE + b"extra"
    assert reference_kind(longer) == "MetadataIncompleteBuffer"
    assert parse_header(longer).file_size is None


def test_prefix_with_file_size_checks_coverage():
    prefix = PREFIX_FILE[:PREFIX_END]
    header = parse_header(prefix, file_size=len(PREFIX_FILE))
    assert header.file_size == len(PREFIX_FILE)
    assert header.data_start + header.data_size == header.file_size
    assert parse_header(PREFIX_FILE, file_size=len(PREFIX_FILE)) == header
    # Bytes after the header are not looked at.
    assert parse_header(prefix + b"\xff" * 3, file_size=len(PREFIX_FILE)) == header
    for size, whole in (
        (len(PREFIX_FILE) + 1, PREFIX_FILE + b"x"),
        (len(PREFIX_FILE) - 1, PREFIX_FILE[:-1]),
    ):
        with pytest.raises(HeaderError) as info:
            parse_header(prefix, file_size=size)
        assert info.value.kind == "MetadataIncompleteBuffer" == reference_kind(whole)


@pytest.mark.parametrize("cut", [0, 1, 7])
def test_prefix_shorter_than_8_bytes(cut):
    prefix = PREFIX_FILE[:cut]
    # Judged as a whole file: HeaderTooSmall, as the reference says; 8 bytes would tell more.
    with pytest.raises(HeaderError) as info:
        parse_header(prefix)
    assert info.value.kind == "HeaderTooSmall" == reference_kind(prefix)
    assert info.value.needed == 8
    # The file is long enough: the prefix is too short.
    with pytest.raises(HeaderError) as info:
        parse_header(prefix, file_size=len(PREFIX_FILE))
    assert info.value.kind == "PrefixTooShort"
    assert info.value.needed == 8


@pytest.mark.parametrize("cut", [8, 9, 20, PREFIX_END - 1])
def test_prefix_ending_inside_the_header(cut):
    prefix = PREFIX_FILE[:cut]
    with pytest.raises(HeaderError) as info:
        parse_header(prefix)
    assert info.value.kind == "InvalidHeaderLength" == reference_kind(prefix)
    assert info.value.needed == PREFIX_END
    with pytest.raises(HeaderError) as info:
        parse_header(prefix, file_size=len(PREFIX_FILE))
    assert info.value.kind == "PrefixTooShort"
    assert info.value.needed == PREFIX_END
    # A file_size too small for the header is the reference's verdict on such a file.
    with pytest.raises(HeaderError) as info:
        parse_header(prefix, file_size=PREFIX_END - 1)
    assert info.value.kind == "InvalidHeaderLength" == reference_kind(PREFIX_FILE[: PREFIX_END - 1])
    with pytest.raises(HeaderError) as info:
        parse_header(prefix, file_size=7)
    assert info.value.kind == "HeaderTooSmall"


def test_prefix_length_limit_before_prefix_length():
    prefix = n_only(LIMIT + 1)
    for file_size in (None, 2 * LIMIT):
        with pytest.raises(HeaderError) as info:
            parse_header(prefix, file_size=file_size)
        assert info.value.kind == "HeaderTooLarge" == reference_kind(prefix)


def test_prefix_layout_checked_without_file_size():
    data = build({"a": tensor("U8", [4], 0, 4), "b": tensor("U8", [4], 5, 9)}, 9)
    prefix = data[: 8 + int.from_bytes(data[:8], "little")]
    with pytest.raises(HeaderError) as info:
        parse_header(prefix)
    assert info.value.kind == "InvalidOffset" == reference_kind(data)
    assert info.value.tensor == "b"
