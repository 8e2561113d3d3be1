"""safetensors_header.torch, compared with safetensors.torch (load_file, load, get_slice, save)."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import build, tensor
from loopback import Site

torch = pytest.importorskip("torch")
reference = pytest.importorskip("safetensors.torch")
import safetensors  # noqa: E402

from safetensors_header import DTYPES, HeaderError, open_file, read_checkpoint, read_header  # noqa: E402
from safetensors_header.plan import plan_reads  # noqa: E402
from safetensors_header.torch import (  # noqa: E402
    LazyTensor,
    Tensors,
    load,
    load_plan,
    load_rank,
    open_tensors,
    safetensors_dtype,
    save,
    save_file,
    torch_dtype,
)

# Every dtype torch has a safetensors name for; the float8 types and F4 from random bytes.
FLOATS_FROM_BYTES = {
    "F8_E5M2": torch.float8_e5m2,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E8M0": torch.float8_e8m0fnu,
    "F8_E4M3FNUZ": torch.float8_e4m3fnuz,
    "F8_E5M2FNUZ": torch.float8_e5m2fnuz,
    "F4": torch.float4_e2m1fn_x2,
}


def _every_dtype() -> dict[str, Any]:
    generator = torch.Generator().manual_seed(41)

    def bits(shape: tuple[int, ...], dtype: Any) -> Any:
        size = torch.empty(shape, dtype=dtype).element_size()
        count = size * torch.Size(shape).numel()
        raw = torch.randint(0, 256, (count,), dtype=torch.uint8, generator=generator)
        return raw.view(dtype).reshape(shape)  # every bit pattern: NaNs, subnormals...

    tensors = {
        "bool": torch.rand((2, 3), generator=generator) > 0.5,
        "u8": bits((4,), torch.uint8),
        "i8": bits((4,), torch.int8),
        "i16": bits((2, 2), torch.int16),
        "u16": bits((3,), torch.uint16),
        "f16": bits((3, 1), torch.float16),
        "bf16": bits((2, 5), torch.bfloat16),
        "i32": bits((5,), torch.int32),
        "u32": bits((2,), torch.uint32),
        "f32": bits((2, 3, 2), torch.float32),
        "c64": bits((2,), torch.complex64),
        "f64": bits((3,), torch.float64),
        "i64": bits((2,), torch.int64),
        "u64": bits((1,), torch.uint64),
        "scalar": torch.tensor(-1.5, dtype=torch.float64),
        "empty": torch.zeros((2, 0), dtype=torch.int16),
        "empty-bf16": torch.zeros((0,), dtype=torch.bfloat16),
        "a/b.c": torch.arange(3, dtype=torch.int8),
    }
    for name, dtype in FLOATS_FROM_BYTES.items():
        tensors[name.lower()] = bits((3, 2), dtype)
    return tensors


EVERY = _every_dtype()


def _bits(value: Any) -> bytes:
    """A tensor's bytes, exactly (NaNs compared bit for bit)."""
    if value.element_size() == 1:  # (torch copies no float8 or float4 tensor)
        value = value.view(torch.uint8)
    return bytes(value.contiguous().reshape(-1).view(torch.uint8).tolist())


