"""The fast JSON path and the exact one: same results, and the fast one steps aside in doubt."""

from __future__ import annotations

import gc

import pytest
from helpers import build, tensor
from test_rules import RULE_CASES, Rule

from safetensors_header import HeaderError, parse_header, read_header
from safetensors_header._core import columns
from safetensors_header._core import parse as _parser

JSON_READER = _parser.reader("json").read


def outcome(data: bytes) -> object:
    try:
        return read_header(data)
    except HeaderError as error:
        return (error.kind, error.tensor, str(error))


@pytest.mark.parametrize("rule", RULE_CASES)
def test_every_rule_case_reads_the_same_on_every_path(
    rule: Rule, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = rule.data
    usual = outcome(data)  # small headers: the json reader, then the exact one
    readers = _parser.READERS
    canonical, json = _parser.reader("canonical"), _parser.reader("json")
    compact = _parser.Reader("compact", _parser.reader("compact").read)  # at any size
    everywhere = _parser.Reader("canonical", canonical.read)  # the canonical reader first
    monkeypatch.setattr(_parser, "READERS", (everywhere, json))
    assert outcome(data) == usual
    monkeypatch.setattr(_parser, "READERS", (compact, everywhere, json))
    assert outcome(data) == usual
    for one in readers:  # each fast reader alone (at any size), then the rule set
        alone = _parser.Reader(one.name, one.read, uses_json=one.uses_json)
        monkeypatch.setattr(_parser, "READERS", (alone,))
        assert outcome(data) == usual
    monkeypatch.setattr(_parser, "READERS", ())
    assert outcome(data) == usual  # the exact reader alone


def text_of(data: bytes) -> str:
    return data[8 : 8 + int.from_bytes(data[:8], "little")].decode()


CANONICAL = build(
    {"__metadata__": {"a": "b"}, "x": tensor("F32", [2], 0, 8), "y": tensor("U8", [1], 8, 9)}, 9
)


def test_fast_path_takes_a_canonical_header() -> None:
    assert JSON_READER(text_of(CANONICAL)) is not None


@pytest.mark.parametrize(
    "header",
    [
        pytest.param('{"a":["U8",[1],[0,1]]}', id="array-form"),
        pytest.param('{"a":["U8",[1]]}', id="array-form-short"),
        pytest.param(
            '{"a":{"dtype":{"U8":null},"shape":[1],"data_offsets":[0,1]}}', id="map-dtype"
        ),
        pytest.param(
            '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}}', id="extra-field"
        ),
        pytest.param('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":5}', id="dup-name"),
        pytest.param(
            '{"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}', id="dup-field"
        ),
        pytest.param('{"__metadata__":{"k":"v","k":"w"}}', id="dup-metadata-key"),
        pytest.param('{"a":{"dtype":"U8","shape":[-0],"data_offsets":[0,1]}}', id="minus-zero"),
        pytest.param('{"a":{"dtype":"U8","shape":[true],"data_offsets":[0,1]}}', id="bool"),
        pytest.param('{"a":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}', id="float"),
        pytest.param('{"a":{"dtype":"U8","shape":[1e0],"data_offsets":[0,1]}}', id="exponent"),
        pytest.param('{"a":{"dtype":"U8","shape":[NaN],"data_offsets":[0,1]}}', id="nan"),
        pytest.param('{"__metadata__":{"k":0.5}}', id="metadata-float"),
        pytest.param(
            '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
            '"b":{"dtype":"U8","shape":[true],"data_offsets":[1,2]}}',
            id="bool-shape-equal-to-an-int-one",
        ),
        pytest.param(
            '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
            '"b":{"dtype":"U8","shape":[1.0],"data_offsets":[1,2]}}',
            id="float-shape-equal-to-an-int-one",
        ),
        pytest.param('{"a":{"dtype":"U8","shape":[1],"data_offsets":[false,1]}}', id="bool-offset"),
        pytest.param(
            '{"\\u00e9":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
            '"b":{"dtype":"U8","shape":[true],"data_offsets":[1,2]}}',
            id="bool-beside-an-escaped-e",
        ),
        pytest.param('{"a":{"dtype":"U8","shape":[null],"data_offsets":[0,1]}}', id="null-dim"),
        pytest.param('{"a":{"dtype":"U8","shape":["1"],"data_offsets":[0,1]}}', id="string-dim"),
        pytest.param('{"a":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]}}', id="array-dim"),
        pytest.param('{"a":{"dtype":"U8","shape":"","data_offsets":[0,1]}}', id="shape-string"),
        pytest.param('{"a":{"dtype":"U8","shape":[],"data_offsets":"01"}}', id="offsets-string"),
        pytest.param(
            '{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},'
            '"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}',
            id="sorted-not-chained",
        ),
        pytest.param('{"a":{"dtype":"U8","shape":1,"data_offsets":[0,1]}}', id="shape-int"),
        pytest.param('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1.0]}}', id="offset-float"),
        pytest.param('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0]}}', id="one-offset"),
        pytest.param('{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', id="gap"),
        pytest.param('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,1]}}', id="size"),
        pytest.param('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":null}', id="null"),
        pytest.param(
            '{"a\\u003a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', id="ascii-escape"
        ),
        pytest.param(
            '{"a\\ud800":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', id="surrogate"
        ),
        pytest.param('{"__metadata__":[]}', id="metadata-array"),
        pytest.param('{"__metadata__":{"k":1}}', id="metadata-number"),
        pytest.param("[]", id="top-array"),
        pytest.param("{", id="syntax"),
        pytest.param('{"a":{"dtype":"X","shape":[1],"data_offsets":[0,1]}}', id="dtype"),
        pytest.param('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}', id="3-offsets"),
        pytest.param('{"a":{"dtype":"U8","shape":[1],"data_offsets":1}}', id="offsets-int"),
        pytest.param('{"a":{"dtype":"U8","shape":[{}],"data_offsets":[0,1]}}', id="object-dim"),
        pytest.param(
            '{"a":{"dtype":"U8","shape":[0,18446744073709551616],"data_offsets":[0,0]}}',
            id="dim-beyond-u64-after-a-zero",
        ),
        pytest.param(
            '{"a":{"dtype":"U8","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}}',
            id="overflow-before-a-zero",
        ),
        pytest.param("{} x", id="short-tail-not-whitespace"),
        pytest.param("{}\x0b", id="vertical-tab-tail"),  # whitespace to Python, not to JSON
        pytest.param("{}\xa0", id="no-break-space-tail"),
        pytest.param("{}" + " " * 100 + "x", id="long-tail-not-whitespace"),
        pytest.param("{}" + " " * 100 + "\x0c", id="long-tail-form-feed"),
    ],
)
def test_fast_path_steps_aside(header: str) -> None:
    assert JSON_READER(header) is None


def test_deep_nesting_beyond_pythons_recursion_limit() -> None:
    data = build('{"a":' + "[" * 200_000 + "]" * 200_000 + "}")
    with pytest.raises(HeaderError, match="nesting deeper than 127") as info:
        read_header(data)
    assert info.value.kind == "InvalidHeaderDeserialization"


def test_brackets_in_a_string_beside_an_escaped_quote_are_not_nesting() -> None:
    # With an escaped quote in the text, its strings are found by a regular expression
    # before the brackets outside them are counted (§3.11).
    brackets = "[" * 200 + "{" * 200
    header = read_header(build('{"__metadata__":{"k":"a\\"' + brackets + '"}}'))
    assert header.metadata == {"k": 'a"' + brackets}
    deep = '{"__metadata__":{"k":"\\""},"a":' + "[" * 130 + "]" * 130 + "}"
    with pytest.raises(HeaderError, match="nesting deeper than 127") as info:
        read_header(build(deep))
    assert info.value.kind == "InvalidHeaderDeserialization"


def test_garbage_collector_state_is_restored() -> None:
    assert gc.isenabled()
    read_header(CANONICAL)
    assert gc.isenabled()
    gc.disable()
    try:
        assert read_header(CANONICAL).tensors["x"].nbytes == 8
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(HeaderError):
        read_header(CANONICAL + b"x")
    assert gc.isenabled()


def test_parses_from_many_threads_restore_the_collector() -> None:
    from concurrent.futures import ThreadPoolExecutor

    data = build({f"t{i}": tensor("U8", [1], i, i + 1) for i in range(20_000)}, 20_000)
    with ThreadPoolExecutor(8) as pool:
        headers = list(pool.map(read_header, [data] * 16))
    assert all(header == headers[0] for header in headers)
    assert gc.isenabled()


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("caf\\u00e9.weight", id="json.dumps-escapes-non-ascii"),
        pytest.param("\\u4e2d\\u6587", id="cjk"),
        pytest.param("a\\\\u00e9\\u00e9", id="escaped-backslash-then-u00e9"),
    ],
)
def test_fast_path_takes_escaped_names(name: str) -> None:
    text = (
        '{"__metadata__":{"note":"line\\none"},'
        f'"{name}":{{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}}}'
    )
    fast = JSON_READER(text)
    assert fast is not None
    assert fast == _parser.exact(text)


