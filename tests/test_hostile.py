"""Hostile input: resource bounds, and nothing but HeaderError escapes.

Timings for these cases are printed by benchmarks/bench_hostile.py; here only the outcome
and the resources that can be counted exactly (bytes read, bytes allocated) are asserted.
"""

from __future__ import annotations

import io
import tracemalloc

import pytest
from helpers import HAVE_REFERENCE, build, reference_kind, run_child

from safetensors_header import HeaderError, read_header

ENTRY = '{"dtype":"U8","shape":[1],"data_offsets":[0,1]'


def shape(dims: str) -> str:
    """A header whose one tensor has the shape `[dims]` and 1 byte of data."""
    return '{"a":{"dtype":"U8","shape":[' + dims + '],"data_offsets":[0,1]}}'


def kind_of(data: bytes, **options: int) -> str | None:
    try:
        read_header(data, **options)
    except HeaderError as error:
        return error.kind
    return None


class Counting(io.RawIOBase):
    def __init__(self, data: bytes) -> None:
        self._inner = io.BytesIO(data)
        self.served = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._inner.seek(offset, whence)

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        count = self._inner.readinto(buffer)
        self.served += count
        return count


@pytest.mark.parametrize("header_size", [2**64 - 1, 2**63, 10**8, 10**8 + 1, 10**6])
@pytest.mark.parametrize("limit", [None, 2**64], ids=["default-limit", "limit-raised"])
def test_a_lying_length_prefix_allocates_and_reads_nothing_large(
    header_size: int, limit: int | None
) -> None:
    data = header_size.to_bytes(8, "little") + b'{"a":1}' + bytes(100)
    options = {} if limit is None else {"max_header_size": limit}
    stream = Counting(data)
    tracemalloc.start()
    try:
        with pytest.raises(HeaderError) as info:
            read_header(stream, **options)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.kind in {"HeaderTooLarge", "InvalidHeaderLength"}
    assert stream.served <= 64  # the length prefix, and a few bytes for the error's hint
    assert peak < 1 << 20
    if HAVE_REFERENCE and limit is None:
        assert reference_kind(data) == info.value.kind


BAD = "InvalidHeaderDeserialization"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param('{"a":' + "[" * 5000 + "]" * 5000 + "}", BAD, id="5000-deep"),
        pytest.param('{"a":' + "[" * 200_000, BAD, id="200000-open-brackets"),
        pytest.param('{"a":' + '{"a":' * 200_000, BAD, id="200000-open-objects"),
        pytest.param('{"a":' + ENTRY + ',"x":' + "9" * 100_000 + "}}", BAD, id="100000-digit-int"),
        pytest.param(
            '{"a":' + ENTRY + ',"x":1' + "0" * 100_000 + ".5}}", BAD, id="100000-digit-float"
        ),
        pytest.param(
            '{"a":' + ENTRY + ',"x":1e' + "9" * 100_000 + "}}", BAD, id="100000-digit-exp"
        ),
        pytest.param(shape("9" * 100_000), BAD, id="100000-digit-dim"),
        pytest.param(shape("1," * 100_000 + "1"), None, id="100001-dims"),
        pytest.param(
            shape("4294967296," * 10_000 + "0"),
            "ValidationOverflow",
            id="10000-huge-dims-then-zero",
        ),
        pytest.param(
            shape("18446744073709551615," * 40_000 + "0"),
            "ValidationOverflow",
            id="40000-u64-max-dims-then-zero",
        ),
        pytest.param(
            '{"__metadata__":{"k":"' + "\\ud800" * 100_000 + '"}}', BAD, id="lone-surrogates"
        ),
    ],
)
def test_pathological_headers_end_as_header_errors(body: str, expected: str | None) -> None:
    data = build(body, 1)
    assert kind_of(data) == expected
    if HAVE_REFERENCE:
        assert reference_kind(data) == expected


def test_high_rank_shapes_stay_on_the_fast_path() -> None:
    from safetensors_header._core import parse as _parser

    body = shape("1," * 100_000 + "1")
    assert _parser.reader("json").read(body) is not None
    # 2^61 elements or more cannot match a span below 2^61 bytes: the exact path decides.
    assert _parser.reader("json").read(shape("2," * 61 + "1")) is None
    data = build(shape("2," * 61 + "1"), 1)
    assert kind_of(data) == "ValidationOverflow"  # 2^61 bytes are 2^64 bits
    if HAVE_REFERENCE:
        assert reference_kind(data) == "ValidationOverflow"