def assert_same(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    assert sorted(actual) == sorted(expected)
    for name, want in expected.items():
        got = actual[name]
        assert type(got) is torch.Tensor, name
        assert (got.dtype, got.shape, got.device) == (want.dtype, want.shape, want.device), name
        assert _bits(got) == _bits(want), name


@pytest.fixture(scope="module")
def every(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file the reference wrote, with every dtype torch has, a scalar and empty tensors."""
    path = tmp_path_factory.mktemp("torch") / "every.safetensors"
    reference.save_file(EVERY, str(path), metadata={"format": "pt"})
    return path


def test_every_dtype_of_the_format_but_f6_has_a_torch_dtype() -> None:
    # The reference's reader gives torch each of them; F6 it refuses ("Dtype not understood").
    assert {safetensors_dtype(value) for value in EVERY.values()} == set(DTYPES) - {
        "F6_E2M3",
        "F6_E3M2",
    }
    for name in DTYPES:
        if name.startswith("F6_"):
            with pytest.raises(TypeError, match=f"dtype {name} packs 6-bit values"):
                torch_dtype(name)
        else:
            assert safetensors_dtype(torch_dtype(name)) == name
    with pytest.raises(TypeError, match="unknown safetensors dtype 'F128'"):
        torch_dtype("F128")
    with pytest.raises(TypeError, match=r"no safetensors dtype for torch\.complex128"):
        safetensors_dtype(torch.complex128)


# --- load, from every kind of source ---------------------------------------------------------


SOURCES: dict[str, Callable[[Path], Any]] = {
    "path": lambda path: path,
    "str": str,
    "read": lambda path: (str(path), {"mmap": False}),
    "bytes": lambda path: path.read_bytes(),
    "bytearray": lambda path: bytearray(path.read_bytes()),
    "file-object": lambda path: io.BytesIO(path.read_bytes()),
    "opened": open_file,
}


@pytest.mark.parametrize("kind", list(SOURCES))
def test_load_equals_the_references_load_file(every: Path, kind: str) -> None:
    source = SOURCES[kind](every)
    options: dict[str, Any] = {}
    if isinstance(source, tuple):
        source, options = source
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns of a read-only buffer: none here
        tensors = load(source, **options)
    assert_same(tensors, reference.load_file(every))
    assert list(tensors) == list(read_header(every).tensors)  # the file's order


def test_load_of_bytes_equals_the_references_load() -> None:
    # The reference's load(bytes) knows no F8_E8M0 nor F4 (its load_file does): the others.
    tensors = {name: value for name, value in EVERY.items() if name not in ("f8_e8m0", "f4")}
    data = reference.save(tensors)
    assert_same(load(data), reference.load(data))
    with pytest.raises(KeyError, match=r"F8_E8M0|F4"):  # (the one it meets first)
        reference.load(reference.save(EVERY))
    assert_same(load(reference.save(EVERY)), EVERY)


@pytest.mark.parametrize("mmap", [None, False])
def test_tensors_are_writable_and_the_file_is_not_changed(every: Path, mmap: bool | None) -> None:
    before = every.read_bytes()
    tensors = load(every, mmap=mmap)
    tensors["f32"].fill_(7.0)
    tensors["bool"][0, 0] = not tensors["bool"][0, 0]
    assert (tensors["f32"] == 7.0).all()
    assert every.read_bytes() == before  # a copy-on-write map: the file as it was
    assert _bits(load(every)["f32"]) == _bits(EVERY["f32"])


def test_a_buffer_source_is_copied_once_never_changed(every: Path) -> None:
    for data in (every.read_bytes(), bytearray(every.read_bytes())):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # torch warns of a read-only buffer: none here
            tensors = load(data)
        tensors["u8"].fill_(0)
        assert data == every.read_bytes()


def _write_to(target: Path | int, data: bytes) -> threading.Thread:
    """A thread writing `data` to a FIFO's path or a pipe's descriptor (then closing it)."""

    def write() -> None:
        try:
            if isinstance(target, int):
                with os.fdopen(target, "wb") as pipe:
                    pipe.write(data)
            else:
                target.write_bytes(data)
        except BrokenPipeError:
            pass  # the reader stopped reading: what the FIFO's case expects

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_pipes_are_never_mapped(every: Path, tmp_path: Path) -> None:
    # A pipe's file object, and a FIFO's path, are read in order, from the one descriptor
    # opened: neither is mapped. (A writer is always there, so that no open waits.)
    data = every.read_bytes()
    read, write = os.pipe()
    writer = _write_to(write, data)
    with os.fdopen(read, "rb", buffering=0) as stream:
        assert_same(load(stream), EVERY)
    writer.join(timeout=60)
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    writer = _write_to(fifo, data)
    assert_same(load(fifo), EVERY)
    writer.join(timeout=60)
    assert not writer.is_alive()


def test_names_in_their_order_and_missing_ones(every: Path) -> None:
    tensors = load(every, names=["f16", "bf16"])
    assert list(tensors) == ["f16", "bf16"]
    with pytest.raises(KeyError, match="no tensor 'nope' in the file"):
        load(every, names=["f16", "nope"])
    with pytest.raises(TypeError, match="not a str"):
        load(every, names="f16")


def test_zero_size_and_0_d_tensors(tmp_path: Path) -> None:
    tensors = {
        "scalar": torch.tensor(3, dtype=torch.int32),
        "nothing": torch.zeros((0, 4), dtype=torch.float32),
        "bf16-scalar": torch.tensor(0.5, dtype=torch.bfloat16),
        "f8-empty": torch.zeros((3, 0, 2), dtype=torch.float8_e4m3fn),
    }
    path = tmp_path / "edges.safetensors"
    reference.save_file(tensors, str(path))
    for mmap in (None, False):
        loaded = load(path, mmap=mmap)
        assert_same(loaded, reference.load_file(path))
        assert loaded["scalar"].item() == 3
        loaded["nothing"].resize_(0, 4)  # a tensor of its own, as torch.empty made it
    lazy = open_tensors(path)
    assert lazy["scalar"][()].shape == ()
    assert lazy["nothing"][:, 1:3].shape == (0, 2)
    assert len(lazy["nothing"]) == 0
    with pytest.raises(TypeError, match="0-d"):
        len(lazy["scalar"])


def test_f6_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    data = build(
        {"six": tensor("F6_E2M3", [4], 0, 3), "f32": tensor("F32", [1], 3, 7)},
        bytes(range(7)),
    )
    path = tmp_path / "f6.safetensors"
    path.write_bytes(data)
    with pytest.raises(safetensors.SafetensorError, match="Dtype not understood"):
        reference.load_file(path)
    for source in (path, data):
        with pytest.raises(TypeError, match=r"F6_E2M3 packs 6-bit values.*names="):
            load(source)
        assert load(source, names=["f32"])["f32"].dtype == torch.float32
    with pytest.raises(TypeError, match="6-bit"):
        open_tensors(path)["six"][...]


def test_f4_with_an_odd_last_dimension_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f4.safetensors"
    path.write_bytes(build({"f4": tensor("F4", [2, 3], 0, 3)}, bytes(3), pad=True))
    with pytest.raises(safetensors.SafetensorError, match="divisible by 2"):
        reference.load_file(path)
    with pytest.raises(TypeError, match=r"float4_e2m1fn_x2.*even; its shape is \[2, 3\]"):
        load(path)


def test_an_invalid_file_is_a_header_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(build({"t": tensor("F32", [2], 0, 8)}, bytes(4)))  # 4 bytes short
    for mmap in (None, False):
        with pytest.raises(HeaderError) as caught:
            load(path, mmap=mmap)
        assert caught.value.kind == "MetadataIncompleteBuffer"
    empty = tmp_path / "empty.safetensors"
    empty.write_bytes(b"")
    with pytest.raises(HeaderError) as caught:
        load(empty)
    assert caught.value.kind == "HeaderTooSmall"
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "missing.safetensors")


@pytest.mark.parametrize("mmap", [None, False])
def test_a_header_given_is_of_this_very_file(tmp_path: Path, mmap: bool | None) -> None:
    path = tmp_path / "m.safetensors"
    reference.save_file({"a": torch.ones(3)}, str(path))
    header = read_header(path)
    assert torch.equal(load(path, header=header, mmap=mmap)["a"], torch.ones(3))
    assert torch.equal(open_tensors(path, header=header)["a"][1:], torch.ones(2))
    reference.save_file({"a": torch.zeros(4)}, str(path))  # replaced since
    with pytest.raises(HeaderError) as caught:
        load(path, header=header, mmap=mmap)
    assert caught.value.kind == "FileChanged"


def test_a_mapped_load_places_tensors_by_the_header_given_of_the_file_it_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is replaced (another header, the same size) between the header's check and
    the map: the map is of the descriptor that was checked, so the load is FileChanged, never
    the new file's tensors under its own header."""
    import os

    import safetensors_header._fetch as data_path

    path = tmp_path / "m.safetensors"
    reference.save_file({"a": torch.ones(4)}, str(path))
    header = read_header(path)
    reference.save_file({"b": torch.zeros(4)}, str(tmp_path / "new.safetensors"))
    assert (tmp_path / "new.safetensors").stat().st_size == path.stat().st_size
    checked = data_path.map_whole

    def swapped_after(*args: object, **kwargs: object) -> object:
        found = checked(*args, **kwargs)  # type: ignore[arg-type]
        os.replace(tmp_path / "new.safetensors", path)  # too late: mapped already
        return found

    monkeypatch.setattr(data_path, "map_whole", swapped_after)
    assert list(load(path, header=header)) == ["a"]  # the file checked, by the header given
    with pytest.raises(HeaderError) as caught:
        load(path, header=header)  # the new file now: not the one the header came from
    assert caught.value.kind == "FileChanged"


def test_an_unknown_keyword_is_a_type_error(every: Path) -> None:
    with pytest.raises(
        TypeError, match="load_rank\\(\\) got an unexpected keyword argument 'tries'"
    ):
        load_rank(every, 0, 2, tries=3)  # type: ignore[call-arg]
    for source in (every, every.read_bytes(), open_file(every)):
        with pytest.raises(
            TypeError, match="load\\(\\) got an unexpected keyword argument 'timout'"
        ):
            load(source, timout=3)  # type: ignore[call-arg]


# --- into= and device= -------------------------------------------------------------------------


def test_into_reads_straight_into_the_given_tensors(every: Path) -> None:
    want = reference.load_file(every)
    targets = {name: torch.empty_like(want[name]) for name in ("f32", "bf16", "f8_e4m3", "empty")}
    loaded = load(every, into=targets)
    assert list(loaded) == list(targets)
    assert all(loaded[name] is targets[name] for name in targets)  # the very tensors
    assert_same(loaded, {name: want[name] for name in targets})
    # With names: those of into, and others, read into new tensors; from bytes, over a copy.
    targets = {"u16": torch.empty_like(want["u16"])}
    loaded = load(every.read_bytes(), names=["c64", "u16"], into=targets)
    assert loaded["u16"] is targets["u16"]
    assert_same(loaded, {name: want[name] for name in ("c64", "u16")})


def test_into_refuses_what_cannot_take_the_bytes(every: Path) -> None:
    cases: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"f32": torch.empty(2, 3, 2)[:, ::2]}, ValueError, "shape"),
        ({"f32": torch.empty(12)}, ValueError, r"shape \[12\]; the file's is torch.float32"),
        ({"f32": torch.empty(2, 3, 2, dtype=torch.float64)}, ValueError, "float64"),
        ({"f32": torch.empty(2, 2, 3).transpose(1, 2)}, ValueError, "not contiguous"),
        ({"f32": torch.empty(2, 3, 2, device="meta")}, ValueError, "CPU memory"),
        ({"f32": bytearray(48)}, TypeError, "bytearray, not a tensor"),
        ({"nope": torch.empty(1)}, KeyError, "nope"),
    ]
    for into, error, match in cases:
        with pytest.raises(error, match=match):
            load(every, into=into)
    with pytest.raises(ValueError, match=r"into names tensors that names leaves out: \['u8'\]"):
        load(every, names=["f32"], into={"u8": torch.empty(4, dtype=torch.uint8)})


