"""safetensors_header.awkward against awkward's own ak.to_safetensors and ak.from_safetensors.

Every layout class awkward has, both ways: awkward's files read back equal here, and the files
written here are awkward's bytes and read back equal there. Laziness is measured on the
loopback HTTP server, which counts requests.
"""

from __future__ import annotations

import io
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from loopback import Site

from safetensors_header import DTYPE_BITS, HeaderError, read_header, write_file

ak = pytest.importorskip("awkward")
np = pytest.importorskip("numpy")
if not hasattr(ak, "to_safetensors"):
    pytest.skip("awkward before 2.8.10 has no ak.to_safetensors", allow_module_level=True)

from awkward.contents import (  # noqa: E402  (after the skip: needs awkward)
    BitMaskedArray,
    ByteMaskedArray,
    EmptyArray,
    IndexedArray,
    IndexedOptionArray,
    ListArray,
    ListOffsetArray,
    NumpyArray,
    RecordArray,
    RegularArray,
    UnionArray,
    UnmaskedArray,
)
from awkward.index import Index8, Index32, Index64, IndexU8, IndexU32  # noqa: E402

from safetensors_header.awkward import (  # noqa: E402
    DEFAULT_BUFFER_KEY,
    AwkwardFileError,
    from_safetensors,
    to_safetensors,
)

HAS_SAFETENSORS = True
try:
    import safetensors  # noqa: F401  (the reference: ak.to_safetensors and ak.from_safetensors need it)
except ImportError:  # pragma: no cover - it is in the test extra
    HAS_SAFETENSORS = False
needs_reference = pytest.mark.skipif(not HAS_SAFETENSORS, reason="needs the safetensors package")


# --- the layouts ---------------------------------------------------------------------------


def _i64(*values: int) -> Any:
    return Index64(np.array(values, dtype=np.int64))


def _layouts() -> dict[str, Any]:
    """One array of every layout class (and of the index and primitive dtypes), by name."""
    numbers = NumpyArray(np.arange(6, dtype=np.int64))
    floats = NumpyArray(np.array([0.5, 1.5, 2.5, 3.5, 4.5, 5.5]))
    strings = ak.Array(["one", "", "three", "ünïcödé"]).layout
    primitives = {
        f"numpy-{dtype}": NumpyArray(np.arange(5).astype(dtype))
        for dtype in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
    }
    primitives |= {
        f"numpy-{dtype}": NumpyArray(np.linspace(-2, 2, 5).astype(dtype))
        for dtype in ("float16", "float32", "float64")
    }
    return {
        **primitives,
        "numpy-bool": NumpyArray(np.array([True, False, True])),
        "numpy-complex64": NumpyArray(np.array([1 + 2j, 3 - 4j], dtype=np.complex64)),
        "numpy-2d": NumpyArray(np.arange(12.0).reshape(4, 3)),
        "numpy-3d": NumpyArray(np.arange(24, dtype=np.int32).reshape(2, 3, 4)),
        "numpy-parameters": NumpyArray(numbers.data, parameters={"__doc__": "six", "unit": "m"}),
        "regular": RegularArray(numbers, 3),
        "regular-size-0": RegularArray(NumpyArray(np.empty(0, np.int64)), 0, zeros_length=4),
        "list": ListArray(_i64(4, 0, 2), _i64(6, 2, 2), numbers),
        "list-offset": ListOffsetArray(_i64(0, 3, 3, 6), floats),
        "list-offset-int32": ListOffsetArray(Index32(np.array([0, 2, 6], np.int32)), floats),
        "list-offset-uint32": ListOffsetArray(IndexU32(np.array([0, 0, 4], np.uint32)), floats),
        "list-offset-not-from-0": ListOffsetArray(_i64(1, 3, 5), floats),
        "record": RecordArray([numbers, floats], ["x", "y"]),
        "tuple": RecordArray([numbers, floats], None),
        "record-no-fields": RecordArray([], [], length=3),
        "indexed": IndexedArray(_i64(5, 0, 0, 3), numbers),
        "indexed-option": IndexedOptionArray(_i64(2, -1, 0, -1), numbers),
        "indexed-option-int32": IndexedOptionArray(Index32(np.array([-1, 1], np.int32)), floats),
        "byte-masked": ByteMaskedArray(
            Index8(np.array([1, 0, 1, 1, 0, 1], np.int8)), numbers, True
        ),
        "byte-masked-valid-when-false": ByteMaskedArray(
            Index8(np.array([1, 0, 0, 0, 1, 0], np.int8)), numbers, valid_when=False
        ),
        "bit-masked-lsb": BitMaskedArray(
            IndexU8(np.packbits([1, 0, 1, 1, 0, 1, 1, 1, 0], bitorder="little")),
            NumpyArray(np.arange(9, dtype=np.int64)),
            valid_when=True,
            length=9,
            lsb_order=True,
        ),
        "bit-masked-msb-valid-when-false": BitMaskedArray(
            IndexU8(np.packbits([0, 1, 0, 0, 1, 0])), numbers, False, 6, lsb_order=False
        ),
        "unmasked": UnmaskedArray(numbers),
        "union": UnionArray(
            Index8(np.array([0, 1, 0, 1, 1], np.int8)), _i64(0, 0, 1, 2, 3), [numbers, strings]
        ),
        "union-int32-index": UnionArray(
            Index8(np.array([1, 0], np.int8)),
            Index32(np.array([0, 0], np.int32)),
            [numbers, floats],
        ),
        "string": strings,
        "bytestring": ak.Array([b"\x00\xff", b"", b"ab"]).layout,
        "strings-in-lists": ak.Array([["a", "bc"], [], ["d"]]).layout,
        "empty": EmptyArray(),
        "empty-list": ListOffsetArray(_i64(0), numbers),
        "empty-record": RecordArray([NumpyArray(np.empty(0, np.int64))], ["x"]),
        "nested-records": ak.Array(
            [
                {"a": [[1, 2], []], "b": {"c": "x", "d": None}},
                {"a": [], "b": {"c": "yz", "d": 2.5}},
                None,
            ]
        ).layout,
        "nested-union": ak.Array([[1, "two", [3.0]], [], [None, {"k": 1}]]).layout,
        "option-regular-lists": ak.to_regular(
            ak.Array([[[1, 2], None], [[], [3]], [None, None]]), axis=1, highlevel=False
        ),
    }