def test_fast_path_sorts_an_unsorted_valid_header() -> None:
    header = build({"y": tensor("U8", [1], 8, 9), "x": tensor("F32", [2], 0, 8)}, 9)
    columns = JSON_READER(text_of(header))
    assert columns is not None
    assert columns[0] == ["x", "y"]
    assert columns[3:5] == ([0, 8], [8, 9])


@pytest.mark.parametrize("path", ["fast", "exact"])
def test_one_object_per_dtype_and_shape(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if path == "exact":
        monkeypatch.setattr(_parser, "READERS", ())
    header = build({f"t{i}": tensor("F32", [2, 3], 24 * i, 24 * i + 24) for i in range(3)}, 72)
    infos = list(read_header(header).tensors.values())
    assert len({id(info.dtype) for info in infos}) == 1
    assert len({id(info.shape) for info in infos}) == 1


def test_sorted_and_unsorted_headers_read_alike() -> None:
    forward = build({"x": tensor("F32", [2], 0, 8), "y": tensor("U8", [1], 8, 9)}, 9)
    backward = build({"y": tensor("U8", [1], 8, 9), "x": tensor("F32", [2], 0, 8)}, 9)
    assert list(read_header(backward).tensors) == ["x", "y"]
    assert read_header(backward).tensors == read_header(forward).tensors


@pytest.mark.parametrize("tail", ["", " ", " \t\r\n", " " * 63, " " * 64, " " * 65, "\n" * 5000])
def test_whitespace_after_the_value_stays_on_the_fast_path(tail: str) -> None:
    text = text_of(CANONICAL).rstrip() + tail
    assert JSON_READER(text) == JSON_READER(text.rstrip())
    assert JSON_READER(text) is not None


def test_high_rank_shape_stays_on_the_fast_path() -> None:
    data = build({"x": tensor("U8", [1] * 40, 0, 1)}, 1)
    assert JSON_READER(text_of(data)) is not None
    assert read_header(data).tensors["x"].shape == (1,) * 40


def test_a_valid_layout_beyond_2_to_the_61_is_walked() -> None:
    # The fast check gives up past 2^61 bytes of data; the walk accepts the layout, and with
    # no file_size nothing else is checked.
    big = 2**61 - 1
    header = {"a": tensor("U8", [big], 0, big), "b": tensor("U8", [10], big, big + 10)}
    prefix = build(header)
    assert JSON_READER(text_of(prefix)) is None
    assert parse_header(prefix).data_size == big + 10


@pytest.mark.parametrize(
    ("levels", "expected"), [(127, None), (128, "InvalidHeaderDeserialization")]
)
def test_the_depth_count_before_the_json_readers(levels: int, expected: str | None) -> None:
    inner = levels - 2  # the outer object and the entry count too
    body = '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":[' + "[" * (inner - 1)
    body += '"[[[[{{{\\"]"' + "]" * (inner - 1) + "]}}"  # brackets in a string do not count
    data = build(body, 1)
    result = outcome(data)
    kind = result[0] if isinstance(result, tuple) else None
    assert kind == expected


@pytest.mark.parametrize(
    ("shape", "count"),
    [
        ((), 1),
        ((2, 3), 6),
        ((0, 2**64 - 1, 2**64 - 1), 0),  # a zero first: every product stays 0
        ((2**64 - 1,), 2**64 - 1),
        ((2**32, 2**32 - 1), 2**64 - 2**32),
        ((1,) * 1000, 1),
        ((2**32, 2**32), None),  # 2^64: one past u64
        ((2**32, 2**32, 0), None),  # overflows before the zero: the reference fails
        ((0, 2**64), None),  # a dim beyond u64 (a float to serde_json), hidden by the zero
        ((2**64 - 1,) * 40_000 + (0,), None),  # gives up at the second dim
        ((True,), None),  # JSON integers only
        ((1, "2"), None),
        ((-1,), None),
    ],
)
def test_element_counts_are_the_references_checked_product(
    shape: tuple[int, ...], count: int | None
) -> None:
    counts = columns.element_counts([(1,), shape])
    assert counts == (None if count is None else {(1,): 1, shape: count})