def test_device_moves_every_tensor(every: Path) -> None:
    # The meta device is in every torch build: the move, without a GPU.
    moved = load(every, device="meta")
    want = reference.load_file(every)
    for name, value in want.items():
        assert moved[name].device.type == "meta"
        assert (moved[name].dtype, moved[name].shape) == (value.dtype, value.shape)
    rows = open_tensors(every, device=torch.device("meta"))["f32"][1:]
    assert (rows.device.type, rows.shape) == ("meta", (1, 3, 2))
    with pytest.raises(RuntimeError):
        load(every, device="no-such-device")


# --- slices ----------------------------------------------------------------------------------

# The reference's get_slice takes ints, slices with positive steps, ... and None.
KEYS = {
    "rows": (slice(1, 3),),
    "one-row": 2,
    "columns": (slice(None), slice(2, 5)),
    "strided": (slice(None, None, 2), slice(1, None, 3)),
    "element": (1, 4),
    "ellipsis": (Ellipsis, 0),
    "everything": (Ellipsis,),
    "empty": (slice(3, 1),),
    "negative-int": (-1, slice(-3, None)),
}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("slices") / "m.safetensors"
    tensors = {
        "w": torch.arange(5 * 7, dtype=torch.float32).reshape(5, 7),
        "b": torch.arange(5 * 6, dtype=torch.int16).reshape(5, 6).to(torch.bfloat16),
        "f4": torch.arange(5 * 6, dtype=torch.uint8).reshape(5, 6).view(torch.float4_e2m1fn_x2),
        "e8": torch.arange(5 * 7, dtype=torch.uint8).reshape(5, 7).view(torch.float8_e8m0fnu),
    }
    reference.save_file(tensors, str(path))
    return path