LAYOUTS = _layouts()
# Buffers that the reference writer refuses: only this module writes them.
OURS_ONLY = {
    "numpy-complex128": NumpyArray(np.array([1 + 2j, -3.5j, 0j])),
    "numpy-datetime64": NumpyArray(np.array(["2024-02-29T12:00", "1969-07-20"], "datetime64[s]")),
    "numpy-timedelta64": NumpyArray(np.array([1, -2, 3], dtype="timedelta64[ms]")),
    "complex128-in-records": ak.Array([{"z": [1j, 2 + 0j]}, {"z": []}]).layout,
}


def _assert_same(back: Any, original: Any) -> None:
    """The same values and the same type (parameters too)."""
    original = ak.Array(original)
    assert back.type == original.type
    assert back.to_list() == original.to_list()


def _children(form: Any) -> list[Any]:
    if hasattr(form, "contents"):  # records and unions
        return list(form.contents)
    content = getattr(form, "content", None)
    return [content] if isinstance(content, ak.forms.Form) else []


def _forms_written(layout: Any) -> set[str]:
    """The layout classes in the packed form of `layout` (what a file holds)."""
    found: set[str] = set()

    def visit(form: Any) -> None:
        found.add(type(form).__name__)
        for child in _children(form):
            visit(child)

    visit(ak.to_packed(layout, highlevel=False).form)
    return found


def test_the_cases_cover_every_layout_class() -> None:
    classes = set().union(*map(_forms_written, LAYOUTS.values()))
    # ListArray and IndexedArray never reach a file that ak.to_safetensors writes (packing
    # turns them into a ListOffsetArray and a NumpyArray): test_unpacked_buffers reads them.
    assert classes == {
        "BitMaskedForm",
        "ByteMaskedForm",
        "EmptyForm",
        "IndexedOptionForm",
        "ListOffsetForm",
        "NumpyForm",
        "RecordForm",
        "RegularForm",
        "UnionForm",
        "UnmaskedForm",
    }
    assert {type(layout).__name__ for layout in LAYOUTS.values()} >= {"ListArray", "IndexedArray"}


def _awkward_bytes(layout: Any, path: Path, **options: Any) -> bytes:
    """What ak.to_safetensors writes, with ``form`` as the first metadata key.

    The reference writes the metadata in a random order (a Rust HashMap, seeded anew for each
    map), and this module always writes ``form`` first: ask until awkward does too (each try
    has even odds; 64 misses in a row are a 2**-64 chance).
    """
    for _ in range(64):
        ak.to_safetensors(layout, str(path), **options)
        data = path.read_bytes()
        if data[8:].startswith(b'{"__metadata__":{"form":'):
            return data
    raise AssertionError("ak.to_safetensors never wrote form first")


# --- both ways, every layout ---------------------------------------------------------------


@needs_reference
@pytest.mark.parametrize("name", LAYOUTS)
def test_reads_what_awkward_writes(name: str, tmp_path: Path) -> None:
    layout = LAYOUTS[name]
    path = tmp_path / "a.safetensors"
    ak.to_safetensors(layout, str(path))
    theirs = ak.from_safetensors(str(path))
    for virtual in (False, True):
        back = from_safetensors(path, virtual=virtual)
        _assert_same(back, layout)
        assert back.layout.form == theirs.layout.form


