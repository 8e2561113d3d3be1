"""Writing what the loader reads: `safetensors_header.numpy.save`, `save_file` and
`safetensors_dtype`, byte for byte what `safetensors.numpy` writes, and BF16 and F8 too."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import build, reference_header, tensor

np = pytest.importorskip("numpy")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

from safetensors_header import DTYPES, write_file  # noqa: E402
from safetensors_header.numpy import load, safetensors_dtype, save, save_file  # noqa: E402

NUMPY_DTYPES = ["bool", "u1", "i1", "i2", "u2", "f2", "i4", "u4", "f4", "c8", "f8", "i8", "u8"]
SHAPES = [(2, 3), (), (0, 4), (5,)]


def _arrays(rng: object) -> dict[str, object]:
    arrays = {}
    for number, dtype in enumerate(NUMPY_DTYPES):
        for index, shape in enumerate(SHAPES):
            values = rng.integers(0, 100, size=shape)  # type: ignore[attr-defined]
            arrays[f"t{number}.{index}"] = values.astype(dtype)
    return arrays


@pytest.mark.parametrize("metadata", [None, {}, {"format": "np"}])
def test_the_bytes_of_the_reference_for_every_numpy_dtype(
    metadata: dict[str, str] | None, tmp_path: Path
) -> None:
    arrays = _arrays(np.random.default_rng(3))
    expected = safetensors_numpy.save(arrays, metadata=metadata)
    assert save(arrays, metadata=metadata) == expected
    save_file(arrays, tmp_path / "ours.safetensors", metadata=metadata)
    assert (tmp_path / "ours.safetensors").read_bytes() == expected


def test_bf16_and_f8_round_trip(tmp_path: Path) -> None:
    pytest.importorskip("ml_dtypes")
    entries = {}
    at = 0
    for dtype in ("BF16", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ"):
        nbytes = 6 * DTYPES[dtype].bits // 8
        entries[f"w.{dtype}"] = tensor(dtype, [2, 3], at, at + nbytes)
        at += nbytes
    entries["scale"] = tensor("F32", [], at, at + 4)
    original = build({"__metadata__": {"format": "pt"}, **entries}, bytes(range(7, 7 + at + 4)))
    path = tmp_path / "original.safetensors"
    path.write_bytes(original)
    arrays = load(path, mmap=False)
    assert arrays["w.BF16"].dtype.name == "bfloat16"
    copy = tmp_path / "copy.safetensors"
    save_file(arrays, copy, metadata={"format": "pt"})
    assert reference_header(copy.read_bytes()) == reference_header(original)
    assert save(arrays, metadata={"format": "pt"}) == copy.read_bytes()
    assert {name: safetensors_dtype(array) for name, array in arrays.items()} == {
        name: entry["dtype"] for name, entry in entries.items()
    }


def test_a_strided_or_big_endian_array_is_written_in_c_order_little_endian(
    tmp_path: Path,
) -> None:
    grid = np.arange(24, dtype=">i4").reshape(4, 6)
    arrays = {"columns": grid[:, 1::2], "transposed": grid.T, "big": grid}
    header = write_file(tmp_path / "x.safetensors", arrays)
    assert header.tensors["columns"].shape == (4, 3)
    back = safetensors_numpy.load_file(str(tmp_path / "x.safetensors"))
    for name, array in arrays.items():
        assert back[name].dtype == np.dtype("<i4")
        assert np.array_equal(back[name], array)


def test_the_names_of_dtypes() -> None:
    assert safetensors_dtype(np.float32) == "F32"
    assert safetensors_dtype(np.dtype(">f2")) == "F16"
    assert safetensors_dtype(np.zeros(3, bool)) == "BOOL"
    assert safetensors_dtype("complex64") == "C64"


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (np.zeros(2, "complex128"), "no safetensors dtype for numpy's 'complex128'"),
        (np.array(["text"]), r"no safetensors dtype for numpy's 'str\d+'"),
        (np.zeros(2, object), "no safetensors dtype for numpy's 'object'"),
    ],
)
def test_what_cannot_be_written_says_which_tensor_and_why(
    value: object, said: str, tmp_path: Path
) -> None:
    with pytest.raises(TypeError, match=f"tensor 'bad': {said}"):
        save({"good": np.zeros(2), "bad": value})
    with pytest.raises(TypeError, match=said):
        safetensors_dtype(value)
    assert not list(tmp_path.iterdir())


def test_float4_needs_its_bytes_packed() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    with pytest.raises(TypeError, match="packs these values several to a byte"):
        save({"f4": np.zeros(4, ml_dtypes.float4_e2m1fn)})