@pytest.mark.parametrize("name", ["w", "b", "f4", "e8"])
@pytest.mark.parametrize("key", list(KEYS))
def test_slices_equal_the_references_get_slice(matrix: Path, name: str, key: str) -> None:
    with safetensors.safe_open(str(matrix), framework="pt") as file:
        whole = file.get_tensor(name)
        # The reference cannot slice F4 ("shape '[5, 12]' is invalid"): its whole tensor's.
        want = whole[KEYS[key]] if name == "f4" else file.get_slice(name)[KEYS[key]]
    tensors = open_tensors(matrix)
    assert isinstance(tensors, Tensors)
    assert (list(tensors), len(tensors), repr(tensors)) == (
        ["w", "b", "e8", "f4"],
        4,
        "<Tensors 4 tensors>",
    )
    lazy = tensors[name]
    assert isinstance(lazy, LazyTensor)
    assert repr(lazy).startswith(f"<LazyTensor {name!r} ")
    assert (lazy.shape, lazy.dtype, lazy.ndim, len(lazy)) == (whole.shape, whole.dtype, 2, 5)
    got = lazy[KEYS[key]]
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    assert _bits(got) == _bits(want)


def test_negative_steps_which_torch_indexing_lacks(matrix: Path) -> None:
    whole = reference.load_file(matrix)["w"]
    got = open_tensors(matrix)["w"][::-2, 5:1:-1]
    assert torch.equal(got, whole.flip(0)[::2].flip(1)[:, 1:5])


