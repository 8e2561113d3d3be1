"""The rules of docs/format.md as a table of cases, each judged by us and by the reference.

`RULES` is the table: one small record per case, in the order of docs/format.md, each naming
the section it pins, the file (built by one helper), the expected verdict and the tensor the
error names. ``None`` means the file is accepted; otherwise the verdict is the reference's
error kind, or a tuple of kinds where the reference picks one at random from run to run
(docs/format.md §6). `test_rule` runs every case: it first asks the reference (the Rust core
of ``safetensors`` 0.8.0) and checks that it agrees with the expectation, so that a wrong
expectation shows up as a reference mismatch; then it checks our parser: the same kind and,
where the case names one, the same tensor; for accepted files the same names, dtypes,
shapes, byte ranges and metadata as the reference reads.

docs/format.md cites every case by its test id (tests/test_spec_doc.py checks that it does).
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
BAD = "InvalidHeaderDeserialization"
F64_MAX_EXACT = 2**1024 - 2**970 - 1  # the largest integer that rounds to f64::MAX


# --- builders: each case's file is one call to one of these ---------------------------------


def buf(n: int) -> bytes:
    """A data buffer of n distinct-looking bytes, so that wrong slices show."""
    return bytes((7 * i + 1) % 256 for i in range(n))


def n_only(n: int, tail: bytes = b"") -> bytes:
    """The length prefix `n` followed by `tail`, with no header behind it."""
    return struct.pack("<Q", n) + tail


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


def twice(first: str, second: str, data: bytes = b"*") -> bytes:
    """The tensor name "a" twice: first with entry `first`, then with `second`."""
    return build('{"a":' + first + ',"a":' + second + "}", data)


# --- the table --------------------------------------------------------------------------------

Tensors = dict[str, tuple[str, tuple[int, ...], tuple[int, int]]]


class Rule(NamedTuple):
    """One case of docs/format.md: the file and the verdict the reference gives it."""

    id: str  # the test id: tests/test_rules.py::test_rule[<id>]
    section: str  # the rule of docs/format.md it pins ("3.4" is §3.4)
    data: bytes  # the whole file
    # None: accepted; else the reference's error kind; a tuple: any one of these kinds
    # (the reference picks one at random from run to run, docs/format.md §6).
    expected: str | tuple[str, ...] | None
    tensor: str | tuple[str, ...] | None = None  # rejects: the tensor named (a tuple: any)
    reads: Tensors | None = None  # accepts: name -> (dtype, shape, data_offsets)
    metadata: dict[str, str] | None = None  # accepts: the metadata (None: absent or null)
    offset: int | None = None  # InvalidHeader: the file offset of the first non-UTF-8 byte


A1 = {"a": ("U8", (1,), (0, 1))}  # what one() / ignored() / in_shape("1") hold
U8_4 = tensor("U8", [4], 0, 4)

DTYPE_TABLE = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
    "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}  # fmt: skip

RULES: tuple[Rule, ...] = (
    # §1 -- the file layout and the order of checks ------------------------------------------
    # §1.1 three parts: N, the header, the data buffer
    Rule("one-tensor", "1.1", build({"a": U8_4}, buf(4)), None, reads={"a": ("U8", (4,), (0, 4))}),
    # §1.2 the checks run in a fixed order; the first failure wins
    Rule("L=7-0xff-small-before-large", "1.2", b"\xff" * 7, "HeaderTooSmall"),
    Rule("N=10^8+1-7-byte-tail", "1.2", n_only(LIMIT + 1, b"{}     "), "HeaderTooLarge"),
    Rule("length-before-utf8", "1.2", build(b"\xff\xff", n=3), "InvalidHeaderLength"),
    Rule("length-before-json", "1.2", build(b"{", n=2), "InvalidHeaderLength"),
    Rule("utf8-before-json", "1.2", build(b'{"a":\xff'), "InvalidHeader", offset=13),
    Rule(
        "utf8-before-layout",
        "1.2",
        build(b'{"a":' + entry(offsets="[5,1]").encode() + b"}\xc0", b"*"),
        "InvalidHeader",
        offset=8 + len('{"a":' + entry() + "}"),
    ),
    Rule("json-before-layout", "1.2", build('{"a":' + entry(offsets="[5,1]") + ",}", b"*"), BAD),
    Rule(
        "size-before-coverage",
        "1.2",
        build({"a": tensor("F32", [1], 0, 8)}, 9),
        "TensorInvalidInfo",
        "a",
    ),
    # §1.3 fewer than 8 bytes
    Rule("L=0", "1.3", b"", "HeaderTooSmall"),
    Rule("L=7-zeros", "1.3", b"\0" * 7, "HeaderTooSmall"),
    # §1.4 N above 10^8, judged before the file size
    Rule("N=10^8+1-no-header", "1.4", n_only(LIMIT + 1), "HeaderTooLarge"),
    Rule("N=2^64-1", "1.4", n_only(U64_MAX, b"{}"), "HeaderTooLarge"),
    Rule("N=2^63", "1.4", n_only(2**63, b"{}"), "HeaderTooLarge"),
    Rule("N=10^8-is-not-too-large", "1.4", n_only(LIMIT, b"{}"), "InvalidHeaderLength"),
    # §1.5 the header runs past the end of the file
    Rule("N-one-past-EOF", "1.5", build(b"{}", n=3), "InvalidHeaderLength"),
    Rule("N-far-past-EOF", "1.5", build(b"{}", n=4096), "InvalidHeaderLength"),
    Rule("N-exactly-EOF", "1.5", build(b"{}"), None, reads={}),
    # §1.6 no alignment rule; N = 0 is an empty JSON text
    Rule("N=0-empty-json-not-too-small", "1.6", b"\0" * 8, BAD),
    Rule("N=0-with-data", "1.6", build(b"", 4), BAD),
    Rule("N-odd-not-multiple-of-8", "1.6", build(b"{}   "), None, reads={}),
    Rule(
        "N-multiple-of-8-padded",
        "1.6",
        build({"a": U8_4}, buf(4), pad=True),
        None,
        reads={"a": ("U8", (4,), (0, 4))},
    ),
    # §1.7 all N bytes are strict UTF-8 (offset: the file offset of the first bad byte)
    Rule("utf8-lone-continuation", "1.7", build(b'{"\x80":1}'), "InvalidHeader", offset=10),
    Rule("utf8-0xff", "1.7", build(b'{"\xff":1}'), "InvalidHeader", offset=10),
    Rule("utf8-0xfe", "1.7", build(b'{"\xfe":1}'), "InvalidHeader", offset=10),
    Rule("utf8-overlong-2-byte-c0", "1.7", build(b'{"\xc0\xaf":1}'), "InvalidHeader", offset=10),
    Rule("utf8-overlong-2-byte-c1", "1.7", build(b'{"\xc1\xbf":1}'), "InvalidHeader", offset=10),
    Rule("utf8-overlong-3-byte", "1.7", build(b'{"\xe0\x80\xaf":1}'), "InvalidHeader", offset=10),
    Rule(
        "utf8-overlong-4-byte", "1.7", build(b'{"\xf0\x80\x80\xaf":1}'), "InvalidHeader", offset=10
    ),
    Rule("utf8-surrogate-d800", "1.7", build(b'{"\xed\xa0\x80":1}'), "InvalidHeader", offset=10),
    Rule("utf8-surrogate-dfff", "1.7", build(b'{"\xed\xbf\xbf":1}'), "InvalidHeader", offset=10),
    Rule(
        "utf8-cesu8-pair",
        "1.7",
        build(b'{"\xed\xa0\xbd\xed\xb8\x80":1}'),
        "InvalidHeader",
        offset=10,
    ),
    Rule("utf8-above-10ffff", "1.7", build(b'{"\xf4\x90\x80\x80":1}'), "InvalidHeader", offset=10),
    Rule("utf8-lead-f5", "1.7", build(b'{"\xf5\x80\x80\x80":1}'), "InvalidHeader", offset=10),
    Rule("utf8-truncated-in-string", "1.7", build(b'{"\xe2\x82":1}'), "InvalidHeader", offset=10),
    Rule("utf8-truncated-4-byte", "1.7", build(b'{"\xf0\x9f\x98":1}'), "InvalidHeader", offset=10),
    Rule(
        "utf8-after-valid-chars",
        "1.7",
        build('{"é€'.encode() + b'\x80":1}'),
        "InvalidHeader",
        offset=8 + 7,
    ),
    # a character cut by the end of the header is truncated even if the data completes it
    Rule(
        "utf8-truncated-at-header-end",
        "1.7",
        build(b"{} \xe2\x82", b"\xac"),
        "InvalidHeader",
        offset=11,
    ),
    Rule("utf8-invalid-in-padding", "1.7", build(b"{}    \xff "), "InvalidHeader", offset=14),
    Rule(
        "utf8-invalid-in-padding-valid-tensor",
        "1.7",
        build(b'{"a":' + entry().encode() + b"}\x80", b"*"),
        "InvalidHeader",
        offset=8 + len('{"a":' + entry() + "}"),
    ),
    Rule(
        "utf8-valid-2-3-4-byte-and-10ffff",
        "1.7",
        build('{"__metadata__":{"é":"€\U0001f600\U0010ffff"}}'),
        None,
        reads={},
        metadata={"é": "€\U0001f600\U0010ffff"},
    ),
    Rule(
        "utf8-invalid-bytes-in-data-are-fine",
        "1.7",
        build({"a": U8_4}, b"\xff\xfe\x80\xc0"),
        None,
        reads={"a": ("U8", (4,), (0, 4))},
    ),
    # §2 -- dtypes and sizes ------------------------------------------------------------------
    # §2.1 22 dtypes and their bit widths (shape [8]: the tensor takes exactly `bits` bytes)
    *(
        Rule(
            f"{dtype}-[8]-is-{bits}-bytes",
            "2.1",
            build({"a": tensor(dtype, [8], 0, bits)}, buf(bits)),
            None,
            reads={"a": (dtype, (8,), (0, bits))},
        )
        for dtype, bits in DTYPE_TABLE.items()
    ),
    # §2.2 a dtype is one of those names, exactly, after unescaping
    *(
        Rule(f"unknown-dtype-{label}", "2.2", one(entry(dtype=f'"{name}"')), BAD)
        for label, name in (
            ("f32", "f32"),
            ("bf16", "bf16"),
            ("Bool", "Bool"),
            ("F8_E4M3FN", "F8_E4M3FN"),
            ("F8_E5M2FN", "F8_E5M2FN"),
            ("F4_E2M1", "F4_E2M1"),
            ("F6", "F6"),
            ("BF8", "BF8"),
            ("Q4_0", "Q4_0"),
            ("U128", "U128"),
            ("STR", "STR"),
            ("empty", ""),
            ("space-U8", " U8"),
            ("U8-space", "U8 "),
            ("U8-escaped-NUL", "U8\\u0000"),
        )
    ),
    Rule("dtype-escaped-name", "2.2", one(entry(dtype=r'"U\u0038"')), None, reads=A1),
    Rule("dtype-escaped-solidus-is-not-a-name", "2.2", one(entry(dtype=r'"U\/8"')), BAD),
    # §2.3 bytes = elements x bits / 8, exactly; sub-byte dtypes pack
    *(
        Rule(
            f"{dtype}-[8]-not-{bits + 1}-bytes",
            "2.3",
            build({"a": tensor(dtype, [8], 0, bits + 1)}, bits + 1),
            "TensorInvalidInfo",
            "a",
        )
        for dtype, bits in DTYPE_TABLE.items()
    ),
    Rule(
        "aligned-F4-[2,3]-3-bytes",
        "2.3",
        build({"a": tensor("F4", [2, 3], 0, 3)}, buf(3)),
        None,
        reads={"a": ("F4", (2, 3), (0, 3))},
    ),
    Rule(
        "aligned-F6_E3M2-[4]-3-bytes",
        "2.3",
        build({"a": tensor("F6_E3M2", [4], 0, 3)}, buf(3)),
        None,
        reads={"a": ("F6_E3M2", (4,), (0, 3))},
    ),
    Rule(
        "size-F4-[2]-is-1-byte",
        "2.3",
        build({"a": tensor("F4", [2], 0, 2)}, 2),
        "TensorInvalidInfo",
        "a",
    ),
    # §3 -- JSON lexical rules ----------------------------------------------------------------
    # §3.1 the text is UTF-8; UTF-16 and UTF-32 (which json.loads(bytes) guesses) are not
    Rule("utf16le-header-is-not-json", "3.1", build("{}".encode("utf-16-le")), BAD),
    Rule("utf16be-header-is-not-json", "3.1", build("{}".encode("utf-16-be")), BAD),
    Rule(
        "utf16-with-bom-is-not-utf8", "3.1", build("{}".encode("utf-16")), "InvalidHeader", offset=8
    ),
    Rule(
        "utf32-with-bom-is-not-utf8", "3.1", build("{}".encode("utf-32")), "InvalidHeader", offset=8
    ),
    # §3.2 whitespace is space, tab, CR and LF, and nothing else
    Rule("ws-space-before", "3.2", build(b" {}"), None, reads={}),
    Rule("ws-tab-before", "3.2", build(b"\t{}"), None, reads={}),
    Rule("ws-cr-before", "3.2", build(b"\r{}"), None, reads={}),
    Rule("ws-lf-before", "3.2", build(b"\n{}"), None, reads={}),
    Rule("ws-all-four-before-and-after", "3.2", build(b" \t\r\n{} \t\r\n"), None, reads={}),
    Rule("ws-space-after", "3.2", build(b"{} "), None, reads={}),
    Rule("ws-tab-after", "3.2", build(b"{}\t"), None, reads={}),
    Rule("ws-cr-after", "3.2", build(b"{}\r"), None, reads={}),
    Rule("ws-lf-after", "3.2", build(b"{}\n"), None, reads={}),
    Rule(
        "ws-between-tokens",
        "3.2",
        build(
            b'\n{ "a"\t:\r\n{ "dtype" : "U8" ,\t"shape" : [ 1 ] , "data_offsets" : [ 0 , 1 ] } }',
            b"*",
        ),
        None,
        reads=A1,
    ),
    Rule("ws-nul-before", "3.2", build(b"\0{}"), BAD),
    Rule("ws-nul-after", "3.2", build(b"{}\0"), BAD),
    Rule("ws-nul-padding", "3.2", build(b"{}\0\0\0\0\0\0"), BAD),
    Rule("ws-formfeed-before", "3.2", build(b"\x0c{}"), BAD),
    Rule("ws-formfeed-after", "3.2", build(b"{}\x0c"), BAD),
    Rule("ws-formfeed-between-tokens", "3.2", build(b"{\x0c}"), BAD),
    Rule("ws-vertical-tab-before", "3.2", build(b"\x0b{}"), BAD),
    Rule("ws-bom-before", "3.2", build(b"\xef\xbb\xbf{}"), BAD),
    Rule("ws-bom-after", "3.2", build(b"{}\xef\xbb\xbf"), BAD),
    Rule("ws-nbsp-before", "3.2", build("\u00a0{}"), BAD),
    # §3.3 one value, then only whitespace
    Rule("trailing-second-object", "3.3", build(b"{}{}"), BAD),
    Rule("trailing-second-object-spaced", "3.3", build(b"{} {}"), BAD),
    Rule("trailing-letter", "3.3", build(b"{}x"), BAD),
    Rule("trailing-number", "3.3", build(b"{} 1"), BAD),
    Rule("trailing-comma", "3.3", build(b"{},"), BAD),
    Rule("trailing-bracket", "3.3", build(b"{}]"), BAD),
    Rule("trailing-brace", "3.3", build(b"{}}"), BAD),
    Rule("trailing-line-comment", "3.3", build(b"{}//c"), BAD),
    Rule("trailing-block-comment", "3.3", build(b"{}/**/"), BAD),
    Rule("leading-comment", "3.3", build(b"/**/{}"), BAD),
    Rule("trailing-after-valid-tensor", "3.3", build('{"a":' + entry() + "}x", b"*"), BAD),
    # §3.4 strict JSON syntax
    Rule("trailing-comma-in-object", "3.4", build('{"a":' + entry() + ",}", b"*"), BAD),
    Rule("unterminated-object", "3.4", build(b'{"a":1'), BAD),
    Rule("single-quotes", "3.4", build(b"{'a':1}"), BAD),
    Rule("unquoted-key", "3.4", build(b"{a:1}"), BAD),
    Rule("literal-case", "3.4", build(b'{"__metadata__":Null}'), BAD),
    # §3.5 the number grammar, wherever a number is (a dimension or an ignored field)
    Rule("shape-leading-zero", "3.5", in_shape("01"), BAD),
    Rule("shape-plus", "3.5", in_shape("+1"), BAD),
    Rule("shape-trailing-dot", "3.5", in_shape("1."), BAD),
    Rule("shape-leading-dot", "3.5", in_shape(".5"), BAD),
    Rule("shape-NaN", "3.5", in_shape("NaN"), BAD),
    Rule("shape-Infinity", "3.5", in_shape("Infinity"), BAD),
    Rule("ignored-negative-zero", "3.5", ignored("-0"), None, reads=A1),
    Rule("ignored-negative", "3.5", ignored("-1"), None, reads=A1),
    Rule("ignored-float", "3.5", ignored("1.5"), None, reads=A1),
    Rule("ignored-exponents", "3.5", ignored("[1E5,1.5e+3,1.5E-3,0e400]"), None, reads=A1),
    Rule("ignored-leading-zero", "3.5", ignored("01"), BAD),
    Rule("ignored-double-zero", "3.5", ignored("00"), BAD),
    Rule("ignored-negative-leading-zero", "3.5", ignored("-01"), BAD),
    Rule("ignored-plus", "3.5", ignored("+1"), BAD),
    Rule("ignored-trailing-dot", "3.5", ignored("1."), BAD),
    Rule("ignored-leading-dot", "3.5", ignored(".5"), BAD),
    Rule("ignored-bare-minus", "3.5", ignored("-"), BAD),
    Rule("ignored-bare-exponent", "3.5", ignored("1e"), BAD),
    Rule("ignored-hex", "3.5", ignored("0x10"), BAD),
    Rule("ignored-NaN", "3.5", ignored("NaN"), BAD),
    Rule("ignored-nan", "3.5", ignored("nan"), BAD),
    Rule("ignored-Infinity", "3.5", ignored("Infinity"), BAD),
    Rule("ignored-minus-Infinity", "3.5", ignored("-Infinity"), BAD),
    Rule("ignored-NaN-in-array", "3.5", ignored("[1,NaN]"), BAD),
    Rule("metadata-NaN", "3.5", in_metadata("NaN"), BAD),
    Rule("tensor-value-NaN", "3.5", one("NaN"), BAD),
    Rule("top-NaN", "3.5", build(b"NaN"), BAD),
    # §3.6 a number beyond f64 is rejected anywhere (serde_json's rule, not correct rounding)
    Rule("ignored-1e400", "3.6", ignored("1e400"), BAD),
    Rule("ignored-minus-1e400", "3.6", ignored("-1e400"), BAD),
    Rule("ignored-1e-400-underflow-ok", "3.6", ignored("1e-400"), None, reads=A1),
    Rule("ignored-minus-1e-400-underflow-ok", "3.6", ignored("-1e-400"), None, reads=A1),
    Rule("ignored-310-digit-int", "3.6", ignored("1" + "0" * 309), BAD),
    Rule("ignored-310-digit-negative-int", "3.6", ignored("-1" + "0" * 309), BAD),
    Rule("ignored-309-digit-int-1e308", "3.6", ignored("1" + "0" * 308), None, reads=A1),
    Rule("ignored-309-digit-int-2e308", "3.6", ignored("2" + "0" * 308), BAD),
    Rule("ignored-huge-exponent", "3.6", ignored("1e99999999999"), BAD),
    Rule("ignored-huge-negative-exponent", "3.6", ignored("1e-99999999999"), None, reads=A1),
    Rule("shape-1e400", "3.6", in_shape("1e400"), BAD),
    Rule("metadata-1e400", "3.6", in_metadata("1e400"), BAD),
    Rule("ignored-f64-max-shortest", "3.6", ignored("1.7976931348623157e308"), None, reads=A1),
    Rule("ignored-f64-max-halfway-int", "3.6", ignored(str(2**1024 - 2**970)), BAD),
    Rule("ignored-1.8e308", "3.6", ignored("1.8e308"), BAD),
    # These literals round to f64::MAX (finite) under correct rounding, yet the reference
    # rejects them: serde_json (without float_roundtrip) keeps the first 19-20 significant
    # digits as a u64, converts that to f64 and multiplies by 10^exp in f64 arithmetic,
    # rejecting when the product is infinite.
    Rule(
        "ignored-f64-max-rounding-1.7976931348623158e308",
        "3.6",
        ignored("1.7976931348623158e308"),
        BAD,
    ),
    Rule(
        "ignored-f64-max-rounding-17976931348623158e292",
        "3.6",
        ignored("17976931348623158e292"),
        BAD,
    ),
    Rule("ignored-f64-max-rounding-309-digit-int", "3.6", ignored(str(F64_MAX_EXACT)), BAD),
    # §3.7 integers: no fraction, no exponent, not -0, 0 ..= 2^64-1; nothing else where the
    # format needs one (a dimension, an offset)
    Rule("shape-0", "3.7", in_shape("0"), "TensorInvalidInfo", "a"),
    Rule("shape-1", "3.7", in_shape("1"), None, reads=A1),
    Rule("shape-negative-zero", "3.7", in_shape("-0"), BAD),
    Rule("shape-negative-zero-float", "3.7", in_shape("-0.0"), BAD),
    Rule("shape-negative", "3.7", in_shape("-1"), BAD),
    Rule("shape-float", "3.7", in_shape("1.0"), BAD),
    Rule("shape-exponent", "3.7", in_shape("1e0"), BAD),
    Rule("shape-exponent-upper", "3.7", in_shape("1E0"), BAD),
    Rule(
        "shape-2^64-1-is-an-integer",
        "3.7",
        one(entry(shape=f"[{U64_MAX},0]", offsets="[0,0]"), data=b""),
        None,
        reads={"a": ("U8", (U64_MAX, 0), (0, 0))},
    ),
    Rule(
        "shape-2^64-is-a-float",
        "3.7",
        one(entry(shape=f"[{2**64},0]", offsets="[0,0]"), data=b""),
        BAD,
    ),
    Rule("ignored-2^64", "3.7", ignored(str(2**64)), None, reads=A1),
    Rule("ignored-below-i64", "3.7", ignored(str(-(2**63) - 1)), None, reads=A1),
    Rule("offsets-float-begin", "3.7", one(entry(offsets="[0.0,1]")), BAD),
    Rule("offsets-float-end", "3.7", one(entry(offsets="[0,1.0]")), BAD),
    Rule("offsets-negative-zero", "3.7", one(entry(offsets="[-0,1]")), BAD),
    Rule("offsets-negative", "3.7", one(entry(offsets="[-1,1]")), BAD),
    Rule("offsets-2^64", "3.7", one(entry(offsets=f"[0,{2**64}]")), BAD),
    Rule(
        "offsets-2^64-1-is-an-integer",
        "3.7",
        one(entry(offsets=f"[0,{U64_MAX}]")),
        "TensorInvalidInfo",
        "a",
    ),
    # §3.8 no raw control characters (U+0000-U+001F) in any string
    *(
        Rule(f"raw-control-{code:#04x}-in-{where}", "3.8", make(chr(code)), BAD)
        for code in (0x00, 0x01, 0x09, 0x0A, 0x0D, 0x1F)
        for where, make in (
            ("name", named),
            ("metadata-value", lambda s: in_metadata(f'"{s}"')),
            ("ignored-value", lambda s: ignored(f'"{s}"')),
        )
    ),
    Rule("raw-control-in-metadata-key", "3.8", build('{"__metadata__":{"\x01":"v"}}'), BAD),
    Rule("raw-control-in-ignored-key", "3.8", one(entry(',"\t":1')), BAD),
    Rule("raw-DEL-is-fine", "3.8", named("\x7f"), None, reads={"\x7f": ("U8", (1,), (0, 1))}),
    Rule("raw-C1-is-fine", "3.8", named("\u0085"), None, reads={"\u0085": ("U8", (1,), (0, 1))}),
    # §3.9 nine escapes and no others
    Rule(
        "escapes-all-valid",
        "3.9",
        named(r"\"\\\/\b\f\n\r\t\u0041\u00e9\u20ac"),
        None,
        reads={'"\\/\b\f\n\r\tA\u00e9\u20ac': ("U8", (1,), (0, 1))},
    ),
    *(
        Rule(f"bad-escape-{label}-in-{where}", "3.9", make(esc), BAD)
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
    Rule("bad-escape-in-metadata-value", "3.9", in_metadata(r'"\a"'), BAD),
    Rule("bad-escape-at-end-of-string", "3.9", ignored('"\\"'), BAD),
    # §3.10 surrogate escapes only as a high-low pair
    *(
        Rule(f"surrogate-{label}-in-{where}", "3.10", make(esc), expected, reads=reads)
        for label, esc, expected, reads in (
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
        Rule(f"surrogate-{label}-in-name", "3.10", named(esc), expected, reads=reads)
        for label, esc, expected, reads in (
            ("d800-alone", r"\ud800", BAD, None),
            ("dc00-alone", r"\udc00", BAD, None),
            ("d800-then-escaped-ascii", r"\ud800\u0041", BAD, None),
            ("valid-pair", r"\ud83d\ude00", None, {"\U0001f600": ("U8", (1,), (0, 1))}),
        )
    ),
    Rule("surrogate-d800-in-metadata-value", "3.10", in_metadata(r'"\ud800"'), BAD),
    Rule("surrogate-dc00-in-metadata-key", "3.10", build(rb'{"__metadata__":{"\udc00":"v"}}'), BAD),
    Rule(
        "surrogate-valid-pair-in-metadata",
        "3.10",
        build(rb'{"__metadata__":{"\ud83d\ude00":"\ud83d\ude00"}}'),
        None,
        reads={},
        metadata={"\U0001f600": "\U0001f600"},
    ),
    Rule("surrogate-d800-in-dtype", "3.10", one(entry(dtype=r'"\ud800"')), BAD),
    # §3.11 at most 127 arrays and objects deep, the outer object included
    Rule("nesting-126-arrays", "3.11", nested(126), None, reads=A1),
    Rule("nesting-127-arrays", "3.11", nested(127), None, reads=A1),
    Rule("nesting-128-arrays", "3.11", nested(128), BAD),
    Rule("nesting-127-objects", "3.11", nested(127, container="object"), None, reads=A1),
    Rule("nesting-128-objects", "3.11", nested(128, container="object"), BAD),
    Rule("nesting-127-top-array", "3.11", build("[" * 127 + "]" * 127), BAD),
    # an earlier copy of a repeated name is parsed too, nesting limit included
    Rule(
        "nesting-127-in-earlier-duplicate",
        "3.11",
        twice(entry(',"x":' + "[" * 125 + "]" * 125), entry()),
        None,
        reads=A1,
    ),
    Rule(
        "nesting-128-in-earlier-duplicate",
        "3.11",
        twice(entry(',"x":' + "[" * 126 + "]" * 126), entry()),
        BAD,
    ),
    # §4 -- the object model ------------------------------------------------------------------
    # §4.1 the top level is an object
    Rule("top-empty-object", "4.1", build(b"{}"), None, reads={}),
    Rule("top-array", "4.1", build(b"[]"), BAD),
    Rule("top-array-of-object", "4.1", build(b"[{}]"), BAD),
    Rule("top-null", "4.1", build(b"null"), BAD),
    Rule("top-string", "4.1", build(b'"{}"'), BAD),
    Rule("top-number", "4.1", build(b"1"), BAD),
    Rule("top-true", "4.1", build(b"true"), BAD),
    Rule("top-false", "4.1", build(b"false"), BAD),
    Rule("top-whitespace-only", "4.1", build(b"        "), BAD),
    # §4.2 every key but __metadata__ is a tensor name, any string
    Rule("name-empty", "4.2", named(""), None, reads={"": ("U8", (1,), (0, 1))}),
    Rule("name-nul-escape", "4.2", named(r"\u0000"), None, reads={"\0": ("U8", (1,), (0, 1))}),
    Rule(
        "name-emoji-raw",
        "4.2",
        named("\U0001f600"),
        None,
        reads={"\U0001f600": ("U8", (1,), (0, 1))},
    ),
    Rule(
        "name-punctuation",
        "4.2",
        named("model.layers.0/attn:q[0]"),
        None,
        reads={"model.layers.0/attn:q[0]": ("U8", (1,), (0, 1))},
    ),
    Rule(
        "name-__METADATA__-is-a-tensor",
        "4.2",
        named("__METADATA__"),
        None,
        reads={"__METADATA__": ("U8", (1,), (0, 1))},
    ),
    Rule(
        "name-__metadata__-space-is-a-tensor",
        "4.2",
        named("__metadata__ "),
        None,
        reads={"__metadata__ ": ("U8", (1,), (0, 1))},
    ),
    Rule(
        "name-_metadata_-is-a-tensor",
        "4.2",
        named("_metadata_"),
        None,
        reads={"_metadata_": ("U8", (1,), (0, 1))},
    ),
    Rule(
        "name-dtype-is-a-tensor", "4.2", named("dtype"), None, reads={"dtype": ("U8", (1,), (0, 1))}
    ),
    Rule("__METADATA__-with-metadata-value", "4.2", build(b'{"__METADATA__":{"k":"v"}}'), BAD),
    Rule(
        "metadata-escaped-key",
        "4.2",
        build(rb'{"\u005f_metadata__":{"k":"v"}}'),
        None,
        reads={},
        metadata={"k": "v"},
    ),
    Rule("metadata-escaped-key-is-checked", "4.2", build(rb'{"\u005f_metadata__":1}'), BAD),
    # §4.3 __metadata__ is null or an object of strings; {} is not null
    Rule("metadata-null", "4.3", build(b'{"__metadata__":null}'), None, reads={}),
    Rule("metadata-empty-kept", "4.3", build(b'{"__metadata__":{}}'), None, reads={}, metadata={}),
    Rule(
        "metadata-strings",
        "4.3",
        build('{"__metadata__":{"format":"pt","":"","é":"\\n"}}'),
        None,
        reads={},
        metadata={"format": "pt", "": "", "é": "\n"},
    ),
    Rule(
        "metadata-after-tensors",
        "4.3",
        build('{"a":' + entry() + ',"__metadata__":{"k":"v"}}', b"*"),
        None,
        reads=A1,
        metadata={"k": "v"},
    ),
    Rule(
        "metadata-between-tensors",
        "4.3",
        build(
            '{"a":' + entry() + ',"__metadata__":{"k":"v"},"b":' + entry(offsets="[1,2]") + "}",
            b"*+",
        ),
        None,
        reads={"a": ("U8", (1,), (0, 1)), "b": ("U8", (1,), (1, 2))},
        metadata={"k": "v"},
    ),
    Rule("metadata-int-value", "4.3", in_metadata("1"), BAD),
    Rule("metadata-null-value", "4.3", in_metadata("null"), BAD),
    Rule("metadata-bool-value", "4.3", in_metadata("true"), BAD),
    Rule("metadata-array-value", "4.3", in_metadata('["v"]'), BAD),
    Rule("metadata-object-value", "4.3", in_metadata("{}"), BAD),
    Rule("metadata-array", "4.3", build(b'{"__metadata__":[]}'), BAD),
    Rule("metadata-array-of-pairs", "4.3", build(b'{"__metadata__":[["k","v"]]}'), BAD),
    Rule("metadata-string", "4.3", build(b'{"__metadata__":"k=v"}'), BAD),
    Rule("metadata-number", "4.3", build(b'{"__metadata__":0}'), BAD),
    Rule("metadata-bool", "4.3", build(b'{"__metadata__":false}'), BAD),
    # §4.4 __metadata__ once; a key repeated inside it: the last wins
    Rule("metadata-twice", "4.4", build(b'{"__metadata__":{},"__metadata__":{}}'), BAD),
    Rule(
        "metadata-twice-first-null",
        "4.4",
        build(b'{"__metadata__":null,"__metadata__":{"k":"v"}}'),
        BAD,
    ),
    Rule(
        "metadata-twice-both-null", "4.4", build(b'{"__metadata__":null,"__metadata__":null}'), BAD
    ),
    Rule(
        "metadata-twice-second-null",
        "4.4",
        build(b'{"__metadata__":{"k":"v"},"__metadata__":null}'),
        BAD,
    ),
    Rule(
        "metadata-twice-one-escaped",
        "4.4",
        build(rb'{"__metadata__":{},"\u005f_metadata__":{}}'),
        BAD,
    ),
    Rule(
        "metadata-twice-around-tensor",
        "4.4",
        build('{"__metadata__":{},"a":' + entry() + ',"__metadata__":{}}', b"*"),
        BAD,
    ),
    Rule(
        "metadata-duplicate-key-last-wins",
        "4.4",
        build(b'{"__metadata__":{"k":"1","k":"2"}}'),
        None,
        reads={},
        metadata={"k": "2"},
    ),
    Rule(
        "metadata-duplicate-key-escaped-last-wins",
        "4.4",
        build(rb'{"__metadata__":{"k":"1","\u006b":"2","j":"3"}}'),
        None,
        reads={},
        metadata={"k": "2", "j": "3"},
    ),
    Rule(
        "metadata-duplicate-key-earlier-not-string",
        "4.4",
        build(b'{"__metadata__":{"k":1,"k":"2"}}'),
        BAD,
    ),
    # §4.5 a tensor entry is an object: three fields in any order, unknown fields ignored
    Rule("entry-extra-number", "4.5", ignored("1"), None, reads=A1),
    Rule(
        "entry-extra-nested",
        "4.5",
        ignored('{"y":[1,{"z":null,"w":[true,false,"s"]}],"v":-2.5e-3}'),
        None,
        reads=A1,
    ),
    Rule("entry-extra-string", "4.5", ignored('"junk"'), None, reads=A1),
    Rule("entry-extra-null", "4.5", ignored("null"), None, reads=A1),
    Rule(
        "entry-extra-first",
        "4.5",
        one('{"offset":7,"dtype":"U8","shape":[1],"data_offsets":[0,1]}'),
        None,
        reads=A1,
    ),
    Rule(
        "entry-extra-case-variants-of-fields",
        "4.5",
        one(entry(',"Dtype":"bad","SHAPE":null')),
        None,
        reads=A1,
    ),
    Rule(
        "entry-any-field-order",
        "4.5",
        one('{"data_offsets":[0,1],"shape":[1],"dtype":"U8"}'),
        None,
        reads=A1,
    ),
    Rule("entry-missing-dtype", "4.5", one('{"shape":[1],"data_offsets":[0,1]}'), BAD),
    Rule("entry-missing-shape", "4.5", one('{"dtype":"U8","data_offsets":[0,1]}'), BAD),
    Rule("entry-missing-data_offsets", "4.5", one('{"dtype":"U8","shape":[1]}'), BAD),
    Rule("entry-empty-object", "4.5", one("{}"), BAD),
    # §4.6 ... or an array of exactly three: dtype, shape, data_offsets
    Rule("entry-array-form", "4.6", one('["U8",[1],[0,1]]'), None, reads=A1),
    Rule("entry-array-form-map-dtype", "4.6", one('[{"U8":null},[1],[0,1]]'), None, reads=A1),
    Rule("entry-array-form-2", "4.6", one('["U8",[1]]'), BAD),
    Rule("entry-array-form-4", "4.6", one('["U8",[1],[0,1],null]'), BAD),
    Rule("entry-array-form-empty", "4.6", one("[]"), BAD),
    Rule("entry-array-form-wrong-order", "4.6", one('[[1],"U8",[0,1]]'), BAD),
    # §4.7 nothing else is a tensor entry
    Rule("entry-null", "4.7", one("null"), BAD),
    Rule("entry-number", "4.7", one("0"), BAD),
    Rule("entry-string", "4.7", one('"U8"'), BAD),
    Rule("entry-true", "4.7", one("true"), BAD),
    Rule("entry-false", "4.7", one("false"), BAD),
    # §4.8 dtype: a string, or an object of one key whose value is null
    Rule("dtype-map-form", "4.8", one(entry(dtype='{"U8":null}')), None, reads=A1),
    Rule("dtype-map-form-escaped", "4.8", one(entry(dtype=r'{"U\u0038":null}')), None, reads=A1),
    Rule("dtype-map-form-value-0", "4.8", one(entry(dtype='{"U8":0}')), BAD),
    Rule("dtype-map-form-value-array", "4.8", one(entry(dtype='{"U8":[]}')), BAD),
    Rule("dtype-map-form-value-object", "4.8", one(entry(dtype='{"U8":{}}')), BAD),
    Rule("dtype-map-form-two-keys", "4.8", one(entry(dtype='{"U8":null,"I8":null}')), BAD),
    Rule("dtype-map-form-empty", "4.8", one(entry(dtype="{}")), BAD),
    Rule("dtype-map-form-unknown", "4.8", one(entry(dtype='{"u8":null}')), BAD),
    Rule("dtype-array", "4.8", one(entry(dtype='["U8"]')), BAD),
    Rule("dtype-null", "4.8", one(entry(dtype="null")), BAD),
    Rule("dtype-number", "4.8", one(entry(dtype="8")), BAD),
    Rule("dtype-bool", "4.8", one(entry(dtype="true")), BAD),
    # §4.9 shape: an array of integers, maybe empty
    Rule("shape-empty-array", "4.9", one(entry(shape="[]")), None, reads={"a": ("U8", (), (0, 1))}),
    Rule("shape-number", "4.9", one(entry(shape="1")), BAD),
    Rule("shape-string", "4.9", one(entry(shape='"1"')), BAD),
    Rule("shape-null", "4.9", one(entry(shape="null")), BAD),
    Rule("shape-object", "4.9", one(entry(shape='{"0":1}')), BAD),
    Rule("shape-nested", "4.9", one(entry(shape="[[1]]")), BAD),
    Rule("shape-string-dim", "4.9", in_shape('"1"'), BAD),
    Rule("shape-null-dim", "4.9", in_shape("null"), BAD),
    Rule("shape-bool-dim", "4.9", in_shape("true"), BAD),
    # §4.10 data_offsets: an array of exactly two integers
    Rule("offsets-one", "4.10", one(entry(offsets="[1]")), BAD),
    Rule("offsets-three", "4.10", one(entry(offsets="[0,1,1]")), BAD),
    Rule("offsets-empty", "4.10", one(entry(offsets="[]")), BAD),
    Rule("offsets-number", "4.10", one(entry(offsets="1")), BAD),
    Rule("offsets-null", "4.10", one(entry(offsets="null")), BAD),
    Rule("offsets-object", "4.10", one(entry(offsets='{"0":0,"1":1}')), BAD),
    Rule("offsets-string-end", "4.10", one(entry(offsets='[0,"1"]')), BAD),
    Rule("offsets-bool", "4.10", one(entry(offsets="[false,true]")), BAD),
    # §4.11 a repeated tensor name: the last copy wins; earlier copies must be well-formed
    Rule(
        "dup-name-last-wins",
        "4.11",
        twice(entry(offsets="[0,1]"), entry(dtype='"I16"', shape="[2]", offsets="[0,4]"), buf(4)),
        None,
        reads={"a": ("I16", (2,), (0, 4))},
    ),
    Rule(
        "dup-name-last-wins-order",
        "4.11",
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
        "b",
    ),
    Rule(
        "dup-name-earlier-bad-layout-not-checked",
        "4.11",
        twice(entry(shape="[5]", offsets="[7,99]"), entry()),
        None,
        reads=A1,
    ),
    Rule(
        "dup-name-earlier-overflow-not-checked",
        "4.11",
        twice(entry(shape=f"[{2**32},{2**32},0]"), entry()),
        None,
        reads=A1,
    ),
    Rule("dup-name-earlier-array-form", "4.11", twice('["U8",[7],[3,4]]', entry()), None, reads=A1),
    Rule("dup-name-earlier-unknown-dtype", "4.11", twice(entry(dtype='"X8"'), entry()), BAD),
    Rule(
        "dup-name-earlier-missing-field", "4.11", twice('{"dtype":"U8","shape":[1]}', entry()), BAD
    ),
    Rule("dup-name-earlier-null", "4.11", twice("null", entry()), BAD),
    Rule("dup-name-earlier-negative-dim", "4.11", twice(entry(shape="[-1]"), entry()), BAD),
    Rule("dup-name-earlier-float-offset", "4.11", twice(entry(offsets="[0,1.5]"), entry()), BAD),
    Rule("dup-name-earlier-dup-field", "4.11", twice(entry(',"dtype":"U8"'), entry()), BAD),
    Rule("dup-name-later-bad", "4.11", twice(entry(), entry(dtype='"X8"')), BAD),
    Rule(
        "dup-name-with-colons",
        "4.11",
        build(
            '{"a:b":' + entry(shape="[9]") + ',"__metadata__":{"x":"a:b"},"a:b":' + entry() + "}",
            b"*",
        ),
        None,
        reads={"a:b": ("U8", (1,), (0, 1))},
        metadata={"x": "a:b"},
    ),
    # §4.12 dtype, shape and data_offsets once per entry; unknown fields any number of times
    Rule("dup-field-dtype", "4.12", one(entry(',"dtype":"U8"')), BAD),
    Rule("dup-field-dtype-different", "4.12", one(entry(',"dtype":"I8"')), BAD),
    Rule("dup-field-shape", "4.12", one(entry(',"shape":[1]')), BAD),
    Rule("dup-field-data_offsets", "4.12", one(entry(',"data_offsets":[0,1]')), BAD),
    Rule("dup-field-dtype-map-form", "4.12", one(entry(',"dtype":{"U8":null}')), BAD),
    Rule(
        "dup-field-unknown-accepted", "4.12", one(entry(',"x":1,"x":[2],"x":"3"')), None, reads=A1
    ),
    Rule(
        "dup-key-inside-ignored-object-accepted",
        "4.12",
        ignored('[{"k":1,"k":{"j":2,"j":[]}}]'),
        None,
        reads=A1,
    ),
    # §4.13 keys are compared after unescaping
    Rule("dup-field-dtype-escaped", "4.13", one(entry(r',"d\u0074ype":"U8"')), BAD),
    Rule(
        "dup-name-escaped",
        "4.13",
        build(r'{"a":' + entry(shape="[9]") + r',"\u0061":' + entry() + "}", b"*"),
        None,
        reads=A1,
    ),
    Rule(
        "escaped-field-names",
        "4.13",
        one(r'{"\u0064type":"U8","sh\u0061pe":[1],"data\u005foffsets":[0,1]}'),
        None,
        reads=A1,
    ),
    Rule(
        "escaped-field-name-not-matching",
        "4.13",
        one(r'{"dtype\u0020":"U8","shape":[1],"data_offsets":[0,1]}'),
        BAD,
    ),
    # §5 -- layout validation -----------------------------------------------------------------
    # §5.1 tensors are sorted by (begin, end); the JSON order does not matter
    Rule(
        "json-order-irrelevant",
        "5.1",
        build({"b": tensor("F32", [1], 4, 8), "a": U8_4}, buf(8)),
        None,
        reads={"a": ("U8", (4,), (0, 4)), "b": ("F32", (1,), (4, 8))},
    ),
    Rule(
        "json-order-irrelevant-three",
        "5.1",
        build(
            {
                "c": tensor("U8", [1], 6, 7),
                "a": tensor("U8", [2], 0, 2),
                "b": tensor("I16", [2], 2, 6),
            },
            buf(7),
        ),
        None,
        reads={"a": ("U8", (2,), (0, 2)), "b": ("I16", (2,), (2, 6)), "c": ("U8", (1,), (6, 7))},
    ),
    Rule(
        "zero-length-sorts-by-end-too",
        "5.1",
        build({"a": U8_4, "b": tensor("U8", [4], 4, 8), "z": tensor("U8", [0], 4, 4)}, buf(8)),
        None,
        reads={"a": ("U8", (4,), (0, 4)), "z": ("U8", (0,), (4, 4)), "b": ("U8", (4,), (4, 8))},
    ),
    Rule(
        "end-before-begin-sorts-before-same-begin",
        "5.1",
        build({"a": U8_4, "c": tensor("U8", [4], 4, 8), "b": tensor("U8", [0], 4, 3)}, 8),
        "InvalidOffset",
        "b",
    ),
    # §5.2 the walk: each tensor begins where the previous one ends, and does not end before
    Rule("hole-at-start", "5.2", build({"a": tensor("U8", [4], 4, 8)}, 8), "InvalidOffset", "a"),
    Rule(
        "hole-between",
        "5.2",
        build({"a": U8_4, "b": tensor("U8", [4], 5, 9)}, 9),
        "InvalidOffset",
        "b",
    ),
    Rule(
        "hole-between-json-order-reversed",
        "5.2",
        build({"b": tensor("U8", [4], 5, 9), "a": U8_4}, 9),
        "InvalidOffset",
        "b",
    ),
    Rule(
        "overlap", "5.2", build({"a": U8_4, "b": tensor("U8", [4], 2, 6)}, 6), "InvalidOffset", "b"
    ),
    Rule(
        "end-before-begin",
        "5.2",
        build({"a": U8_4, "b": tensor("U8", [0], 4, 2)}, 4),
        "InvalidOffset",
        "b",
    ),
    Rule(
        "end-before-begin-json-first",
        "5.2",
        build({"b": tensor("U8", [0], 4, 2), "a": U8_4}, 4),
        "InvalidOffset",
        "b",
    ),
    # §5.3 zero-length tensors: only exactly at the cursor
    Rule(
        "zero-length-before-at-cursor",
        "5.3",
        build({"a": tensor("F32", [2], 0, 8), "z": tensor("F32", [0], 0, 0)}, buf(8)),
        None,
        reads={"z": ("F32", (0,), (0, 0)), "a": ("F32", (2,), (0, 8))},
    ),
    Rule(
        "zero-length-after-at-cursor",
        "5.3",
        build({"z": tensor("F32", [0], 8, 8), "a": tensor("F32", [2], 0, 8)}, buf(8)),
        None,
        reads={"a": ("F32", (2,), (0, 8)), "z": ("F32", (0,), (8, 8))},
    ),
    Rule(
        "zero-length-between",
        "5.3",
        build({"a": U8_4, "z": tensor("U8", [3, 0], 4, 4), "b": tensor("U8", [4], 4, 8)}, buf(8)),
        None,
        reads={"a": ("U8", (4,), (0, 4)), "z": ("U8", (3, 0), (4, 4)), "b": ("U8", (4,), (4, 8))},
    ),
    Rule(
        "two-zero-length-on-one-spot",
        "5.3",
        build({"y": tensor("U8", [0], 0, 0), "z": tensor("U8", [0], 0, 0), "a": U8_4}, buf(4)),
        None,
        reads={"y": ("U8", (0,), (0, 0)), "z": ("U8", (0,), (0, 0)), "a": ("U8", (4,), (0, 4))},
    ),
    Rule(
        "zero-length-only",
        "5.3",
        build({"z": tensor("U8", [0], 0, 0)}),
        None,
        reads={"z": ("U8", (0,), (0, 0))},
    ),
    Rule(
        "zero-length-past-cursor",
        "5.3",
        build({"a": U8_4, "z": tensor("U8", [0], 5, 5)}, 5),
        "InvalidOffset",
        "z",
    ),
    Rule(
        "zero-length-inside-a-tensor",
        "5.3",
        build({"a": U8_4, "z": tensor("U8", [0], 2, 2)}, 4),
        "InvalidOffset",
        "z",
    ),
    Rule(
        "zero-length-at-start-not-zero",
        "5.3",
        build({"z": tensor("U8", [0], 1, 1)}, 1),
        "InvalidOffset",
        "z",
    ),
    # §5.4 per tensor: offsets, then overflow, then misalignment, then size; the first
    # tensor (in sorted order) with any fault decides
    Rule(
        "offset-before-size", "5.4", build({"a": tensor("U8", [9], 1, 3)}, 3), "InvalidOffset", "a"
    ),
    Rule(
        "offset-before-overflow",
        "5.4",
        build({"a": tensor("U8", [2**32, 2**32, 0], 1, 1)}, 1),
        "InvalidOffset",
        "a",
    ),
    Rule(
        "overflow-bits-before-misaligned-F4-2^64-1",
        "5.4",
        build({"a": tensor("F4", [U64_MAX], 0, 1)}, 1),
        "ValidationOverflow",
        "a",
    ),
    Rule(
        "misaligned-before-size",
        "5.4",
        build({"a": tensor("F4", [3], 0, 100)}, 100),
        "MisalignedSlice",
        "a",
    ),
    Rule(
        "first-sorted-tensor-fault-wins",
        "5.4",
        build({"b": tensor("U8", [1], 5, 6), "a": tensor("U8", [2], 0, 4)}, 6),
        "TensorInvalidInfo",
        "a",
    ),
    Rule(
        "offset-fault-before-later-size-fault",
        "5.4",
        build({"a": U8_4, "b": tensor("U8", [1], 5, 6), "c": tensor("U8", [9], 6, 7)}, 7),
        "InvalidOffset",
        "b",
    ),
    # §5.5 the element count: the shape multiplied left to right in u64
    Rule(
        "overflow-2^32-2^32-0",
        "5.5",
        build({"a": tensor("U8", [2**32, 2**32, 0], 0, 0)}),
        "ValidationOverflow",
        "a",
    ),
    Rule(
        "no-overflow-0-2^32-2^32",
        "5.5",
        build({"a": tensor("U8", [0, 2**32, 2**32], 0, 0)}),
        None,
        reads={"a": ("U8", (0, 2**32, 2**32), (0, 0))},
    ),
    Rule(
        "no-overflow-2^64-1-0",
        "5.5",
        build({"a": tensor("F64", [U64_MAX, 0], 0, 0)}),
        None,
        reads={"a": ("F64", (U64_MAX, 0), (0, 0))},
    ),
    Rule(
        "overflow-count-2^32-2^32",
        "5.5",
        build({"a": tensor("U8", [2**32, 2**32], 0, 1)}, 1),
        "ValidationOverflow",
        "a",
    ),
    Rule(
        "overflow-count-2^63-2-0",
        "5.5",
        build({"a": tensor("U8", [2**63, 2, 0], 0, 0)}),
        "ValidationOverflow",
        "a",
    ),
    Rule(
        "many-dims",
        "5.5",
        build({"a": tensor("U8", [1] * 39 + [2], 0, 2)}, buf(2)),
        None,
        reads={"a": ("U8", (1,) * 39 + (2,), (0, 2))},
    ),
    Rule(
        "many-dims-overflow-then-0",
        "5.5",
        build({"a": tensor("U8", [2**32] * 3 + [0] * 37, 0, 0)}),
        "ValidationOverflow",
        "a",
    ),
    Rule(
        "scalar-shape-is-one-element",
        "5.5",
        build({"a": tensor("F32", [], 0, 4)}, buf(4)),
        None,
        reads={"a": ("F32", (), (0, 4))},
    ),
    Rule(
        "scalar-shape-zero-bytes",
        "5.5",
        build({"a": tensor("F32", [], 0, 0)}),
        "TensorInvalidInfo",
        "a",
    ),
    # §5.6 the size in bits: elements x dtype bits in u64
    Rule(
        "overflow-bits-U8-2^64-1",
        "5.6",
        build({"a": tensor("U8", [U64_MAX], 0, U64_MAX)}),
        "ValidationOverflow",
        "a",
    ),
    Rule(
        "overflow-bits-U8-2^61",
        "5.6",
        build({"a": tensor("U8", [2**61], 0, 2**61)}),
        "ValidationOverflow",
        "a",
    ),
    Rule(
        "overflow-bits-F64-2^58",
        "5.6",
        build({"a": tensor("F64", [2**58], 0, 2**61)}),
        "ValidationOverflow",
        "a",
    ),
    Rule(
        "overflow-bits-F4-2^62",
        "5.6",
        build({"a": tensor("F4", [2**62], 0, 2**61)}),
        "ValidationOverflow",
        "a",
    ),
    Rule(
        "overflow-bits-U8-2^32-(2^32-1)",
        "5.6",
        build({"a": tensor("U8", [2**32, 2**32 - 1], 0, 1)}, 1),
        "ValidationOverflow",
        "a",
    ),
    Rule(
        "no-overflow-U8-2^61-1-then-short-buffer",
        "5.6",
        build({"a": tensor("U8", [2**61 - 1], 0, 2**61 - 1)}),
        "MetadataIncompleteBuffer",
    ),
    # §5.7 sub-byte dtypes: a size in bits that is not a whole number of bytes
    Rule(
        "misaligned-F4-[1]", "5.7", build({"a": tensor("F4", [1], 0, 1)}, 1), "MisalignedSlice", "a"
    ),
    Rule(
        "misaligned-F4-[3]", "5.7", build({"a": tensor("F4", [3], 0, 2)}, 2), "MisalignedSlice", "a"
    ),
    Rule(
        "misaligned-F4-[3,1]",
        "5.7",
        build({"a": tensor("F4", [3, 1], 0, 2)}, 2),
        "MisalignedSlice",
        "a",
    ),
    Rule(
        "misaligned-F4-scalar",
        "5.7",
        build({"a": tensor("F4", [], 0, 1)}, 1),
        "MisalignedSlice",
        "a",
    ),
    Rule(
        "aligned-F4-[0]",
        "5.7",
        build({"a": tensor("F4", [0], 0, 0)}),
        None,
        reads={"a": ("F4", (0,), (0, 0))},
    ),
    Rule(
        "misaligned-F6_E2M3-[1]",
        "5.7",
        build({"a": tensor("F6_E2M3", [1], 0, 1)}, 1),
        "MisalignedSlice",
        "a",
    ),
    Rule(
        "misaligned-F6_E2M3-[2]",
        "5.7",
        build({"a": tensor("F6_E2M3", [2], 0, 2)}, 2),
        "MisalignedSlice",
        "a",
    ),
    Rule(
        "misaligned-F6_E2M3-[3]",
        "5.7",
        build({"a": tensor("F6_E2M3", [3], 0, 3)}, 3),
        "MisalignedSlice",
        "a",
    ),
    Rule(
        "misaligned-F6_E3M2-[5]",
        "5.7",
        build({"a": tensor("F6_E3M2", [5], 0, 4)}, 4),
        "MisalignedSlice",
        "a",
    ),
    # §5.8 the span of data_offsets is the size in bytes, exactly
    Rule(
        "size-too-small", "5.8", build({"a": tensor("F32", [2], 0, 4)}, 4), "TensorInvalidInfo", "a"
    ),
    Rule(
        "size-too-large",
        "5.8",
        build({"a": tensor("F32", [2], 0, 12)}, 12),
        "TensorInvalidInfo",
        "a",
    ),
    # §5.9 the tensors cover the data buffer exactly
    Rule("trailing-byte", "5.9", build({"a": U8_4}, 5), "MetadataIncompleteBuffer"),
    Rule("short-buffer", "5.9", build({"a": U8_4}, 3), "MetadataIncompleteBuffer"),
    Rule("short-buffer-header-only", "5.9", build({"a": U8_4}), "MetadataIncompleteBuffer"),
    Rule("no-tensors-but-data", "5.9", build(b"{}", 1), "MetadataIncompleteBuffer"),
    Rule(
        "metadata-only-but-data",
        "5.9",
        build({"__metadata__": {"k": "v"}}, 8),
        "MetadataIncompleteBuffer",
    ),
    Rule(
        "zero-length-only-but-data",
        "5.9",
        build({"z": tensor("U8", [0], 0, 0)}, 1),
        "MetadataIncompleteBuffer",
    ),
    Rule("no-tensors-no-data", "5.9", build(b"{}"), None, reads={}),
    # §6 -- the reference's run-to-run randomness ---------------------------------------------
    # §6.1 tensors on one (begin, end) are walked in a random order. The reference names
    # either tensor, and where the two fail differently it gives either kind: these cases
    # accept every outcome the reference can give (and do not depend on which it gives).
    Rule("same-range-twice", "6.1", build({"a": U8_4, "b": U8_4}, 4), "InvalidOffset", ("a", "b")),
    Rule(
        "same-range-different-faults",
        "6.1",
        build({"a": tensor("F32", [1], 0, 4), "b": tensor("U8", [3], 0, 4)}, 4),
        ("InvalidOffset", "TensorInvalidInfo"),
        "b",
    ),
    # §6.2 ... zero-size tensors on one offset too: either kind, from run to run
    Rule(
        "zero-size-tie-F4-U8",
        "6.2",
        build({"a": tensor("F4", [1], 0, 0), "b": tensor("U8", [1], 0, 0)}),
        ("MisalignedSlice", "TensorInvalidInfo"),
        ("a", "b"),
    ),
    Rule(
        "zero-size-tie-U8-F4",
        "6.2",
        build({"b": tensor("U8", [1], 0, 0), "a": tensor("F4", [1], 0, 0)}),
        ("MisalignedSlice", "TensorInvalidInfo"),
        ("a", "b"),
    ),
    # one of the two is valid: every order gives the other's fault
    Rule(
        "zero-size-tie-one-valid",
        "6.2",
        build({"a": tensor("F4", [1], 0, 0), "b": tensor("U8", [0], 0, 0)}),
        "MisalignedSlice",
        "a",
    ),
)

RULE_CASES = [pytest.param(rule, id=rule.id) for rule in RULES]


# --- running a case ---------------------------------------------------------------------------


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


def kinds(expected: str | tuple[str, ...]) -> tuple[str, ...]:
    return expected if isinstance(expected, tuple) else (expected,)


def check_reject(rule: Rule) -> None:
    assert rule.expected is not None
    with pytest.raises(HeaderError) as info:
        read_header(rule.data)
    assert info.value.kind in kinds(rule.expected)
    message = reference_error(rule.data) if HAVE_REFERENCE else None
    if isinstance(rule.tensor, tuple):
        assert info.value.tensor in rule.tensor
    elif rule.tensor is not None:
        assert info.value.tensor == rule.tensor
        named_by_reference = message and re.search(r"for tensor `(.*)`$", message, re.DOTALL)
        if named_by_reference:  # only InvalidOffset names it in the reference
            assert named_by_reference.group(1) == rule.tensor
    if rule.offset is not None:
        assert info.value.offset == rule.offset
        index = message and re.search(r"from index (\d+)", message)
        if index:
            assert HEADER_LENGTH + int(index.group(1)) == rule.offset


def check_accept(rule: Rule, scratch: Path) -> None:
    data = rule.data
    header = read_header(data)
    n = int.from_bytes(data[:8], "little")
    assert header.header_size == n
    assert header.data_start == HEADER_LENGTH + n
    assert header.file_size == len(data)
    assert header.data_size == len(data) - HEADER_LENGTH - n
    got = {name: (t.dtype, t.shape, t.data_offsets) for name, t in header.tensors.items()}
    assert got == rule.reads
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
    assert got_metadata == rule.metadata
    if HAVE_REFERENCE:
        # The same names, dtypes, shapes, bytes and metadata as the reference reads.
        ours = {n: (t.dtype, t.shape, data[t.start : t.end]) for n, t in header.tensors.items()}
        assert ours == reference_header(data)
        assert reference_metadata(data, scratch) == rule.metadata


@pytest.mark.parametrize("rule", RULE_CASES)
def test_rule(rule: Rule, scratch: Path) -> None:
    # (1) The reference agrees with the case's expectation (where it is installed). Where
    # it is random (a tuple), any of the listed kinds agrees, whichever it gives this run.
    if HAVE_REFERENCE:
        verdict = reference_kind(rule.data)
        if rule.expected is None:
            assert verdict is None, "the reference rejects a case expected to be accepted"
        else:
            assert verdict in kinds(rule.expected), "the reference's verdict differs"
    # (2) Our verdict.
    if rule.expected is None:
        check_accept(rule, scratch)
    else:
        check_reject(rule)


def test_the_table_is_well_formed() -> None:
    ids = [rule.id for rule in RULES]
    assert len(ids) == len(set(ids)), "case ids are unique"
    for rule in RULES:
        assert re.fullmatch(r"\d+\.\d+", rule.section), rule.id
        assert isinstance(rule.data, bytes), rule.id
        if rule.expected is None:
            assert rule.reads is not None, f"{rule.id}: an accepted case states what it reads"
            assert rule.tensor is None, rule.id
            assert rule.offset is None, rule.id
        else:
            assert rule.reads is None, rule.id
            assert rule.metadata is None, rule.id
            assert all(kind.isidentifier() for kind in kinds(rule.expected)), rule.id


# --- §1.4: the limit, on big files --------------------------------------------------------------


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


# --- §1.8: parse_header on a prefix -------------------------------------------------------------

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


# --- §2.1: the dtype table ----------------------------------------------------------------------


def test_dtype_bits_table():
    assert dict(DTYPE_BITS) == DTYPE_TABLE
    assert list(DTYPE_BITS) == list(DTYPE_TABLE), "enum order, BOOL first, U64 last"


# --- §6.3: this parser walks tied tensors in a fixed order --------------------------------------


@pytest.mark.parametrize(
    ("header", "kind", "name"),
    [
        pytest.param(
            {"a": tensor("F4", [1], 0, 0), "b": tensor("U8", [1], 0, 0)},
            "MisalignedSlice",
            "a",
            id="F4-first",
        ),
        pytest.param(
            {"b": tensor("U8", [1], 0, 0), "a": tensor("F4", [1], 0, 0)},
            "TensorInvalidInfo",
            "b",
            id="U8-first",
        ),
        pytest.param(
            '{"a":{"dtype":"F4","shape":[1],"data_offsets":[0,0]},'
            '"b":{"dtype":"U8","shape":[1],"data_offsets":[0,0]},'
            '"a":{"dtype":"F4","shape":[1],"data_offsets":[0,0]}}',
            "MisalignedSlice",
            "a",
            id="repeated-name-keeps-its-first-place",
        ),
    ],
)
def test_ties_are_walked_in_the_order_names_first_appear(
    header: str | dict[str, Any], kind: str, name: str
) -> None:
    # The reference gives either kind here (§6.2); we always give the same one.
    data = build(header)
    for _ in range(3):
        with pytest.raises(HeaderError) as info:
            read_header(data)
        assert (info.value.kind, info.value.tensor) == (kind, name)