def test_a_shape_with_a_zero_is_never_multiplied_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its count is 0 whatever the other dims; multiplying 40,000 dims of 2^64 - 1 first
    # took 7.6 s (quadratic in the header size) where the reference takes milliseconds.
    import math

    multiplied: list[tuple[int, ...]] = []
    product = math.prod
    monkeypatch.setattr(math, "prod", lambda dims: multiplied.append(dims) or product(dims))
    cases = {
        "18446744073709551615," * 100 + "0": "ValidationOverflow",  # overflows before the 0
        "0," + "18446744073709551615," * 100 + "1": "TensorInvalidInfo",  # 0 elements, 1 byte
        "4294967296,0": "TensorInvalidInfo",
    }
    for dims, expected in cases.items():
        data = build(shape(dims), 1)
        assert kind_of(data) == expected
        if HAVE_REFERENCE:
            assert reference_kind(data) == expected
    assert multiplied == []


def test_deep_nesting_with_a_raised_recursion_limit_is_not_a_crash() -> None:
    # Before Python 3.12, json's C scanner recursed until the C stack overflowed.
    code = (
        "import sys, struct\n"
        "sys.setrecursionlimit(1_000_000)\n"
        "from safetensors_header import HeaderError, parse_header\n"
        "t = '{\"a\":' + '[' * 2_000_000 + ']' * 2_000_000 + '}'\n"
        "try:\n"
        "    parse_header(struct.pack('<Q', len(t)) + t.encode())\n"
        "except HeaderError as error:\n"
        "    print(error.kind)\n"
    )
    result = run_child(code, timeout=120)
    assert (result.returncode, result.stdout.strip()) == (0, BAD), result.stderr[-500:]


# Deeper than the nesting limit, and a string never closed holding escaped quotes: as an
# expression, so that a child process builds them (too long for its command line).
UNCLOSED = """[
    '"' + '\\\\"' * 200_000 + "[" * 128,
    '{"a":"' + '\\\\"' * 200_000 + "[" * 200,
    '{"a":' + "[" * 200 + '"x\\\\"' * 100_000,
]"""


def test_unclosed_strings_full_of_escaped_quotes_are_judged_in_linear_time() -> None:
    # Each escaped quote of a string never closed once started a scan to the end of the
    # text (quadratic: 40 KB took 4.8 s, 400 KB minutes); in a child, so that a hang fails.
    code = (
        "import struct\n"
        "from safetensors_header import HeaderError, parse_header\n"
        f"for t in {UNCLOSED}:\n"
        "    try:\n"
        "        parse_header(struct.pack('<Q', len(t)) + t.encode())\n"
        "    except HeaderError as error:\n"
        "        print(error.kind)\n"
    )
    result = run_child(code, timeout=120)
    assert (result.returncode, result.stdout.split()) == (0, [BAD] * 3), result.stderr[-500:]
    bodies = eval(UNCLOSED)
    assert all('\\"' in body for body in bodies)
    if HAVE_REFERENCE:
        assert {reference_kind(build(body, 1)) for body in bodies} == {BAD}


def test_a_100_mb_header_of_spaces_is_accepted() -> None:
    data = build(b"{}" + b" " * (10**8 - 2))
    header = read_header(data)
    assert header.header_size == 10**8
    assert not header.tensors


def test_long_names_and_metadata() -> None:
    name = "n" * 1_000_000
    data = build(
        '{"__metadata__":{"k":"' + "v" * 1_000_000 + '"},"' + name + '":' + ENTRY + "}}", 1
    )
    header = read_header(data)
    assert header.tensors[name].nbytes == 1


@pytest.mark.slow
def test_a_million_tensors_with_the_limit_raised() -> None:
    count = 1_000_000
    entry = '"model.decoder.layers.{0:07d}.self_attn.q_proj.weight":{{"dtype":"U8","shape":[1],'
    entry += '"data_offsets":[{0},{1}]}}'
    body = "{" + ",".join(entry.format(i, i + 1) for i in range(count)) + "}"
    data = build(body, count)
    assert kind_of(data) == "HeaderTooLarge"  # above the reference's 10^8 bytes
    header = read_header(data, max_header_size=10**9)
    assert len(header.tensors) == count
    last = header.tensors["model.decoder.layers.0999999.self_attn.q_proj.weight"]
    assert last.end == len(data)


def test_the_reverse_order_of_a_large_header_is_sorted() -> None:
    count = 50_000
    body = (
        "{"
        + ",".join(
            f'"t{i}":{{"dtype":"U8","shape":[1],"data_offsets":[{i},{i + 1}]}}'
            for i in reversed(range(count))
        )
        + "}"
    )
    header = read_header(build(body, count))
    assert list(header.tensors)[:2] == ["t0", "t1"]