def test_a_slice_over_http_reads_only_its_bytes(site: Site, matrix: Path) -> None:
    site.files["m"] = matrix.read_bytes()
    tensors = open_tensors(site.url("m"), gap=0)
    assert len(site.done(1)) == 1  # the header, nothing else
    lazy = tensors["w"]
    key = (slice(1, 4), slice(2, 4))
    got = lazy[key]
    assert torch.equal(got, reference.load_file(matrix)["w"][key])
    ranges = lazy.info.byte_ranges(key)
    _, *reads = site.done(1 + len(ranges))
    assert len(reads) == len(ranges) == 3
    assert sum(hit.sent for hit in reads) == 3 * 2 * 4  # 3 rows of 2 float32s


# --- HTTP, ranks ------------------------------------------------------------------------------


def test_load_over_http_reads_the_header_then_the_tensors(site: Site, every: Path) -> None:
    site.files["every"] = every.read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensors = load(site.url("every"))
    assert_same(tensors, reference.load_file(every))
    hits = site.done(2)
    assert len(hits) == 2  # the header, then every tensor in one span
    assert hits[1].sent == read_header(every).data_size
    tensors["f32"].fill_(1.0)  # the buffer it was read into, writable
    chosen = load(site.url("every"), names=["bf16", "u64"], timeout=30)
    assert_same(chosen, {name: reference.load_file(every)[name] for name in ("bf16", "u64")})