@needs_reference
@pytest.mark.parametrize("name", LAYOUTS)
def test_writes_what_awkward_writes(name: str, tmp_path: Path) -> None:
    layout = LAYOUTS[name]
    ours = tmp_path / "ours.safetensors"
    header = to_safetensors(layout, ours)
    assert ours.read_bytes() == _awkward_bytes(layout, tmp_path / "theirs.safetensors")
    assert header == read_header(ours)
    _assert_same(ak.from_safetensors(str(ours)), layout)
    _assert_same(from_safetensors(ours), layout)


@needs_reference
@pytest.mark.parametrize("name", LAYOUTS)
def test_unpacked_buffers(name: str) -> None:
    """Buffers that ak.to_buffers gives for an unpacked layout (ListArray, IndexedArray, a
    content longer than the offsets need...), saved by the reference: read as awkward does."""
    import safetensors.numpy

    layout = LAYOUTS[name]
    form, length, buffers = ak.to_buffers(layout)
    data = safetensors.numpy.save(buffers, {"form": form.to_json(), "length": str(length)})
    back = from_safetensors(data)
    assert back.layout.form == form
    _assert_same(back, layout)
    _assert_same(from_safetensors(data, virtual=True), layout)


@pytest.mark.parametrize("name", OURS_ONLY)
def test_buffers_the_reference_refuses(name: str, tmp_path: Path) -> None:
    layout = OURS_ONLY[name]
    path = tmp_path / "a.safetensors"
    header = to_safetensors(layout, path)
    dtypes = {info.dtype for info in header.tensors.values()}
    assert dtypes & {"I64", "F64"}
    if "complex128" in name:
        [pairs] = [info for info in header.tensors.values() if info.dtype == "F64"]
        assert pairs.shape[-1] == 2  # [n, 2]: the real and imaginary parts
    _assert_same(from_safetensors(path), layout)
    _assert_same(from_safetensors(path, virtual=True), layout)
    if HAS_SAFETENSORS:
        _assert_same(ak.from_safetensors(str(path)), layout)  # awkward reads them too
        # If awkward learns to write these, this module should write what it writes.
        with pytest.raises(Exception, match="Unknown dtype"):
            ak.to_safetensors(layout, str(tmp_path / "theirs.safetensors"))


def test_long_doubles_are_refused(tmp_path: Path) -> None:
    if np.dtype(np.longdouble).itemsize != 16:
        pytest.skip("long double is float64 on this platform")
    with pytest.raises(TypeError, match="no safetensors dtype"):
        to_safetensors(ak.Array(np.ones(2, dtype=np.longdouble)), tmp_path / "a.safetensors")
    assert not (tmp_path / "a.safetensors").exists()


@needs_reference
def test_records_and_scalars_are_refused_as_awkward_does(tmp_path: Path) -> None:
    path = tmp_path / "a.safetensors"
    for value in (ak.Record({"x": 1}), 5):
        with pytest.raises(TypeError) as theirs:
            ak.to_safetensors(value, str(path))
        with pytest.raises(TypeError) as ours:
            to_safetensors(value, path)
        assert str(ours.value) == str(theirs.value)
    assert not path.exists()


# --- the buffer key ------------------------------------------------------------------------

KEYS = {
    "slash": "{form_key}/{attribute}",
    "prefixed": "events.{attribute}.{form_key}",
    "braces": "{{{form_key}}}-{attribute}",
    "form-key-second": "{attribute}:{form_key}",
    "form-key-only": "{form_key}",  # ARRAY's nodes have one buffer each
}
ARRAY = ak.Array(
    [
        {"pt": [1.5, 2.5], "name": "mu", "flag": True},
        {"pt": [], "name": None, "flag": False},
        {"pt": [0.5], "name": "e", "flag": True},
    ]
)


@needs_reference
@pytest.mark.parametrize("key", KEYS.values(), ids=KEYS)
def test_a_key_awkward_wrote_is_worked_out(key: str, tmp_path: Path) -> None:
    path = tmp_path / "a.safetensors"
    ak.to_safetensors(ARRAY, str(path), buffer_key=key)
    assert "buffer_key" not in (read_header(path).metadata or {})  # awkward records nothing
    _assert_same(from_safetensors(path), ARRAY)
    _assert_same(from_safetensors(path, virtual=True), ARRAY)
    _assert_same(from_safetensors(path, buffer_key=key), ARRAY)


