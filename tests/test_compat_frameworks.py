"""The reference's TensorFlow, PaddlePaddle and MLX modules (safetensors_header._compat),
compared with the reference's own (safetensors.tensorflow, .paddle, .mlx): the bytes each
writes and the tensors each reads, for every dtype the framework has.

Each framework is tested where it is installed: ``nox -s frameworks`` makes one environment
each (their numpy pins differ); elsewhere their tests skip. The shared part
(_compat/_over_numpy) is also tested with numpy alone, below.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import build, tensor
from loopback import Site

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")
reference_numpy = pytest.importorskip("safetensors.numpy")

from safetensors_header import HeaderError  # noqa: E402
from safetensors_header._compat import _over_numpy  # noqa: E402
from safetensors_header._compat._errors import SafetensorError  # noqa: E402
from safetensors_header.numpy import numpy_dtype  # noqa: E402

# The safetensors dtypes each framework holds (its module's HOLDS), and those of them the
# reference's module cannot write (save), or read from bytes (load) or from a file
# (load_file); the tests check that the reference does fail there, so that the lists stay
# true.
HOLDS = {
    "tensorflow": {
        "BOOL",
        "U8",
        "I8",
        "U16",
        "I16",
        "F16",
        "BF16",
        "U32",
        "I32",
        "F32",
        "C64",
        "U64",
        "I64",
        "F64",
        "F8_E4M3",
        "F8_E5M2",
        "F8_E4M3FNUZ",
        "F8_E5M2FNUZ",
    },
    "paddle": {
        "BOOL",
        "U8",
        "I8",
        "I16",
        "F16",
        "BF16",
        "I32",
        "F32",
        "C64",
        "I64",
        "F64",
        "F8_E4M3",
        "F8_E5M2",
    },
    "mlx": {"BOOL", "U8", "I8", "U16", "I16", "F16", "BF16", "U32", "I32", "F32", "C64"}
    | {"U64", "I64", "F64"},
}
F8 = {"F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"}
REFERENCE_CANNOT = {
    # "'numpy' has no attribute 'float8_e4m3fn'"; numpy.load knows no BF16 ("KeyError").
    "tensorflow": {"load_file": F8, "load": F8 | {"BF16"}},
    "paddle": {"load": {"C64"}},  # its table of dtypes has no C64 ("KeyError")
    # MLX gives numpy no bfloat16 buffer ("not a valid PEP 3118 buffer format string").
    "mlx": {"save": {"BF16"}, "load": {"BF16"}},  # numpy.load knows no BF16
}
CASES = [
    pytest.param(name, dtype, id=f"{name}-{dtype}")
    for name, dtypes in HOLDS.items()
    for dtype in sorted(dtypes)
]


@dataclass
class Framework:
    """A framework, its module here and the reference's, and how a test makes and reads its
    tensors without either module."""

    name: str
    ours: Any
    reference: Any
    tensor: Callable[[Any], Any]  # a numpy array -> a tensor of the same dtype and bits
    array: Callable[[Any], Any]  # a tensor -> its bits, as a numpy array of its dtype


def _tensorflow() -> Framework:
    tf = pytest.importorskip("tensorflow")
    return Framework(
        "tensorflow",
        importlib.import_module("safetensors_header._compat.tensorflow"),
        pytest.importorskip("safetensors.tensorflow"),
        tf.convert_to_tensor,
        lambda made: made.numpy(),
    )


def _paddle() -> Framework:
    paddle = pytest.importorskip("paddle")
    viewed = {  # PaddlePaddle hands numpy these dtypes' bits as another dtype
        "bfloat16": (np.uint16, paddle.bfloat16),
        "float8_e4m3fn": (np.int8, paddle.float8_e4m3fn),
        "float8_e5m2": (np.int8, paddle.float8_e5m2),
    }
    by_paddle = {
        str(dtype): np.dtype(getattr(ml_dtypes, name)) for name, (_, dtype) in viewed.items()
    }

    def made(array: Any) -> Any:
        if array.dtype.name in viewed:
            bits, dtype = viewed[array.dtype.name]
            return paddle.to_tensor(array.view(bits)).view(dtype)
        return paddle.to_tensor(array)

    def array(made: Any) -> Any:
        values = made.numpy()
        return values.view(by_paddle[str(made.dtype)]) if str(made.dtype) in by_paddle else values

    return Framework(
        "paddle",
        importlib.import_module("safetensors_header._compat.paddle"),
        pytest.importorskip("safetensors.paddle"),
        made,
        array,
    )


def _mlx() -> Framework:
    mx = pytest.importorskip("mlx.core")

    def made(array: Any) -> Any:
        if array.dtype == np.float64:  # mx.array makes float32 of float64 unless asked
            return mx.array(array, dtype=mx.float64)
        return mx.array(array)

    def array(made: Any) -> Any:
        if made.dtype == mx.bfloat16:
            return np.asarray(made.view(mx.uint16)).view(ml_dtypes.bfloat16)
        return np.asarray(made)

    return Framework(
        "mlx",
        importlib.import_module("safetensors_header._compat.mlx"),
        pytest.importorskip("safetensors.mlx"),
        made,
        array,
    )


MAKERS = {"tensorflow": _tensorflow, "paddle": _paddle, "mlx": _mlx}


def framework_named(name: str) -> Framework:
    return MAKERS[name]()


def bits(dtype: str, shape: tuple[int, ...], seed: int = 52) -> Any:
    """A numpy array of `dtype` holding random bytes: every bit pattern, NaNs among them."""
    kind = numpy_dtype(dtype)
    size = int(np.prod(shape)) * kind.itemsize
    raw = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)
    if dtype == "BOOL":
        raw %= 2
    return raw.view(kind).reshape(shape)


def arrays_of(dtype: str) -> dict[str, Any]:
    """Two tensors of `dtype` and one of F32 after them (the reference sorts by dtype)."""
    return {"weight": bits(dtype, (3, 2)), "empty": bits(dtype, (2, 0)), "bias": bits("F32", (2,))}


def same(actual: dict[str, Any], expected: dict[str, Any], framework: Framework) -> None:
    """The same names, dtypes, shapes and bits (NaNs too)."""
    assert sorted(actual) == sorted(expected)
    for name, want in expected.items():
        got, expected_array = framework.array(actual[name]), framework.array(want)
        assert (got.dtype, got.shape) == (expected_array.dtype, expected_array.shape), name
        assert got.tobytes() == expected_array.tobytes(), name


def _refused(framework: Framework, dtype: str, what: str, call: Callable[[], Any]) -> Any:
    """`call()` (a function of the reference's module): it fails where REFERENCE_CANNOT says
    it does, and returns its result elsewhere (None where it failed)."""
    if dtype in REFERENCE_CANNOT[framework.name].get(what, set()):
        with pytest.raises((KeyError, AttributeError, ValueError, TypeError)):
            call()
        return None
    return call()


@pytest.mark.parametrize(("name", "dtype"), CASES)
def test_save_writes_the_reference_s_bytes(name: str, dtype: str) -> None:
    framework = framework_named(name)
    arrays = arrays_of(dtype)
    tensors = {key: framework.tensor(array) for key, array in arrays.items()}
    written = framework.ours.save(tensors, metadata={"format": name})
    # The reference's numpy writer of the same arrays (the one under its framework modules).
    assert written == reference_numpy.save(arrays, metadata={"format": name})
    theirs = _refused(framework, dtype, "save", lambda: framework.reference.save(dict(tensors)))
    if theirs is not None:
        assert framework.ours.save(tensors) == theirs


# The reference's paddle.load_file cannot read an empty tensor: of a 1-byte dtype it aborts
# the process ("The deleter of the pointer is not found"), of another it raises ("strides[0]
# must be 1 to view uint8 as float32"); its own test of one is an expected failure.
EMPTY_REFUSED = {"paddle"}


@pytest.mark.parametrize(("name", "dtype"), CASES)
def test_each_reads_what_the_other_wrote(name: str, dtype: str, tmp_path: Path) -> None:
    framework = framework_named(name)
    tensors = {key: framework.tensor(array) for key, array in arrays_of(dtype).items()}
    ours, theirs = tmp_path / "ours.safetensors", tmp_path / "theirs.safetensors"
    assert framework.ours.save_file(tensors, ours) is None
    if dtype in REFERENCE_CANNOT[name].get("save", set()):
        theirs.write_bytes(reference_numpy.save(arrays_of(dtype)))
    else:
        framework.reference.save_file(dict(tensors), str(theirs))
    assert ours.read_bytes() == theirs.read_bytes()
    loaded = framework.ours.load_file(ours)
    if name == "mlx" and dtype == "F64":  # a float32 array, as the reference's (mx.array's)
        assert str(loaded["weight"].dtype) == "mlx.core.float32"
    else:
        same(loaded, tensors, framework)
    same(framework.ours.load(ours.read_bytes()), loaded, framework)
    same(framework.ours.load_file(str(ours), backend="pread"), loaded, framework)
    # What the reference reads of a file, bit for bit.
    if name in EMPTY_REFUSED:
        tensors.pop("empty")
        framework.ours.save_file(tensors, ours)
    data = ours.read_bytes()
    by_reference = _refused(
        framework, dtype, "load_file", lambda: framework.reference.load_file(str(ours))
    )
    if by_reference is not None:
        same(framework.ours.load_file(ours), by_reference, framework)
    from_bytes = _refused(framework, dtype, "load", lambda: framework.reference.load(data))
    if from_bytes is not None:
        same(framework.ours.load(data), from_bytes, framework)


@pytest.mark.parametrize("name", list(MAKERS))
def test_the_functions_are_the_reference_s(name: str) -> None:
    framework = framework_named(name)
    public = {
        function
        for function, value in vars(framework.reference).items()
        if inspect.isfunction(value)
        and not function.startswith("_")
        and value.__module__ == framework.reference.__name__
    }
    assert public == {"save", "save_file", "load", "load_file"}
    assert set(framework.ours.__all__) == public
    for function in public:
        ours = inspect.signature(getattr(framework.ours, function))
        theirs = inspect.signature(getattr(framework.reference, function))
        assert [
            (parameter.name, parameter.kind, parameter.default)
            for parameter in ours.parameters.values()
        ] == [
            (parameter.name, parameter.kind, parameter.default)
            for parameter in theirs.parameters.values()
        ], function


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_scalar_and_metadata(name: str) -> None:
    framework = framework_named(name)
    tensors = {"scalar": framework.tensor(np.array(-1.5, dtype=np.float32))}
    data = framework.ours.save(tensors, {"format": "np"})
    assert data == reference_numpy.save(
        {"scalar": np.array(-1.5, dtype=np.float32)}, {"format": "np"}
    )
    same(framework.ours.load(data), tensors, framework)


@pytest.mark.parametrize("name", list(MAKERS))
def test_any_source_the_project_reads(name: str, site: Site, tmp_path: Path) -> None:
    framework = framework_named(name)
    tensors = {key: framework.tensor(array) for key, array in arrays_of("I32").items()}
    site.files["model.safetensors"] = data = framework.ours.save(tensors)
    same(framework.ours.load(site.url("model.safetensors")), tensors, framework)
    same(framework.ours.load_file(site.url("model.safetensors")), tensors, framework)
    same(framework.ours.load(memoryview(data)), tensors, framework)
    path = tmp_path / "model.safetensors"
    path.write_bytes(data)
    same(framework.ours.load(path), tensors, framework)


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_backend_neither_mmap_nor_pread_is_the_reference_s_error(
    name: str, tmp_path: Path
) -> None:
    framework = framework_named(name)
    path = tmp_path / "file.safetensors"
    framework.ours.save_file({"x": framework.tensor(bits("F32", (2,)))}, path)
    with pytest.raises(Exception) as theirs:  # noqa: PT011 (the reference's own class)
        framework.reference.load_file(str(path), backend="MMAP")
    with pytest.raises(SafetensorError) as ours:
        framework.ours.load_file(path, backend="MMAP")
    assert type(theirs.value).__name__ == "SafetensorError"
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(TypeError, match="backend must be a str"):
        framework.ours.load_file(path, backend=None)


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_file_the_reference_refuses_is_refused_with_its_error(name: str) -> None:
    framework = framework_named(name)
    overlapping = build({"a": tensor("F32", [2], 0, 8), "b": tensor("F32", [2], 4, 12)}, 12)
    with pytest.raises(Exception) as theirs:  # noqa: PT011 (the reference's own class)
        framework.reference.load(overlapping)
    assert type(theirs.value).__name__ == "SafetensorError"
    with pytest.raises(SafetensorError) as ours:
        framework.ours.load(overlapping)
    assert isinstance(ours.value.__cause__, HeaderError)
    assert ours.value.__cause__.kind == "InvalidOffset"
    with pytest.raises(SafetensorError):
        framework.ours.save({"__metadata__": framework.tensor(bits("F32", (2,)))})


# The module each framework's is imported by first.
IMPORTED = {"tensorflow": "tensorflow", "paddle": "paddle", "mlx": "mlx"}


@pytest.mark.parametrize("name", list(MAKERS))
def test_without_its_framework_the_module_names_the_extra(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    framework_named(name)  # (skips where the framework is not installed)
    monkeypatch.setitem(sys.modules, IMPORTED[name], None)  # an import of it fails
    monkeypatch.delitem(sys.modules, f"safetensors_header._compat.{name}")
    with pytest.raises(ModuleNotFoundError, match=rf"pip install 'safetensors_header\[{name}\]'"):
        importlib.import_module(f"safetensors_header._compat.{name}")


@pytest.mark.parametrize("name", list(MAKERS))
def test_tensors_that_are_not_a_mapping_are_refused(name: str) -> None:
    framework = framework_named(name)
    with pytest.raises(TypeError, match="must be a mapping of name to tensor, not list"):
        framework.ours.save([framework.tensor(bits("F32", (2,)))])


# A dtype of safetensors that the framework has not, for each.
LACKING = {"tensorflow": "F8_E8M0", "paddle": "F8_E4M3FNUZ", "mlx": "F8_E4M3"}


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_dtype_the_framework_has_not_is_refused(name: str, tmp_path: Path) -> None:
    framework = framework_named(name)
    assert HOLDS[name] == framework.ours.HOLDS
    dtype = LACKING[name]
    path = tmp_path / "lacking.safetensors"
    path.write_bytes(reference_numpy.save({"ok": bits("F32", (2,)), "odd": bits(dtype, (2,))}))
    with pytest.raises(TypeError, match=rf"tensor 'odd' is {dtype}, a dtype \w+ has not"):
        framework.ours.load_file(path)
    with pytest.raises(Exception):  # noqa: B017, PT011 (the reference fails as it may)
        framework.reference.load_file(str(path))


def test_tensorflow_leaves_the_mapping_given_as_it_was() -> None:
    framework = framework_named("tensorflow")
    tensors = {"x": framework.tensor(bits("F32", (2,)))}
    given = dict(tensors)
    framework.ours.save(given)
    assert given["x"] is tensors["x"]
    framework.reference.save(given)  # the reference's puts numpy arrays in it
    assert isinstance(given["x"], np.ndarray)
    scalar = {"x": framework.tensor(np.array(2, dtype=np.int64))}
    with pytest.raises(AttributeError):  # the reference's: "'numpy.int64' has no 'ctypes'"
        framework.reference.save(scalar)
    assert framework.ours.save(scalar) == reference_numpy.save({"x": np.array(2, dtype=np.int64)})


def test_paddle_device_and_the_dtypes_the_reference_does_not_write() -> None:
    framework = framework_named("paddle")
    paddle = pytest.importorskip("paddle")
    data = framework.ours.save({"x": framework.tensor(bits("F32", (2,)))})
    for loaded in (framework.ours.load(data), framework.ours.load(data, device="cpu")):
        assert loaded["x"].place.is_cpu_place()
    for dtype in ("uint16", "complex128"):
        made = paddle.zeros([2], dtype="float32").astype(getattr(paddle, dtype))
        with pytest.raises(TypeError, match=f"the reference writes no {dtype} tensor"):
            framework.ours.save({"x": made})
        with pytest.raises(KeyError):
            framework.reference.save({"x": made})
    with pytest.raises(TypeError, match=r"not a paddle\.Tensor"):
        framework.ours.save({"x": bits("F32", (2,))})
    # Not contiguous: written as its values are (the reference refuses it).
    matrix = paddle.arange(6, dtype="float32").reshape([2, 3])
    turned = matrix.transpose([1, 0])
    assert framework.ours.save({"x": turned}) == framework.ours.save({"x": turned.contiguous()})


# The shared part, with numpy alone (a "framework" whose tensors are numpy arrays).
def _load_numpy(source: Any, **backend: str) -> dict[str, Any]:
    return _over_numpy.load(source, np.asarray, {"F32", "I8"}, "numpy", **backend)


def test_the_shared_part_over_numpy_alone(tmp_path: Path) -> None:
    arrays = {"a": bits("F32", (2, 2)), "b": bits("I8", (3,))}
    data = _over_numpy.save(arrays, None, lambda name, array: array)
    assert data == reference_numpy.save(arrays)
    path = tmp_path / "file.safetensors"
    assert _over_numpy.save_file(arrays, path, {"k": "v"}, lambda name, array: array) is None
    for backend in ("mmap", "pread"):
        loaded = _load_numpy(path, backend=backend)
        assert {name: value.tobytes() for name, value in loaded.items()} == {
            name: value.tobytes() for name, value in arrays.items()
        }
    with pytest.raises(SafetensorError, match='backend "x" is invalid'):
        _load_numpy(path, backend="x")
    with pytest.raises(TypeError, match="mapping of name to tensor, not list"):
        _over_numpy.save([arrays["a"]], None, lambda name, array: array)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tensor 'c' is U8, a dtype numpy has not"):
        _load_numpy(reference_numpy.save({**arrays, "c": bits("U8", (1,))}))
    with pytest.raises(SafetensorError, match="above the limit") as refused:
        _load_numpy(b"\xff" * 16)
    assert isinstance(refused.value.__cause__, HeaderError)
    assert refused.value.__cause__.kind == "HeaderTooLarge"


# The reference's safe_open(..., "paddle") (paddle 3.1.1 or newer, the default backend)
# indexes a paddle view of its map: bounds clamped, None, lists, negative steps as paddle's.
PADDLE_KEYS = [
    pytest.param(slice(8, 12), id="stop-past-the-end"),
    pytest.param(None, id="new-axis"),
    pytest.param([0, 2], id="list"),
    pytest.param(slice(-2, None), id="negative-start"),
    pytest.param(slice(None, None, -1), id="negative-step"),
    pytest.param(slice(None, None, 3), id="step"),
    pytest.param((1, None, slice(None, 2)), id="int-new-axis-slice"),
    pytest.param(10, id="index-out-of-range"),
]


@pytest.mark.parametrize("key", PADDLE_KEYS)
def test_paddle_get_slice_indexes_as_paddle_as_the_reference(key: object, tmp_path: Path) -> None:
    pytest.importorskip("paddle")
    import safetensors

    from safetensors_header._compat import safe_open

    path = tmp_path / "m.safetensors"
    reference_numpy.save_file({"b": np.arange(40, dtype=np.float32).reshape(10, 4)}, str(path))

    def outcome(opened: Any) -> tuple[str, Any]:
        try:
            selection = opened.get_slice("b")[key]
        except IndexError as error:
            return "IndexError", str(error)
        return "tensor", (list(selection.shape), selection.numpy().tolist())

    with safetensors.safe_open(str(path), "paddle") as theirs, safe_open(path, "paddle") as ours:
        assert outcome(ours) == outcome(theirs)