def test_into_over_http(site: Site, every: Path) -> None:
    site.files["every"] = every.read_bytes()
    want = reference.load_file(every)
    targets = {name: torch.empty_like(want[name]) for name in ("f16", "c64")}
    loaded = load(site.url("every"), into=targets)
    assert all(loaded[name] is targets[name] for name in targets)
    assert_same(loaded, {name: want[name] for name in targets})


def _checkpoint(folder: Path) -> dict[str, Any]:
    """A checkpoint of two shards, written by the reference; its tensors, by name."""
    generator = torch.Generator().manual_seed(5)
    tensors = {
        "model.layers.0.self_attn.q_proj.weight": torch.randn(12, 8, generator=generator),
        "model.layers.0.self_attn.o_proj.weight": torch.randn(8, 12, generator=generator),
        "model.layers.0.mlp.up_proj.weight": torch.randn(10, 8, generator=generator).bfloat16(),
        "model.norm.weight": torch.randn(8, generator=generator),
        "lm_head.weight": torch.randn(9, 8, generator=generator).to(torch.float16),
    }
    names = list(tensors)
    shards = {"a.safetensors": names[:2], "b.safetensors": names[2:]}
    for file, chunk in shards.items():
        reference.save_file({name: tensors[name] for name in chunk}, str(folder / file))
    weight_map = {name: file for file, chunk in shards.items() for name in chunk}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return tensors


def _split(name: str, value: Any, rank: int, world: int) -> Any:
    """The reference's tensor, split as the default (Megatron's) layout splits it."""
    if name == "model.norm.weight":
        return value  # norms are whole on every rank
    axis = 1 if name.endswith("o_proj.weight") else 0
    return torch.tensor_split(value, world, axis)[rank]


@pytest.mark.parametrize("world", [1, 2, 3])
def test_a_ranks_share_equals_slices_of_the_references_tensors(
    tmp_path: Path, site: Site, world: int
) -> None:
    tensors = _checkpoint(tmp_path)
    # q's 12 rows are 6 heads: split at head boundaries for 1, 2 and 3 ranks.
    config = {"model_type": "llama", "num_attention_heads": 6}
    (tmp_path / "config.json").write_text(json.dumps(config))
    for shard in ("a.safetensors", "b.safetensors"):
        site.files[shard] = (tmp_path / shard).read_bytes()
    for rank in range(world):
        local = load_rank(tmp_path, rank, world)
        remote = load_rank(site.url("b.safetensors"), rank, world, timeout=30, retries=1)
        assert sorted(local) == sorted(tensors)
        for name, value in tensors.items():
            want = _split(name, value, rank, world)
            assert torch.equal(local[name], want), name
            assert local[name].dtype == want.dtype
        for name in remote:
            assert torch.equal(remote[name], _split(name, tensors[name], rank, world)), name
    on_meta = load_rank(read_checkpoint(tmp_path), 0, 2, device="meta")
    assert {value.device.type for value in on_meta.values()} == {"meta"}


