"""safetensors_header.jax, compared with safetensors.flax (load_file, load, save)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from loopback import Site

np = pytest.importorskip("numpy")
jax = pytest.importorskip("jax")
ml_dtypes = pytest.importorskip("ml_dtypes")
flax = pytest.importorskip("safetensors.flax")
safetensors_numpy = pytest.importorskip("safetensors.numpy")
import jax.numpy as jnp  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding  # noqa: E402

from safetensors_header import DTYPES, read_header, write_file  # noqa: E402
from safetensors_header.jax import (  # noqa: E402
    LazyTensor,
    Tensors,
    load,
    load_plan,
    load_rank,
    open_tensors,
    save,
    save_file,
)
from safetensors_header.numpy import safetensors_dtype  # noqa: E402
from safetensors_header.plan import plan_reads  # noqa: E402


def _every_dtype() -> tuple[dict[str, Any], dict[str, Any]]:
    """An array of every dtype numpy and ml_dtypes have a safetensors name for, from random
    bytes (every bit pattern), a scalar and empty arrays."""
    rng = np.random.default_rng(41)

    def bits(shape: tuple[int, ...], dtype: Any) -> Any:
        dtype = np.dtype(dtype)
        raw = rng.integers(0, 256, int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
        return raw.view(dtype).reshape(shape)

    arrays = {
        "bool": rng.random((2, 3)) > 0.5,
        "u8": bits((4,), np.uint8),
        "i8": bits((4,), np.int8),
        "i16": bits((2, 2), np.int16),
        "u16": bits((3,), np.uint16),
        "f16": bits((3, 1), np.float16),
        "i32": bits((5,), np.int32),
        "u32": bits((2,), np.uint32),
        "f32": bits((2, 3, 2), np.float32),
        "c64": bits((2,), np.complex64),
        "f64": rng.standard_normal((3,)),
        "i64": rng.integers(-(2**40), 2**40, (2,)),
        "u64": rng.integers(0, 2**40, (1,), dtype=np.uint64),
        "scalar": np.array(-1.5, dtype=np.float32),
        "empty": np.zeros((2, 0), dtype=np.int16),
    }
    arrays["bfloat16"] = bits((3, 2), ml_dtypes.bfloat16)
    floats = {name: bits((3, 2), getattr(ml_dtypes, name)) for name in FLOAT8}
    return arrays, floats


# The reference (safetensors.flax) reads none of them: "numpy has no attribute float8_e5m2".
FLOAT8 = ["float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu", "float8_e4m3fnuz", "float8_e5m2fnuz"]
EVERY, FLOATS = _every_dtype()


def assert_same(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    assert sorted(actual) == sorted(expected)
    for name, want in expected.items():
        got = actual[name]
        assert isinstance(got, jax.Array), name
        assert (got.dtype, got.shape) == (want.dtype, want.shape), name
        # Bit for bit (NaNs too): the bytes on the host.
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes(), name


@pytest.fixture(scope="module")
def every(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("jax") / "every.safetensors"
    safetensors_numpy.save_file(EVERY, str(path), metadata={"format": "flax"})
    return path


@pytest.mark.parametrize("kind", ["path", "read", "bytes"])
def test_load_equals_the_references_load_file(every: Path, kind: str) -> None:
    want = flax.load_file(str(every))
    if kind == "bytes":
        got = load(every.read_bytes())
        # The reference's load(bytes) knows no BF16 (its load_file does): the others.
        plain = safetensors_numpy.save({k: v for k, v in EVERY.items() if k != "bfloat16"})
        assert_same(load(plain), flax.load(plain))
    else:
        got = load(every, mmap=kind == "path")
    assert_same(got, want)
    assert list(got) == list(read_header(every).tensors)
    # With JAX's default configuration, 64-bit tensors are 32-bit arrays, as the reference's.
    assert not jax.config.jax_enable_x64
    assert got["f64"].dtype == jnp.float32


def test_the_float8_types_which_the_reference_cannot_load(tmp_path: Path) -> None:
    path = tmp_path / "f8.safetensors"
    write_file(path, FLOATS)
    with pytest.raises(AttributeError, match="has no attribute 'float8_"):
        flax.load_file(str(path))
    got = load(path)
    assert_same(got, FLOATS)
    assert {array.dtype for array in got.values()} == {
        np.dtype(getattr(jnp, name)) for name in FLOAT8
    }


def test_every_dtype_but_the_packed_ones() -> None:
    names = {name for name, info in DTYPES.items() if not info.packed}
    arrays = [*EVERY.values(), *FLOATS.values()]
    assert {safetensors_dtype(array) for array in arrays} == names


def test_packed_dtypes_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "f4.safetensors"
    write_file(path, {"f4": ("F4", [4], b"\x12\x34"), "f32": ("F32", [1], bytes(4))})
    with pytest.raises(TypeError, match="packs several values into each byte"):
        load(path)
    assert load(path, names=["f32"])["f32"].shape == (1,)


def test_sharding_places_every_array(every: Path) -> None:
    device = jax.devices()[0]
    mesh = jax.make_mesh((1,), ("x",))
    rows = NamedSharding(mesh, PartitionSpec("x"))
    placed = load(every, names=["f32", "u16"], sharding=rows)
    assert all(array.sharding == rows for array in placed.values())
    per_name = load(every, names=["f32", "scalar"], sharding={"f32": device})
    assert per_name["f32"].sharding == SingleDeviceSharding(device)
    assert_same(per_name, {name: flax.load_file(str(every))[name] for name in per_name})
    lazy = open_tensors(every, sharding=rows)["f32"][1:]
    assert lazy.sharding == rows
    # A 0-d array cannot be split along "x": JAX says so (0.12: a ValueError; 0.10: an
    # AssertionError), and the error is its own.
    with pytest.raises((ValueError, AssertionError), match=r"ndim|P\('x',\)"):
        load(every, names=["scalar"], sharding=rows)


# --- slices, HTTP, ranks ---------------------------------------------------------------------


KEYS = {
    "rows": np.s_[1:3],
    "strided": np.s_[::2, 1::3],
    "negative": np.s_[::-1, 5:1:-2],
    "element": np.s_[1, 4],
    "ellipsis": np.s_[..., 0],
    "empty": np.s_[3:1],
}


@pytest.mark.parametrize("key", list(KEYS))
def test_slices_equal_the_references_arrays_sliced(tmp_path: Path, key: str) -> None:
    array = np.arange(5 * 7, dtype=np.float32).reshape(5, 7).astype(ml_dtypes.bfloat16)
    path = tmp_path / "m.safetensors"
    safetensors_numpy.save_file({"w": array}, str(path))
    tensors = open_tensors(path)
    assert isinstance(tensors, Tensors)
    assert (list(tensors), len(tensors), repr(tensors)) == (["w"], 1, "<Tensors 1 tensor>")
    lazy = tensors["w"]
    assert isinstance(lazy, LazyTensor)
    assert repr(lazy) == "<LazyTensor 'w' BF16 [5, 7]>"
    assert (lazy.shape, lazy.ndim, len(lazy), lazy.dtype) == ((5, 7), 2, 5, jnp.bfloat16)
    got = lazy[KEYS[key]]
    want = flax.load_file(str(path))["w"]
    assert isinstance(got, jax.Array)
    assert got.dtype == want.dtype
    assert np.array_equal(np.asarray(got), np.asarray(want)[KEYS[key]])


def test_load_over_http_and_a_ranks_share(site: Site, every: Path, tmp_path: Path) -> None:
    site.files["every"] = every.read_bytes()
    assert_same(load(site.url("every")), flax.load_file(str(every)))
    weight = np.arange(12 * 4, dtype=np.float32).reshape(12, 4)
    path = tmp_path / "tp.safetensors"
    safetensors_numpy.save_file({"mlp.up_proj.weight": weight, "norm.weight": weight[0]}, str(path))
    site.files["tp"] = path.read_bytes()
    for rank in range(3):
        share = load_rank(site.url("tp"), rank, 3, timeout=30)
        assert np.array_equal(
            np.asarray(share["mlp.up_proj.weight"]), weight[rank * 4 : rank * 4 + 4]
        )
        assert np.array_equal(np.asarray(share["norm.weight"]), weight[0])
    plan = plan_reads(path, {"mlp.up_proj.weight": np.s_[:, 1:3]})
    assert np.array_equal(np.asarray(load_plan(plan)["mlp.up_proj.weight"]), weight[:, 1:3])


# --- save ------------------------------------------------------------------------------------


@pytest.mark.parametrize("metadata", [None, {"format": "flax"}])
def test_save_is_the_references_bytes(tmp_path: Path, metadata: dict[str, str] | None) -> None:
    arrays = {
        name: jnp.asarray(array) for name, array in EVERY.items() if array.dtype != np.float64
    }
    arrays = {name: array for name, array in arrays.items() if array.dtype.itemsize < 8}
    assert save(arrays, metadata=metadata) == flax.save(dict(arrays), metadata=metadata)
    save_file(arrays, tmp_path / "ours.safetensors", metadata=metadata)
    flax.save_file(dict(arrays), str(tmp_path / "theirs.safetensors"), metadata=metadata)
    assert (tmp_path / "ours.safetensors").read_bytes() == (
        tmp_path / "theirs.safetensors"
    ).read_bytes()
    with pytest.raises(TypeError, match="a mapping of name to array, not list"):
        save([arrays["f32"]])  # type: ignore[arg-type]


def test_the_index_of_a_checkpoint_reads_its_shards(tmp_path: Path) -> None:
    a, b = np.ones((4, 2), np.float32), np.zeros((6,), np.int16)
    safetensors_numpy.save_file({"a": a}, str(tmp_path / "1.safetensors"))
    safetensors_numpy.save_file({"b": b}, str(tmp_path / "2.safetensors"))
    weight_map = {"a": "1.safetensors", "b": "2.safetensors"}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    share = load_rank(tmp_path, 1, 2, axes={"*": 0})
    assert np.array_equal(np.asarray(share["a"]), a[2:])
    assert np.array_equal(np.asarray(share["b"]), b[3:])
