"""The public surface: the values returned, their immutability, the error object."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import itertools
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import build, tensor

import safetensors_header
from safetensors_header import (
    DTYPE_BITS,
    KINDS,
    MAX_HEADER_SIZE,
    DtypeTotal,
    Header,
    HeaderError,
    TensorInfo,
    parse_header,
    read_header,
)

FILE = build(
    {
        "__metadata__": {"format": "pt"},
        "b": tensor("BF16", [2, 3], 0, 12),
        "a": tensor("F4", [4], 12, 14),
        "s": tensor("F64", [], 14, 22),
    },
    bytes(range(22)),
)


def test_public_names() -> None:
    assert set(safetensors_header.__all__) == {
        "DTYPES",
        "Dtype",
        "Source",
        "TensorTable",
        "Transport",
        "bytes_needed",
        "DTYPE_BITS",
        "Checkpoint",
        "DtypeTotal",
        "read_checkpoint",
        "encode_header",
        "update_metadata",
        "write_file",
        "FileIdentity",
        "KINDS",
        "MAX_HEADER_SIZE",
        "RemoteError",
        "Header",
        "HeaderError",
        "TensorInfo",
        "__version__",
        "parse_header",
        "read_header",
        "read_ranges",
        "read_tensor",
        "open_file",
        "SafetensorsFile",
        "hub_url",
        "install_as_safetensors",
    }
    assert len(safetensors_header.__all__) <= 30
    # What the submodules hold, each name once.
    held = {
        "plan": {"Parts", "PlannedTensor", "ReadPlan", "Split", "plan_rank", "plan_reads"}
        | {"split_tensors"},
        "integrity": {"FileCheck", "TensorHashes", "hash_tensors", "published_sha256"}
        | {"verify_files", "verify_tensors"},
        "model": {"Adapter", "DtypeParameters", "Evidence", "Inference", "ModelInfo"}
        | {"Quantization", "describe_model"},
        "audit": {"FINDING_KINDS", "Finding", "audit_header"},
    }
    for name, names in held.items():
        module = importlib.import_module(f"safetensors_header.{name}")
        assert set(module.__all__) == names
        for record in names:
            value = getattr(module, record)
            if isinstance(value, type):  # where pickles and help() find it
                assert value.__module__ == module.__name__


@pytest.mark.parametrize("name", ["hash_tensors", "ReadPlan", "describe_model", "Finding"])
def test_a_name_that_moved_is_found_at_the_top_for_now_with_a_warning(name: str) -> None:
    where = {"hash_tensors": "integrity", "ReadPlan": "plan"}.get(name)
    where = where or {"describe_model": "model", "Finding": "audit"}[name]
    with pytest.warns(DeprecationWarning, match=f"safetensors_header.{where}.{name}"):
        value = getattr(safetensors_header, name)
    assert value is getattr(importlib.import_module(f"safetensors_header.{where}"), name)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        safetensors_header.nothing  # noqa: B018
    assert MAX_HEADER_SIZE == 100_000_000


def test_import_pulls_in_no_optional_dependency() -> None:
    # The core and the stdlib-only consumer modules; numpy.py and virtualizarr.py are opt-in.
    code = (
        "import sys, safetensors_header, safetensors_header.zarr, "
        "safetensors_header._core.geometry; "
        "print(sorted(m for m in ('numpy', 'safetensors', 'zarr', 'fsspec', 'hypothesis', "
        "'virtualizarr', 'ml_dtypes', 'xarray', 'obstore', 'kerchunk') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_dtype_table_is_the_references() -> None:
    assert list(DTYPE_BITS) == [
        "BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
        "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32",
        "C64", "F64", "I64", "U64",
    ]  # fmt: skip
    assert DTYPE_BITS["F4"] == 4
    assert DTYPE_BITS["F6_E3M2"] == 6
    assert DTYPE_BITS["C64"] == 64
    with pytest.raises(TypeError):
        DTYPE_BITS["X"] = 1  # type: ignore[index]


def test_header_values() -> None:
    header = read_header(FILE)
    assert list(header.tensors) == ["b", "a", "s"]  # offset order
    b, a, s = header.tensors.values()
    assert header.header_size == len(FILE) - 8 - 22
    assert header.data_start == 8 + header.header_size
    assert header.data_size == 22
    assert header.file_size == len(FILE)
    assert b == TensorInfo("b", "BF16", (2, 3), header.data_start, header.data_start + 12,
                           header.data_start)  # fmt: skip
    assert b.data_offsets == (0, 12)
    assert a.data_offsets == (12, 14)
    assert (b.nbytes, b.numel) == (12, 6)
    assert (a.nbytes, a.numel) == (2, 4)  # F4: two values per byte
    assert (s.shape, s.nbytes, s.numel) == ((), 8, 1)
    assert FILE[a.start : a.end] == bytes([12, 13])


def test_values_are_immutable() -> None:
    header = read_header(FILE)
    info = header.tensors["a"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.start = 0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        header.metadata = None  # type: ignore[misc]
    with pytest.raises(TypeError):
        header.tensors["x"] = info  # type: ignore[index]
    with pytest.raises(TypeError):
        header.metadata["format"] = "np"  # type: ignore[index]
    assert isinstance(info.shape, tuple)


def test_shapes_are_shared_between_tensors() -> None:
    header = read_header(
        build({"a": tensor("U8", [2, 2], 0, 4), "b": tensor("U8", [2, 2], 4, 8)}, 8)
    )
    assert header.tensors["a"].shape is header.tensors["b"].shape


@pytest.mark.parametrize(
    "metadata", [None, {}, {"a": "b", "c": "d"}], ids=["absent", "empty", "two-keys"]
)
def test_metadata_absent_empty_and_present_stay_apart(metadata: dict[str, str] | None) -> None:
    body: dict[str, object] = {"t": tensor("U8", [1], 0, 1)}
    if metadata is not None:
        body["__metadata__"] = metadata
    header = read_header(build(body, 1))
    assert header.metadata == metadata
    assert (header.metadata is None) == (metadata is None)


def test_pickle_round_trip() -> None:
    header = read_header(FILE)
    again = pickle.loads(pickle.dumps(header))
    assert again == header
    assert isinstance(again, Header)
    assert pickle.loads(pickle.dumps(header.tensors["a"])) == header.tensors["a"]


def test_user_built_values() -> None:
    info = TensorInfo("w", "F32", (2,), 100, 108, 96)
    assert info.data_offsets == (4, 12)
    assert dataclasses.replace(info, name="v").name == "v"
    assert hash(info) == hash(TensorInfo("w", "F32", (2,), 100, 108, 96))


@pytest.mark.parametrize(
    "value",
    [
        TensorInfo("w", "F32", (2,), 100, 108, 96),
        DtypeTotal(2, 10, 40),
        read_header(FILE),
        safetensors_header.audit.Finding("Padding", "the header is padded with tabs"),
        safetensors_header.read_checkpoint(Path(__file__).parent / "data" / "tiny.safetensors"),
        safetensors_header.plan.Split(1, 4, axis=1),
        safetensors_header.plan.PlannedTensor("w", None, "F32", (2, 2), ((8, 8), (24, 8))),
        safetensors_header.integrity.TensorHashes("sha256", {"w": "0" * 64}, "1" * 64),
    ],
    ids=[
        "TensorInfo",
        "DtypeTotal",
        "Header",
        "Finding",
        "Checkpoint",
        "Split",
        "Planned",
        "Hashes",
    ],
)
def test_records_are_frozen_dataclasses(value: object) -> None:
    # Made without importing dataclasses (import cost); dataclasses sees them as its own.
    cls = type(value)
    assert dataclasses.is_dataclass(value)
    assert dataclasses.is_dataclass(cls)
    names = [field.name for field in dataclasses.fields(value)]  # type: ignore[arg-type]
    assert names == list(cls.__slots__) == list(cls.__match_args__)
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    values = tuple(getattr(value, name) for name in names)
    assert cls(*values) == value
    assert cls(**dict(zip(names, values, strict=True))) == value
    assert dataclasses.replace(value, **{names[0]: values[0]}) == value  # type: ignore[type-var]
    assert pickle.loads(pickle.dumps(value)) == value
    assert copy.copy(value) == value
    assert value != tuple(values)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, names[0], values[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(value, names[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.other = 1  # type: ignore[attr-defined]
    # Where users import it from: the top level, or the public submodule that holds it.
    assert cls.__module__ in {"safetensors_header", "safetensors_header.plan"} | {
        "safetensors_header.integrity",
        "safetensors_header.audit",
    }
    assert getattr(importlib.import_module(cls.__module__), cls.__name__) is cls
    if cls not in {
        Header,
        safetensors_header.Checkpoint,
        safetensors_header.integrity.TensorHashes,
    }:
        # (records of mappings: no as*() nor deepcopy, no hash)
        assert dataclasses.astuple(value) == values  # type: ignore[call-overload]
        assert dataclasses.asdict(value) == dict(zip(names, values, strict=True))  # type: ignore[call-overload]
        assert copy.deepcopy(value) == value
        assert hash(value) == hash(cls(*values))  # (a Header's mappings are not hashable)
    match value:
        case TensorInfo(name, dtype):
            assert (name, dtype) == ("w", "F32")
        case DtypeTotal(tensors, numel):
            assert (tensors, numel) == (2, 10)


def test_header_error_fields_and_pickle() -> None:
    with pytest.raises(HeaderError) as info:
        read_header(build({"a": tensor("F32", [2], 0, 4)}, 4))
    error = info.value
    assert isinstance(error, ValueError)
    assert error.kind == "TensorInvalidInfo"
    assert error.kind in KINDS
    assert error.tensor == "a"
    assert "need 8 bytes" in str(error)
    assert "span 4 bytes" in str(error)
    again = pickle.loads(pickle.dumps(error))
    assert (again.kind, again.tensor, str(again)) == (error.kind, error.tensor, str(error))


def test_prefix_protocol_fetch_what_is_needed() -> None:
    # A caller holding only the first bytes learns how many to fetch, then succeeds.
    with pytest.raises(HeaderError) as info:
        parse_header(FILE[:4], file_size=len(FILE))
    assert (info.value.kind, info.value.needed) == ("PrefixTooShort", 8)
    with pytest.raises(HeaderError) as info:
        parse_header(FILE[:8], file_size=len(FILE))
    assert info.value.kind == "PrefixTooShort"
    needed = info.value.needed
    assert needed == len(FILE) - 22
    header = parse_header(FILE[:needed], file_size=len(FILE))
    assert header == read_header(FILE)


def test_prefix_without_file_size_is_judged_as_a_whole_file() -> None:
    with pytest.raises(HeaderError) as info:
        parse_header(FILE[:3])
    assert (info.value.kind, info.value.needed) == ("HeaderTooSmall", 8)
    with pytest.raises(HeaderError) as info:
        parse_header(FILE[:20])
    assert (info.value.kind, info.value.needed) == ("InvalidHeaderLength", len(FILE) - 22)
    header = parse_header(FILE[: len(FILE) - 22])  # the header alone, no data
    assert header.file_size is None
    assert header.data_size == 22


def test_file_size_judges_the_file_not_the_prefix() -> None:
    with pytest.raises(HeaderError) as info:
        parse_header(FILE, file_size=5)
    assert (info.value.kind, info.value.needed) == ("HeaderTooSmall", None)
    with pytest.raises(HeaderError) as info:
        parse_header(FILE[:8], file_size=30)
    assert (info.value.kind, info.value.needed) == ("InvalidHeaderLength", None)


@pytest.mark.parametrize("limit", [0, 8, 10**9], ids=["zero", "small", "raised"])
def test_max_header_size(limit: int) -> None:
    header_size = len(FILE) - 8 - 22
    if header_size > limit:
        with pytest.raises(HeaderError, match="max_header_size") as info:
            read_header(FILE, max_header_size=limit)
        assert info.value.kind == "HeaderTooLarge"
    else:
        assert read_header(FILE, max_header_size=limit).header_size == header_size


def test_header_above_the_reference_limit_with_the_limit_raised() -> None:
    body = b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'
    data = build(body + b" " * (MAX_HEADER_SIZE + 8 - len(body)), 1)
    with pytest.raises(HeaderError) as info:
        read_header(data)
    assert info.value.kind == "HeaderTooLarge"
    assert read_header(data, max_header_size=MAX_HEADER_SIZE + 8).tensors["a"].nbytes == 1


def test_a_checkpoints_open_shards_are_not_compared() -> None:
    path = Path(__file__).parent / "data" / "tiny.safetensors"
    one, two = safetensors_header.read_checkpoint(path), safetensors_header.read_checkpoint(path)
    assert one.shards != two.shards  # two openings of the file
    assert one == two
    assert dataclasses.replace(one, shards={}) == one  # type: ignore[type-var]
    compared = {field.name: field.compare for field in dataclasses.fields(one)}  # type: ignore[arg-type]
    assert compared == dict.fromkeys(compared, True) | {"shards": False}
    assert safetensors_header.audit.Finding("A", "b").tensor is None
    assert dataclasses.fields(safetensors_header.audit.Finding)[2].default is None


def test_lazy_names_load_on_first_use() -> None:
    from safetensors_header import _writer

    assert safetensors_header.write_file is _writer.write_file
    assert {"write_file", "read_checkpoint"} <= set(dir(safetensors_header))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        safetensors_header.nope  # noqa: B018


def test_file_size_and_buffer_checks() -> None:
    with pytest.raises(ValueError, match="file_size must be 0 or more"):
        parse_header(FILE, file_size=-5)
    with pytest.raises(TypeError):
        parse_header(FILE, file_size=10.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="C-contiguous"):
        parse_header(memoryview(FILE)[::2])


def test_adapters_are_submodules_imported_only_when_used() -> None:
    code = (
        "import json, sys, safetensors_header; "
        "print(json.dumps([m for m in sys.modules if m.startswith('safetensors_header.')]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert loaded.isdisjoint(
        {
            "safetensors_header.zarr",
            "safetensors_header.numpy",
            "safetensors_header.virtualizarr",
            "safetensors_header._audit",
            "safetensors_header._checkpoint",
            "safetensors_header._writer",
            "safetensors_header._encode",
            "safetensors_header._replace",
        }
    )
    assert "safetensors_header._core.parse" in loaded  # the scan saw the package's modules
    for moved in ("to_kerchunk", "to_zarr_v3", "zarr_node_name", "FINDING_CODES"):
        assert not hasattr(safetensors_header, moved)


def _checkpoint_with_a_problem(folder: Path) -> safetensors_header.Checkpoint:
    from test_checkpoint import write

    return safetensors_header.read_checkpoint(write(folder, metadata={"total_size": 1}))


def test_lazy_classes_say_they_are_top_level_and_pickle(tmp_path: Path) -> None:
    from safetensors_header import Checkpoint, DtypeTotal
    from safetensors_header.audit import Finding

    assert {cls.__module__ for cls in (Checkpoint, DtypeTotal)} == {"safetensors_header"}
    assert Finding.__module__ == "safetensors_header.audit"
    sharded = _checkpoint_with_a_problem(tmp_path)
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "model.safetensors").write_bytes(FILE)
    single = safetensors_header.read_checkpoint(tmp_path / "one")
    values = (sharded, single, *sharded.problems, *sharded.by_dtype().values())
    for value, protocol in itertools.product(values, range(2, pickle.HIGHEST_PROTOCOL + 1)):
        again = pickle.loads(pickle.dumps(value, protocol))
        assert type(again) is type(value)
        assert again == value
    copy: Checkpoint = pickle.loads(pickle.dumps(sharded))
    assert copy.problems[0].kind == "TotalSize"
    with pytest.raises(TypeError):
        copy.tensors["x"] = copy.tensors["head"]  # type: ignore[index]
    with pytest.raises(TypeError):
        copy.files["x"] = copy.files["model-00001-of-00002.safetensors"]  # type: ignore[index]


def test_reprs_are_compact(tmp_path: Path) -> None:
    from safetensors_header import DtypeTotal
    from safetensors_header.audit import Finding

    sharded = _checkpoint_with_a_problem(tmp_path)
    assert repr(sharded) == "<Checkpoint 2 files, 4 tensors, 1 problem>"
    assert repr(sharded.by_dtype()["BF16"]) == "<DtypeTotal 2 tensors, numel=8, nbytes=16>"
    assert repr(DtypeTotal(1, 2_000_000, 4_000_000)) == (
        "<DtypeTotal 1 tensor, numel=2,000,000, nbytes=4,000,000>"
    )
    assert repr(Finding("Padding", "short")) == "<Finding Padding: short>"
    long = repr(Finding("DuplicateTensor", "x" * 10_000, "x" * 10_000))
    assert long.startswith("<Finding DuplicateTensor: xxx")
    assert long.endswith("...>")
    assert len(long) < 120
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "model.safetensors").write_bytes(FILE)
    single = safetensors_header.read_checkpoint(tmp_path / "one")
    assert repr(single) == "<Checkpoint 1 file, 3 tensors>"
    assert repr(read_header(FILE)).startswith("<Header 3 tensors, header_size=")


def test_help_shows_no_private_path() -> None:
    import pydoc
    import re

    text = pydoc.render_doc(safetensors_header, renderer=pydoc.plaintext)  # type: ignore[attr-defined]
    contents = text.split("PACKAGE CONTENTS", 1)[1].split("CLASSES", 1)
    # pydoc lists every module of a package; below that list, nothing private is named
    # (but dataclasses' own _DataclassParams, as for any dataclass).
    private = set(re.findall(r"safetensors_header\._\w+|(?<![\w.])_[A-Za-z]\w*", contents[1]))
    assert private <= {"_DataclassParams"}


def _readers() -> dict[str, object]:
    """Every public function that reaches a source, by the name its errors use."""
    from safetensors_header import numpy as st_numpy

    found: dict[str, object] = {
        "read_header": safetensors_header.read_header,
        "open_file": safetensors_header.open_file,
        "read_ranges": safetensors_header.read_ranges,
        "read_tensor": safetensors_header.read_tensor,
        "read_checkpoint": safetensors_header.read_checkpoint,
        "load": st_numpy.load,
        "open_tensors": st_numpy.open_tensors,
        "load_rank": st_numpy.load_rank,
        "plan_reads": safetensors_header.plan.plan_reads,
        "hash_tensors": safetensors_header.integrity.hash_tensors,
        "verify_tensors": safetensors_header.integrity.verify_tensors,
    }
    try:
        from safetensors_header import awkward as st_awkward
    except ImportError:
        pass
    else:
        found["from_safetensors"] = st_awkward.from_safetensors
    return found


def test_every_reader_takes_the_transport_keywords_and_only_those(tmp_path: Path) -> None:
    import inspect
    import typing

    from safetensors_header._sources.options import TRANSPORT

    pytest.importorskip("numpy")
    # The TypedDict, the set the functions check against and the record are one list.
    assert set(typing.get_type_hints(safetensors_header.Transport)) == set(TRANSPORT)
    assert set(safetensors_header.Transport.__optional_keys__) == set(TRANSPORT)
    path = tmp_path / "model.safetensors"
    path.write_bytes(build({"w": tensor("U8", [4], 0, 4)}, data=bytes(4)))
    calls = {
        "read_header": lambda f, **kw: f(path, **kw),
        "open_file": lambda f, **kw: f(path, **kw),
        "read_ranges": lambda f, **kw: f(path, [(8, 1)], **kw),
        "read_tensor": lambda f, **kw: f(path, "w", **kw),
        "read_checkpoint": lambda f, **kw: f(path, **kw),
        "load": lambda f, **kw: f(path, **kw),
        "open_tensors": lambda f, **kw: f(path, **kw),
        "load_rank": lambda f, **kw: f(path, 0, 2, axes={"w": None}, **kw),
        "plan_reads": lambda f, **kw: f(path, **kw),
        "hash_tensors": lambda f, **kw: f(path, **kw),
        "verify_tensors": lambda f, **kw: f(
            path, safetensors_header.integrity.hash_tensors(path), **kw
        ),
        "from_safetensors": None,  # an awkward file is needed: its names are checked below
    }
    for name, function in _readers().items():
        parameters = inspect.signature(function).parameters  # type: ignore[arg-type]
        # `Transport`'s keywords (with plan_rank's, for a loader's load_rank: `RankOptions`).
        keywords = [p for p in parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
        assert [p.name for p in keywords] in (["transport"], ["options"]), name
        # No option spelled out beside them (but awkward's own storage_options, in its place).
        spelled = {"storage_options"} if name == "from_safetensors" else set()
        assert set(parameters) & TRANSPORT == spelled, name
        call = calls[name]
        if call is None:
            continue
        # Every option accepted, on a local file too (where it is not used)...
        every = {
            "headers": {"X-Test": "1"},
            "timeout": 5.0,
            "retries": 0,
            "first_read": 64,
            "storage_options": {},
            "max_workers": 2,
            "part_size": 1 << 20,
            "keep_alive": False,
        }
        assert set(every) == set(TRANSPORT)
        call(function, **every)
        # ... and a misspelt one refused, in Python's own words, before anything is read.
        with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument"):
            call(function, time_out=5.0)
        with pytest.raises(ValueError, match="retries must be at least 0"):
            call(function, retries=-1)