def test_load_plan_of_slices(matrix: Path) -> None:
    plan = plan_reads(matrix, {"w": (slice(1, 3), slice(None, None, 3)), "e8": None, "f4": 4})
    tensors = load_plan(plan)
    whole = reference.load_file(matrix)
    assert torch.equal(tensors["w"], whole["w"][1:3, ::3])
    assert _bits(tensors["e8"]) == _bits(whole["e8"])
    assert _bits(tensors["f4"]) == _bits(whole["f4"][4])


# --- save ------------------------------------------------------------------------------------


@pytest.mark.parametrize("metadata", [None, {"format": "pt"}, {}])
def test_save_is_the_references_bytes(tmp_path: Path, metadata: dict[str, str] | None) -> None:
    data = save(EVERY, metadata=metadata)
    assert data == reference.save(EVERY, metadata=metadata)
    save_file(EVERY, tmp_path / "ours.safetensors", metadata=metadata)
    reference.save_file(EVERY, str(tmp_path / "theirs.safetensors"), metadata=metadata)
    assert (tmp_path / "ours.safetensors").read_bytes() == (
        tmp_path / "theirs.safetensors"
    ).read_bytes()


def test_save_file_of_load_writes_the_same_bytes(every: Path, tmp_path: Path) -> None:
    metadata = read_header(every).metadata
    header = save_file(load(every), tmp_path / "copy.safetensors", metadata=metadata)
    assert (tmp_path / "copy.safetensors").read_bytes() == every.read_bytes()
    assert header == read_header(every)


def test_save_writes_what_the_reference_refuses_as_its_values(tmp_path: Path) -> None:
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    strided = base[:, ::2]
    with pytest.raises(ValueError, match="non contiguous"):
        reference.save({"s": strided})
    assert save({"s": strided}) == reference.save({"s": strided.contiguous()})
    tied = {"a": base, "b": base}
    with pytest.raises(RuntimeError, match="share memory"):
        reference.save(tied)
    assert load(save(tied))["b"].equal(base)
    grad = torch.ones(3, requires_grad=True)
    assert save({"g": grad}) == reference.save({"g": grad.detach()})


def test_save_refuses_what_safetensors_cannot_hold() -> None:
    cases: list[tuple[Any, type[Exception], str]] = [
        ({"c": torch.zeros(2, dtype=torch.complex128)}, TypeError, "tensor 'c': no safetensors"),
        ({"x": [1, 2]}, TypeError, "tensor 'x': expected a torch.Tensor, not list"),
        ({"s": torch.eye(2).to_sparse()}, TypeError, "sparse_coo.*to_dense"),
        ([("a", torch.zeros(1))], TypeError, "a mapping of name to tensor, not list"),
        ({"__metadata__": torch.zeros(1)}, HeaderError, "__metadata__"),
    ]
    for tensors, error, match in cases:
        with pytest.raises(error, match=match):
            save(tensors)


# --- a big-endian machine, as the code sees one -----------------------------------------------


def test_a_big_endian_machine_swaps_each_numbers_bytes(
    every: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = reference.load_file(every)
    monkeypatch.setattr(sys, "byteorder", "big")
    for mmap in (None, False):
        loaded = load(every, mmap=mmap)
        for name in ("f32", "u16", "bf16", "i64"):
            size = want[name].element_size()
            swapped = want[name].reshape(-1).view(torch.uint8).reshape(-1, size).flip(1)
            assert _bits(loaded[name]) == _bits(swapped), name
        # A complex number is two floats, each swapped.
        pairs = want["c64"].reshape(-1).view(torch.uint8).reshape(-1, 4).flip(1)
        assert _bits(loaded["c64"]) == _bits(pairs)
        assert _bits(loaded["u8"]) == _bits(want["u8"])
    assert _bits(open_tensors(every)["f32"][1]) == _bits(load(every)["f32"][1])
    into = {"f32": torch.empty(2, 3, 2)}
    assert _bits(load(every, into=into)["f32"]) == _bits(load(every)["f32"])
    # And saving swaps them back: the file's bytes again.
    assert save(load(every), metadata={"format": "pt"}) == every.read_bytes()