@needs_reference
@pytest.mark.parametrize("key", KEYS.values(), ids=KEYS)
def test_a_key_written_here_is_recorded(key: str, tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours.safetensors", tmp_path / "theirs.safetensors"
    header = to_safetensors(ARRAY, ours, buffer_key=key)
    assert header.metadata is not None
    assert header.metadata["buffer_key"] == key
    _assert_same(from_safetensors(ours), ARRAY)
    _assert_same(ak.from_safetensors(str(ours), buffer_key=key), ARRAY)
    # The same tensors and bytes as awkward's file; only the metadata has one more key.
    ak.to_safetensors(ARRAY, str(theirs), buffer_key=key)
    reference = read_header(theirs)
    assert {**(reference.metadata or {}), "buffer_key": key} == dict(header.metadata)
    assert [(t.name, t.dtype, t.shape) for t in header.tensors.values()] == [
        (t.name, t.dtype, t.shape) for t in reference.tensors.values()
    ]
    assert ours.read_bytes()[header.data_start :] == theirs.read_bytes()[reference.data_start :]


def test_form_key_and_id_start(tmp_path: Path) -> None:
    path = tmp_path / "a.safetensors"
    header = to_safetensors(ARRAY, path, form_key="f{id}x", id_start=7)
    assert "f7x-offsets" not in header.tensors  # the record is f7x, its first field f8x
    assert "f8x-offsets" in header.tensors
    assert "buffer_key" not in (header.metadata or {})  # the form holds the keys
    _assert_same(from_safetensors(path), ARRAY)


def test_a_key_function(tmp_path: Path) -> None:
    def key(*, form_key: str, attribute: str, **_: Any) -> str:  # and form, layout
        return f"{attribute}@{form_key}"

    path = tmp_path / "a.safetensors"
    container: dict[str, Any] = {}
    header = to_safetensors(ARRAY, path, buffer_key=key, container=container)
    assert set(container) == set(header.tensors)
    assert "buffer_key" not in (header.metadata or {})  # a function cannot be recorded
    _assert_same(from_safetensors(path), ARRAY)  # worked out: "{attribute}@{form_key}"
    _assert_same(from_safetensors(path, buffer_key=key), ARRAY)


def test_a_given_key_is_used_as_given(tmp_path: Path) -> None:
    path = tmp_path / "a.safetensors"
    to_safetensors(ARRAY, path, buffer_key="{form_key}/{attribute}")
    with pytest.raises(AwkwardFileError, match=r"no tensor 'node1-offsets'.*buffer_key=") as info:
        from_safetensors(path, buffer_key=DEFAULT_BUFFER_KEY)
    assert info.value.buffer == "node1-offsets"
    with pytest.raises(ValueError, match=r"only \{form_key\} and \{attribute\}, not \{name\}"):
        from_safetensors(path, buffer_key="{name}")
    with pytest.raises(ValueError, match="not a format string"):
        from_safetensors(path, buffer_key="{form_key")


def _rewritten(path: Path, *, metadata: dict[str, str] | None = None, **renamed: str) -> Path:
    """A copy of the file with other metadata, tensors renamed (old=new) or dropped (old="")."""
    header = read_header(path)
    data = path.read_bytes()
    tensors = {
        renamed.get(info.name, info.name): (info.dtype, info.shape, data[info.start : info.end])
        for info in header.tensors.values()
        if renamed.get(info.name, info.name)
    }
    out = path.with_name(f"rewritten-{len(list(path.parent.iterdir()))}.safetensors")
    write_file(out, tensors, metadata=dict(header.metadata or {}) if metadata is None else metadata)
    return out


def test_two_templates_that_fit_are_an_error(tmp_path: Path) -> None:
    path = tmp_path / "a.safetensors"
    to_safetensors(ak.Array([1, 2, 3]), path, buffer_key="x-{form_key}-{attribute}")
    metadata = dict(read_header(path).metadata or {})
    del metadata["buffer_key"]
    # "node0-data-node0" and "x-node0-data" both fit one node's one buffer.
    extra = {"x-node0-data": "x-node0-data", "node0-data-node0": "node0-data-node0"}
    both = path.with_name("both.safetensors")
    write_file(both, {n: ("I64", (3,), np.arange(3)) for n in extra}, metadata=metadata)
    with pytest.raises(AwkwardFileError, match=r"fit \d+ buffer_key templates"):
        from_safetensors(both)
    assert from_safetensors(both, buffer_key="x-{form_key}-{attribute}").to_list() == [0, 1, 2]


# --- files that are not awkward's ----------------------------------------------------------


@pytest.fixture
def jagged(tmp_path: Path) -> Path:
    """ARRAY's file: node0 the record, node1/node2 pt, node3..node5 name, node6 flag."""
    path = tmp_path / "jagged.safetensors"
    to_safetensors(ARRAY, path)
    return path


def _metadata(path: Path, **changes: str | None) -> dict[str, str]:
    metadata = dict(read_header(path).metadata or {})
    for key, value in changes.items():
        if value is None:
            metadata.pop(key, None)
        else:
            metadata[key] = value
    return metadata


BAD_METADATA = {
    "no-metadata": (None, r"no 'form' and no 'length' \(it has none\)"),
    "no-length": ({"length": None}, r"has no 'length' \(its keys are 'form'\)"),
    "form-not-json": ({"form": "{"}, "the metadata's form is not an awkward form: JSONDecodeError"),
    "form-not-a-form": ({"form": '{"class": "Nope"}'}, "is not an awkward form"),
    "negative-length": ({"length": "-1"}, "length must be a non-negative integer, not '-1'"),
    "huge-length": ({"length": "9" * 5000}, "length must be a non-negative integer"),
    "bad-byteorder": ({"byteorder": "big"}, "byteorder must be '<' or '>', not 'big'"),
    "bad-recorded-key": ({"buffer_key": "{form_key}-{x}"}, r"recorded in the metadata.*not \{x\}"),
    "length-too-long": ({"length": "4"}, r"'node1-offsets' .* holds 4 int64 values, .* needs 5"),
}


@pytest.mark.parametrize(("changes", "words"), BAD_METADATA.values(), ids=BAD_METADATA)
def test_not_an_awkward_file(
    changes: dict[str, str | None] | None, words: str, jagged: Path, site: Site
) -> None:
    metadata = {} if changes is None else _metadata(jagged, **changes)
    path = _rewritten(jagged, metadata=metadata)
    with pytest.raises(AwkwardFileError, match=words):
        from_safetensors(path)
    # Found from the header alone: nothing else is read, even when lazy.
    site.files["m"] = path.read_bytes()
    for virtual in (False, True):
        with pytest.raises(AwkwardFileError, match=words):
            from_safetensors(site.url("m"), virtual=virtual)
    assert len(site.done(2)) == 2


BAD_BUFFERS = {
    "missing": ({"node2-data": ""}, r"no tensor 'node2-data', the data of the form's node 'node2'"),
    "renamed": ({"node4-offsets": "node4-offset"}, "no tensor 'node4-offsets'"),
}


@pytest.mark.parametrize(("renamed", "words"), BAD_BUFFERS.values(), ids=BAD_BUFFERS)
def test_a_missing_buffer(renamed: dict[str, str], words: str, jagged: Path) -> None:
    path = _rewritten(jagged, **renamed)
    for virtual in (False, True):
        with pytest.raises(AwkwardFileError, match=words) as info:
            from_safetensors(path, virtual=virtual)
        assert info.value.buffer == words.split("'")[1]


def _resized(path: Path, name: str, data: bytes, dtype: str = "U8") -> Path:
    """A copy of the file with tensor `name`'s bytes replaced, as a 1-d `dtype` tensor."""
    header = read_header(path)
    raw = path.read_bytes()
    tensors = {
        info.name: (info.dtype, info.shape, raw[info.start : info.end])
        for info in header.tensors.values()
    }
    tensors[name] = (dtype, (len(data) * 8 // DTYPE_BITS[dtype],), data)
    out = path.with_name(f"resized-{name}.safetensors")
    write_file(out, tensors, metadata=dict(header.metadata or {}))
    return out


def test_a_buffer_that_is_not_whole_values(jagged: Path) -> None:
    path = _resized(jagged, "node2-data", bytes(12))  # 1.5 float64 values
    for virtual in (False, True):
        with pytest.raises(AwkwardFileError, match="has 12 bytes, not a whole number of float64"):
            from_safetensors(path, virtual=virtual)


def test_a_buffer_shorter_than_its_length_needs(jagged: Path) -> None:
    """The offsets need length + 1 values: known from the header, even when lazy."""
    path = _resized(jagged, "node1-offsets", bytes(24))
    for virtual in (False, True):
        with pytest.raises(
            AwkwardFileError, match=r"'node1-offsets' .* holds 3 int64 values, but the form needs 4"
        ) as info:
            from_safetensors(path, virtual=virtual)
        assert info.value.buffer == "node1-offsets"


def test_a_buffer_shorter_than_its_offsets_need(jagged: Path) -> None:
    """pt's data needs as many values as its offsets say (3): known once they are read."""
    path = _resized(jagged, "node2-data", np.array([1.5, 2.5]).tobytes(), "F64")
    with pytest.raises(
        AwkwardFileError, match=r"'node2-data' .* holds 2 float64 values, but the form needs 3"
    ):
        from_safetensors(path)
    lazy = from_safetensors(path, virtual=True)  # the offsets are not read yet
    with pytest.raises(AwkwardFileError, match=r"offsets .* end at 3, past 2 values"):
        lazy.pt.to_list()  # checked when read, against what the header says pt's data holds


def test_longer_buffers_are_cut_as_awkward_cuts_them(jagged: Path) -> None:
    data = np.array([1.5, 2.5, 0.5, 99.0]).tobytes()
    path = _resized(jagged, "node2-data", data, "F64")
    _assert_same(from_safetensors(path), ARRAY)
    _assert_same(from_safetensors(path, virtual=True), ARRAY)


def test_an_empty_array_of_some_length(tmp_path: Path) -> None:
    path = tmp_path / "a.safetensors"
    to_safetensors(ak.Array([]), path)
    bad = _rewritten(path, metadata=_metadata(path, length="3"))
    with pytest.raises(AwkwardFileError, match="an EmptyArray, but the length is 3"):
        from_safetensors(bad)


def test_a_form_node_without_form_key(tmp_path: Path) -> None:
    path = tmp_path / "a.safetensors"
    write_file(
        path,
        {"None-data": ("I64", (2,), np.arange(2))},
        metadata={"form": '"int64"', "length": "2"},
    )
    with pytest.raises(AwkwardFileError, match="NumpyForm node has no form_key"):
        from_safetensors(path)


def test_not_safetensors_at_all() -> None:
    with pytest.raises(HeaderError) as info:
        from_safetensors(b"PK\x03\x04 a zip file, not safetensors")
    assert not isinstance(info.value, AwkwardFileError)


def test_tensors_the_form_does_not_name_are_not_read(jagged: Path, site: Site) -> None:
    header = read_header(jagged)
    raw = jagged.read_bytes()
    tensors = {
        info.name: (info.dtype, info.shape, raw[info.start : info.end])
        for info in header.tensors.values()
    }
    # BOOL tensors come last, by name: this one is at the very end of the file.
    tensors["zz-unrelated"] = ("BOOL", (2**20,), bytes(2**20))
    path = jagged.with_name("extra.safetensors")
    extra = write_file(path, tensors, metadata=dict(header.metadata or {}))
    assert list(extra.tensors)[-1] == "zz-unrelated"
    site.files["m"] = path.read_bytes()
    _assert_same(from_safetensors(site.url("m")), ARRAY)
    [_, hit] = site.done(2)
    assert hit.sent == sum(info.nbytes for info in header.tensors.values())


# --- laziness, measured --------------------------------------------------------------------


def _range(hit: Any) -> tuple[int, int]:
    first, last = hit.range.removeprefix("bytes=").split("-")
    return int(first), int(last) + 1


def _field_tensors(field: str, path: Path) -> set[tuple[int, int]]:
    """The byte ranges of the tensors of one field of a record array."""
    header = read_header(path)
    keys: set[str] = set()

    def visit(form: Any) -> None:
        keys.add(form.form_key)
        for child in _children(form):
            visit(child)

    visit(ak.forms.from_json((header.metadata or {})["form"]).content(field))  # with form keys
    return {
        (info.start, info.end)
        for name, info in header.tensors.items()
        if name.rsplit("-", 1)[0] in keys
    }


def test_virtual_reads_one_buffer_per_request_and_only_those_touched(
    jagged: Path, site: Site
) -> None:
    site.files["m"] = jagged.read_bytes()
    array = from_safetensors(site.url("m"), virtual=True)
    assert len(site.done(1)) == 1  # the header; no buffer
    assert str(array.type) == "3 * {pt: var * float64, name: ?string, flag: bool}"
    assert len(array) == 3
    pt = array.pt
    assert len(site.done(1)) == 1  # taking a field reads nothing either
    assert pt.to_list() == [[1.5, 2.5], [], [0.5]]
    hits = site.done(3)
    assert len(hits) == 3  # pt's offsets and data: one request each
    assert {_range(hit) for hit in hits[1:]} == _field_tensors("pt", jagged)
    assert sum(hit.sent for hit in hits[1:]) == 4 * 8 + 3 * 8
    assert array.pt.to_list() == pt.to_list()
    assert len(site.done(3)) == 3  # read once, then kept
    assert array.flag.to_list() == [True, False, True]
    [*_, flag] = site.done(4)
    assert {_range(flag)} == _field_tensors("flag", jagged)
    assert array.to_list() == ARRAY.to_list()
    assert len(site.done(7)) == 7  # the 6 buffers, each once, and the header


def test_eager_reads_every_buffer_in_one_request(jagged: Path, site: Site) -> None:
    site.files["m"] = jagged.read_bytes()
    _assert_same(from_safetensors(site.url("m")), ARRAY)
    hits = site.done(2)
    assert len(hits) == 2  # the header, then the data buffer in one range
    header = read_header(jagged)
    assert _range(hits[1]) == (header.data_start, header.file_size)


def test_header_given_is_not_read_again(jagged: Path, site: Site) -> None:
    site.files["m"] = jagged.read_bytes()
    header = read_header(site.url("m"))
    site.done(1)
    site.hits.clear()
    array = from_safetensors(site.url("m"), virtual=True, header=header)
    assert site.hits == []
    assert array.name.to_list() == ["mu", None, "e"]
    assert len(site.done(3)) == 3  # name's index, offsets and characters


def test_a_header_of_a_copy_elsewhere_is_held_to_its_bytes(jagged: Path, site: Site) -> None:
    """A header read from a local copy: the URL's header bytes are read once and compared
    (its validators are another file's) before the first read of data, then only what the
    array asks for."""
    site.files["m"] = jagged.read_bytes()
    array = from_safetensors(site.url("m"), virtual=True, header=read_header(jagged))
    assert site.hits == []
    assert array.name.to_list() == ["mu", None, "e"]
    assert len(site.done(4)) == 4
    assert site.hits[0].range == f"bytes=0-{read_header(jagged).data_start - 1}"


# --- sources and destinations --------------------------------------------------------------


class _Stream(io.RawIOBase):
    """A file object that cannot seek: a pipe."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._data.readinto(buffer)


def _local_sources(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return {
        "path": path,
        "str-path": str(path),
        "bytes": data,
        "bytearray": bytearray(data),
        "memoryview": memoryview(data),
        "file-object": io.BytesIO(data),
        "open-file": path.open("rb"),
    }


@pytest.mark.parametrize(
    "kind", ["path", "str-path", "bytes", "bytearray", "memoryview", "file-object", "open-file"]
)
def test_local_sources(kind: str, jagged: Path) -> None:
    for virtual in (False, True):
        source = _local_sources(jagged)[kind]
        _assert_same(from_safetensors(source, virtual=virtual), ARRAY)
        if hasattr(source, "close"):
            source.close()


def test_a_stream() -> None:
    buffer = io.BytesIO()
    to_safetensors(ARRAY, buffer)
    _assert_same(from_safetensors(_Stream(buffer.getvalue())), ARRAY)
    with pytest.raises(ValueError, match="virtual=True reads each buffer at its offset"):
        from_safetensors(_Stream(buffer.getvalue()), virtual=True)
    with pytest.raises(
        HeaderError, match="ended 2 bytes before the end of tensor 'node5-data'"
    ) as info:
        from_safetensors(_Stream(buffer.getvalue()[:-5]))
    assert info.value.kind == "MetadataIncompleteBuffer"


def test_a_pipe(jagged: Path) -> None:
    read, write = os.pipe()
    data = jagged.read_bytes()
    writer = threading.Thread(target=lambda: (os.write(write, data), os.close(write)))
    writer.start()
    try:
        with open(read, "rb") as pipe:
            _assert_same(from_safetensors(pipe), ARRAY)
    finally:
        writer.join()


def test_fsspec_memory_url_and_filesystem(jagged: Path, tmp_path: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    try:
        header = to_safetensors(ARRAY, "memory://ak/written.safetensors")
        assert memory.cat_file("/ak/written.safetensors") == jagged.read_bytes()
        assert header == read_header(jagged)
        to_safetensors(ARRAY, (memory, "/ak/pair.safetensors"))
        assert memory.cat_file("/ak/pair.safetensors") == jagged.read_bytes()
        for source in ("memory://ak/written.safetensors", (memory, "/ak/pair.safetensors")):
            for virtual in (False, True):
                _assert_same(from_safetensors(source, virtual=virtual), ARRAY)
    finally:
        memory.rm("/ak", recursive=True)


def test_obstore_memory_store(jagged: Path) -> None:
    store_module = pytest.importorskip("obstore.store")
    store = store_module.MemoryStore()
    header = to_safetensors(ARRAY, (store, "events.safetensors"))
    assert bytes(store.get("events.safetensors").bytes()) == jagged.read_bytes()
    assert header == read_header(jagged)
    for virtual in (False, True):
        _assert_same(from_safetensors((store, "events.safetensors"), virtual=virtual), ARRAY)


def test_other_destinations(jagged: Path, tmp_path: Path) -> None:
    buffer = io.BytesIO(b"prefix")
    buffer.seek(6)
    to_safetensors(ARRAY, buffer)
    assert buffer.getvalue() == b"prefix" + jagged.read_bytes()
    to_safetensors(ARRAY, str(tmp_path / "str.safetensors"))
    assert (tmp_path / "str.safetensors").read_bytes() == jagged.read_bytes()
    with pytest.raises(ValueError, match="HTTP has no standard way to write"):
        to_safetensors(ARRAY, "https://example.org/a.safetensors")
    with pytest.raises(TypeError, match="destination must be"):
        to_safetensors(ARRAY, 42)  # type: ignore[arg-type]


# --- the rest of awkward's keywords --------------------------------------------------------


@needs_reference
@pytest.mark.parametrize("function", ["from_safetensors", "to_safetensors"])
def test_awkward_keywords_and_defaults(function: str) -> None:
    import inspect

    import safetensors_header.awkward as module

    theirs = inspect.signature(getattr(ak, function)).parameters
    ours = inspect.signature(getattr(module, function)).parameters
    # None: "the file's own" (recorded, else awkward's default); "<": safetensors' order.
    changed = {"buffer_key": None, "byteorder": None} if function[0] == "f" else {"byteorder": "<"}
    for name, parameter in theirs.items():
        assert ours[name].kind == parameter.kind, name
        assert ours[name].default == changed.get(name, parameter.default), name
    assert list(ours)[: len(theirs)] == list(theirs)


def test_highlevel_behavior_attrs_and_backend(jagged: Path) -> None:
    layout = from_safetensors(jagged, highlevel=False)
    assert isinstance(layout, RecordArray)
    array = from_safetensors(jagged, attrs={"origin": "test"}, backend="cpu")
    assert array.attrs == {"origin": "test"}
    behavior = {"*": ak.Record}
    assert from_safetensors(jagged, behavior=behavior).behavior == behavior
    with pytest.raises(ValueError, match="byteorder must be"):
        from_safetensors(jagged, byteorder="=")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="byteorder must be"):
        to_safetensors(ARRAY, jagged, byteorder="=")  # type: ignore[arg-type]


@needs_reference
def test_big_endian_is_recorded(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours.safetensors", tmp_path / "theirs.safetensors"
    header = to_safetensors(ARRAY, ours, byteorder=">")
    ak.to_safetensors(ARRAY, str(theirs), byteorder=">")
    reference = read_header(theirs)
    assert ours.read_bytes()[header.data_start :] == theirs.read_bytes()[reference.data_start :]
    assert dict(header.metadata or {}) == {**(reference.metadata or {}), "byteorder": ">"}
    _assert_same(from_safetensors(ours), ARRAY)
    _assert_same(from_safetensors(ours, virtual=True), ARRAY)
    _assert_same(from_safetensors(theirs, byteorder=">"), ARRAY)
    try:  # awkward 2.8 cannot read its own big-endian files (it does not swap arrays)
        ak_reads_them = ak.from_safetensors(str(theirs), byteorder=">").to_list() == ARRAY.to_list()
    except TypeError:
        ak_reads_them = False
    if ak_reads_them:
        _assert_same(ak.from_safetensors(str(ours), byteorder=">"), ARRAY)


@needs_reference
def test_noncanonical_forms_as_awkward_reads_them(tmp_path: Path) -> None:
    """An option of an option: awkward refuses it, or simplifies it when allowed to."""
    import safetensors.numpy

    form = {
        "class": "IndexedOptionArray",
        "index": "i64",
        "form_key": "outer",
        "content": {
            "class": "IndexedOptionArray",
            "index": "i64",
            "form_key": "inner",
            "content": {"class": "NumpyArray", "primitive": "int64", "form_key": "data"},
        },
    }
    buffers = {
        "outer-index": np.array([0, -1, 1, 2]),
        "inner-index": np.array([1, -1, 0]),
        "data-data": np.array([10, 20]),
    }
    data = safetensors.numpy.save(buffers, {"form": json.dumps(form), "length": "4"})
    path = tmp_path / "a.safetensors"
    path.write_bytes(data)
    with pytest.raises(TypeError) as theirs:
        ak.from_safetensors(str(path))
    with pytest.raises(TypeError) as ours:
        from_safetensors(path)
    assert str(ours.value) == str(theirs.value)
    want = ak.from_safetensors(str(path), allow_noncanonical_form=True)
    back = from_safetensors(path, allow_noncanonical_form=True)
    assert back.to_list() == want.to_list() == [20, None, None, 10]
    assert back.layout.form == want.layout.form


def test_a_form_awkward_cannot_build_is_the_files_fault() -> None:
    """An option node with a string's parameters (found by fuzz/fuzz_awkward.py): awkward's
    own TypeError, which no allow_noncanonical_form lifts, is an AwkwardFileError, eagerly
    and lazily; nothing but that and HeaderError escapes a hostile file."""
    import safetensors.numpy

    form = {
        "class": "UnmaskedArray",
        "content": {
            "class": "NumpyArray",
            "primitive": "uint8",
            "parameters": {"__array__": "char"},
            "form_key": "node1",
        },
        "parameters": {"__array__": "string"},
        "form_key": "node0",
    }
    data = safetensors.numpy.save(
        {"node1-data": np.frombuffer(b"abcd", np.uint8)},
        {"form": json.dumps(form), "length": "4"},
    )
    for virtual in (False, True):
        for allow in (False, True):
            with pytest.raises(AwkwardFileError, match="awkward cannot build the array"):
                from_safetensors(data, virtual=virtual, allow_noncanonical_form=allow)
