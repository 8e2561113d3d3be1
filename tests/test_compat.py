"""The reference's Python API (issue 52): ``safe_open``, ``serialize``, ``deserialize``,
``TensorSpec``, ``safetensors.numpy``, and ``install_as_safetensors()`` serving them as
``safetensors``, compared with the ``safetensors`` package (the reference).

Where the alias is installed, it is in a subprocess: this process imports the reference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")
reference = pytest.importorskip("safetensors")
reference_numpy = pytest.importorskip("safetensors.numpy")

from safetensors_header import HeaderError  # noqa: E402
from safetensors_header._compat import (  # noqa: E402
    SafetensorError,
    TensorSpec,
    deserialize,
    safe_open,
    serialize,
    serialize_file,
)
from safetensors_header._compat import numpy as compat_numpy  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def aliased(code: str, *, cwd: Path | None = None) -> Any:
    """What `code`, run after ``install_as_safetensors()`` in a fresh process, prints as
    JSON on its last line."""
    script = "import safetensors_header\nalias = safetensors_header.install_as_safetensors()\n"
    script += textwrap.dedent(code)
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def unaliased(code: str) -> str:
    """What `code` prints, run in a fresh process without the alias."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environment, check=True
    ).stdout


@pytest.fixture
def arrays() -> dict[str, Any]:
    rng = np.random.default_rng(52)
    return {
        "b": rng.standard_normal((10, 5)).astype("f4"),
        "a": rng.integers(0, 100, (3, 4), dtype="i8"),
        "flag": np.array(True),
        "empty": np.zeros((0, 3), dtype="f2"),
    }


@pytest.fixture
def path(tmp_path: Path, arrays: dict[str, Any]) -> Path:
    target = tmp_path / "model.safetensors"
    reference_numpy.save_file(arrays, str(target), metadata={"format": "np"})
    return target


# --- the alias ---------------------------------------------------------------------------


def test_the_alias_serves_safetensors_and_its_modules_as_this_package() -> None:
    found = aliased(
        """
        import json, sys
        import safetensors, safetensors.numpy
        from safetensors import safe_open, SafetensorError, _safe_open_handle
        import safetensors_header._compat as compat
        import safetensors_header._compat.numpy as compat_numpy
        print(json.dumps([
            safetensors is compat, safetensors.numpy is compat_numpy,
            safetensors.__name__, safetensors.__spec__.name, safetensors.__version__,
            safe_open is compat.safe_open, sys.modules["safetensors.numpy"] is compat_numpy,
        ]))
        """
    )
    assert found == [True, True, *["safetensors_header._compat"] * 2, "0.8.0", True, True]


def test_the_alias_is_undone_and_the_reference_comes_back() -> None:
    found = aliased(
        """
        import json, sys
        import safetensors.numpy
        again = safetensors_header.install_as_safetensors()
        alias.uninstall()
        gone = [name for name in sys.modules if name.startswith("safetensors.")]
        import safetensors
        real = safetensors.__file__
        with safetensors_header.install_as_safetensors(replace=True) as third:
            import safetensors as inside
        import safetensors as after
        print(json.dumps([again.installed, alias.installed, gone, inside.__name__,
                          after.__file__ == real, third.installed]))
        """
    )
    assert found[0] is False  # the same alias, uninstalled with the first
    assert found[1:] == [False, [], "safetensors_header._compat", True, False]


def test_the_alias_refuses_to_shadow_a_reference_imported_already() -> None:
    script = (
        "import safetensors, safetensors_header\n"
        "try:\n    safetensors_header.install_as_safetensors()\n"
        "except RuntimeError as error:\n    print(error)\n"
    )
    said = unaliased(script)
    assert said.startswith("safetensors, safetensors._safetensors_rust imported already")
    assert "replace=True" in said


def test_a_module_the_alias_does_not_have_is_not_found() -> None:
    found = aliased(
        """
        import json
        try:
            import safetensors.nothing
        except ModuleNotFoundError as error:
            print(json.dumps([error.name, str(error)]))
        """
    )
    assert found == ["safetensors.nothing", "No module named 'safetensors.nothing'"]


def test_a_framework_module_without_its_framework_names_the_extra() -> None:
    # safetensors.flax needs JAX: where it is not installed, the error says which extra.
    found = aliased(
        """
        import json, sys
        sys.modules["jax"] = None  # as if JAX were not installed
        try:
            import safetensors.flax
        except ModuleNotFoundError as error:
            print(json.dumps(str(error)))
        """
    )
    assert "safetensors.flax needs jax" in found
    assert "safetensors_header[jax]" in found


def test_the_command_line_does_not_import_the_alias(path: Path) -> None:
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['safetensors_header', 'inspect', {str(path)!r}]\n"
        "try:\n    runpy.run_module('safetensors_header', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'safetensors'\n"
        "             or m.startswith('safetensors_header._compat')))\n"
    )
    assert unaliased(code).strip().splitlines()[-1] == "[]"


# --- safe_open -------------------------------------------------------------------------


def test_safe_open_through_the_alias_reads_as_the_reference(path: Path) -> None:
    found = aliased(
        f"""
        import json
        from safetensors import safe_open
        with safe_open({str(path)!r}, framework="np") as f:
            keys, order, metadata = f.keys(), f.offset_keys(), f.metadata()
            b = f.get_tensor("b")
            piece = f.get_slice("b")
            shape, dtype, part = piece.get_shape(), piece.get_dtype(), piece[2:, -1]
        print(json.dumps([keys, order, metadata, b.tolist(), shape, dtype, part.tolist()]))
        """
    )
    with reference.safe_open(str(path), framework="np") as f:
        piece = f.get_slice("b")
        expected = [
            f.keys(),
            f.offset_keys(),
            f.metadata(),
            f.get_tensor("b").tolist(),
            piece.get_shape(),
            piece.get_dtype(),
            piece[2:, -1].tolist(),
        ]
    assert found == expected


def test_safe_open_gives_the_references_values_and_dtypes(path: Path) -> None:
    with safe_open(path, "numpy") as ours, reference.safe_open(str(path), "numpy") as theirs:
        assert ours.keys() == theirs.keys()
        assert ours.offset_keys() == theirs.offset_keys()
        assert ours.metadata() == theirs.metadata()
        for name in theirs.keys():  # noqa: SIM118 - a handle, not a dict
            mine, expected = ours.get_tensor(name), theirs.get_tensor(name)
            assert (mine.dtype, mine.shape) == (expected.dtype, expected.shape)
            np.testing.assert_array_equal(mine, expected)
            assert mine.flags.writeable or not mine.size  # a copy, as the reference's
        assert list(ours.get_tensors()) == ours.offset_keys()


KEYS = [
    pytest.param(slice(None), id="all"),
    pytest.param((), id="empty-tuple"),
    pytest.param([], id="empty-list"),
    pytest.param(slice(None, 2), id="head"),
    pytest.param((slice(None), slice(None, 2)), id="columns"),
    pytest.param((0, slice(None, 2)), id="row"),
    pytest.param((slice(2, None), -5), id="negative-index"),
    pytest.param((slice(3, 7), 4), id="last-column"),
    pytest.param(3, id="int"),
]


@pytest.mark.parametrize("key", KEYS)
def test_get_slice_reads_what_the_reference_reads(path: Path, key: object) -> None:
    with safe_open(path, "np") as ours, reference.safe_open(str(path), "np") as theirs:
        mine, expected = ours.get_slice("b")[key], theirs.get_slice("b")[key]
    assert mine.shape == expected.shape
    np.testing.assert_array_equal(mine, expected)


REFUSED = [
    pytest.param((slice(2, None), -6), id="negative-index-out-of-range"),
    pytest.param([0, 1], id="non-empty-list"),
    pytest.param((slice(2, None), 20), id="index-out-of-range"),
    pytest.param(slice(None, 20), id="stop-past-the-end"),
    pytest.param((slice(None), slice(None, 20)), id="stop-past-the-end-of-dim-1"),
    pytest.param((slice(None, 20), slice(None, 20)), id="the-last-dimension-first"),
    pytest.param((0, 0, 0), id="too-many-indexes"),
]


@pytest.mark.parametrize("key", REFUSED)
def test_get_slice_refuses_what_the_reference_refuses_with_its_words(
    path: Path, key: object
) -> None:
    theirs = reference.safe_open(str(path), "np").get_slice("b")
    with pytest.raises(reference.SafetensorError) as expected:
        theirs[key]
    ours = safe_open(path, "np").get_slice("b")
    with pytest.raises(SafetensorError) as found:
        ours[key]
    assert str(found.value) == str(expected.value)


def test_get_slice_honours_a_step_which_the_reference_ignores(path: Path, arrays: Any) -> None:
    with safe_open(path, "np") as ours:
        np.testing.assert_array_equal(ours.get_slice("b")[::2, 1::3], arrays["b"][::2, 1::3])
        np.testing.assert_array_equal(ours.get_slice("b")[...], arrays["b"])


ARGUMENTS = [
    pytest.param({"framework": "nope"}, id="framework"),
    pytest.param({"framework": "np", "device": "gpu"}, id="device"),
    pytest.param({"framework": "np", "device": "mps:1"}, id="mps-index"),
    pytest.param({"framework": "np", "device": "cuda:0"}, id="device-for-numpy"),
    pytest.param({"framework": "np", "backend": "nope"}, id="backend"),
]


@pytest.mark.parametrize("arguments", ARGUMENTS)
def test_bad_arguments_raise_the_references_error(path: Path, arguments: dict[str, Any]) -> None:
    with pytest.raises(reference.SafetensorError) as expected:
        reference.safe_open(str(path), **arguments)
    with pytest.raises(SafetensorError) as found:
        safe_open(path, **arguments)
    assert str(found.value) == str(expected.value)


def test_a_missing_file_is_the_references_file_not_found_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "notafile")
    with pytest.raises(FileNotFoundError) as expected:
        reference.safe_open(missing, "np")
    with pytest.raises(FileNotFoundError) as found:
        safe_open(missing, "np")
    assert str(found.value) == str(expected.value) == f"No such file or directory: {missing}"


def test_a_text_mode_file_is_refused_and_a_handle_opens_it_by_name(path: Path) -> None:
    with open(path) as text, pytest.raises(TypeError, match="binary mode"):
        safe_open(text, "np")
    from safetensors_header._compat import _safe_open_handle

    with open(path) as text, _safe_open_handle(text, "np") as handle:
        assert handle.keys() == ["a", "b", "empty", "flag"]


def test_a_closed_file_says_so(path: Path) -> None:
    with safe_open(path, "np") as f:
        piece = f.get_slice("a")
    for call in (f.keys, f.metadata, f.offset_keys, f.get_tensors, lambda: f.get_tensor("a")):
        with pytest.raises(SafetensorError, match=r"^File is closed$"):
            call()
    assert piece[0].shape == (4,)  # a slice taken before stays readable, as the reference's


def test_a_tensor_the_file_lacks(path: Path) -> None:
    with safe_open(path, "np") as f:
        for call in (f.get_tensor, f.get_slice):
            with pytest.raises(SafetensorError, match=r"^File does not contain tensor x$"):
                call("x")


def test_an_invalid_file_is_a_safetensor_error_and_a_header_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\xff" * 16)
    with pytest.raises(reference.SafetensorError, match="Error while deserializing header"):
        reference.safe_open(str(bad), "np")
    with pytest.raises(SafetensorError, match=r"^Error while deserializing header: ") as found:
        safe_open(bad, "np")
    assert isinstance(found.value, HeaderError)
    assert found.value.kind == "HeaderTooLarge"


def test_safe_open_reads_a_url_lazily(site: Any, arrays: dict[str, Any]) -> None:
    big = np.arange(512 * 512, dtype="f4").reshape(512, 512)  # 1 MiB, of which a row is read
    data = reference_numpy.save({**arrays, "big": big})
    site.files["m.safetensors"] = data
    with safe_open(site.url("m.safetensors"), "np") as f:
        row = f.get_slice("big")[3]
        whole = f.get_tensor("a")
    np.testing.assert_array_equal(row, big[3])
    np.testing.assert_array_equal(whole, arrays["a"])
    assert site.sent < len(data) // 4  # the header's first read, the row, the tensor: not all


# --- serialize, deserialize, TensorSpec --------------------------------------------------


def _specs(module: Any, arrays: dict[str, Any]) -> dict[str, Any]:
    return {
        name: module.TensorSpec(
            dtype=array.dtype.name,
            shape=array.shape,
            data_ptr=array.ctypes.data,
            data_len=array.nbytes,
        )
        for name, array in arrays.items()
    }


def test_serialize_writes_the_references_bytes(arrays: dict[str, Any], tmp_path: Path) -> None:
    expected = reference.serialize(_specs(reference, arrays), metadata={"k": "v"})
    assert serialize(_specs(sys.modules[TensorSpec.__module__], arrays), {"k": "v"}) == expected
    serialize_file(_specs(sys.modules[TensorSpec.__module__], arrays), tmp_path / "s")
    reference.serialize_file(_specs(reference, arrays), str(tmp_path / "r"))
    assert (tmp_path / "s").read_bytes() == (tmp_path / "r").read_bytes()


def test_tensor_spec_as_the_reference() -> None:
    spec = TensorSpec(dtype="float4_e2m1fn_x2", shape=[3, 2], data_ptr=0, data_len=6)
    theirs = reference.TensorSpec(dtype="float4_e2m1fn_x2", shape=[3, 2], data_ptr=0, data_len=6)
    assert (spec.dtype, spec.shape) == (theirs.dtype, theirs.shape) == ("F4", [3, 4])
    with pytest.raises(SafetensorError, match=r"^Unknown dtype 'nonsense'"):
        TensorSpec(dtype="nonsense", shape=[1], data_ptr=0, data_len=0)
    with pytest.raises(TypeError):
        serialize({"test": {"dtype": "float32", "shape": [1], "data_ptr": 0, "data_len": 0}})


def test_serialize_refuses_a_buffer_of_the_wrong_length() -> None:
    data = np.zeros(3, dtype="f4")
    spec = TensorSpec(dtype="float32", shape=[4], data_ptr=data.ctypes.data, data_len=12)
    with pytest.raises(SafetensorError, match=r"^Error while serializing: ") as found:
        serialize({"x": spec})
    assert isinstance(found.value, HeaderError)


def test_deserialize_gives_the_references_tensors(path: Path) -> None:
    data = path.read_bytes()
    assert sorted(deserialize(data)) == sorted(reference.deserialize(data))
    with pytest.raises(SafetensorError, match=r"^Error while deserializing: "):
        deserialize(data[:-1])


# --- safetensors.numpy -----------------------------------------------------------------


def test_numpy_save_writes_the_references_bytes(arrays: dict[str, Any], tmp_path: Path) -> None:
    big_endian = {"big": np.arange(6, dtype=">i4").reshape(2, 3)}
    for tensors in (arrays, big_endian):
        assert compat_numpy.save(tensors, {"k": "v"}) == reference_numpy.save(tensors, {"k": "v"})
        compat_numpy.save_file(tensors, tmp_path / "ours")
        reference_numpy.save_file(tensors, str(tmp_path / "theirs"))
        assert (tmp_path / "ours").read_bytes() == (tmp_path / "theirs").read_bytes()


def test_numpy_loads_the_references_values(path: Path) -> None:
    for mine, expected in (
        (compat_numpy.load_file(path), reference_numpy.load_file(str(path))),
        (compat_numpy.load(path.read_bytes()), reference_numpy.load(path.read_bytes())),
    ):
        assert sorted(mine) == sorted(expected)
        for name, array in expected.items():
            assert mine[name].dtype == array.dtype
            np.testing.assert_array_equal(mine[name], array)
            assert mine[name].flags.writeable or not mine[name].size


def test_numpy_writes_a_fortran_ordered_array_right_where_the_reference_is_wrong() -> None:
    array = np.asfortranarray(np.arange(6, dtype="i4").reshape(2, 3))
    assert compat_numpy.load(compat_numpy.save({"x": array}))["x"].tolist() == array.tolist()
    wrong = reference_numpy.load(reference_numpy.save({"x": array}))["x"]
    assert wrong.tolist() != array.tolist()  # its bytes in memory order, read as C order


def test_numpy_refuses_a_dtype_without_a_name() -> None:
    with pytest.raises(SafetensorError, match=r"^Unknown dtype 'complex128'"):
        compat_numpy.save({"x": np.zeros(2, dtype="c16")})


def test_numpy_through_the_alias(tmp_path: Path) -> None:
    target = tmp_path / "np.safetensors"
    found = aliased(
        f"""
        import json
        import numpy as np
        from safetensors.numpy import load, load_file, save, save_file
        arrays = {{"a": np.arange(6, dtype="f4").reshape(2, 3)}}
        save_file(arrays, {str(target)!r})
        loaded = load_file({str(target)!r})["a"].tolist()
        print(json.dumps([loaded, load(save(arrays))["a"].tolist()]))
        """
    )
    assert found == [[[0, 1, 2], [3, 4, 5]]] * 2
    assert target.read_bytes() == reference_numpy.save(
        {"a": np.arange(6, dtype="f4").reshape(2, 3)}
    )


BASIC_AND_OTHER_KEYS = [
    slice(8, 12),  # the last rank of an uneven split: clamped to the 10 rows
    slice(5, 30, 2),
    slice(-3, None),
    slice(7, 2),  # empty
    (slice(None), slice(1, 3)),
    (Ellipsis, 0),
    (None, slice(2, 4)),
    (slice(2, 4), None, Ellipsis),
    -1,
    (3, -2),
    (),
    [0, 2],  # not basic: the whole tensor read, then indexed
    True,
]


def _framework_indexed(tmp_path: Path) -> tuple[Any, Any]:
    """A 10 x 6 array, and the slice of it that a file of it gives with numpy as the framework
    (the slice of torch and paddle's default backend, `TorchSlice`)."""
    from safetensors_header._compat._open import TorchSlice
    from safetensors_header.numpy import open_tensors

    whole = np.arange(60, dtype=np.int32).reshape(10, 6)
    compat_numpy.save_file({"x": whole}, tmp_path / "m.safetensors")
    lazy = open_tensors(tmp_path / "m.safetensors")["x"]
    return whole, TorchSlice(lazy.info, lazy, np.asarray)


@pytest.mark.parametrize("key", BASIC_AND_OTHER_KEYS, ids=repr)
def test_a_framework_indexed_slice_reads_as_the_framework_indexes(
    tmp_path: Path, key: object
) -> None:
    # The slice of torch and paddle (default backend) indexes as the framework indexes a
    # tensor (numpy's rules, for these keys): bounds clamped, None a new axis, lists and bools
    # on the whole tensor. Shown here with numpy as the framework.
    whole, sliced = _framework_indexed(tmp_path)
    np.testing.assert_array_equal(sliced[key], whole[key])  # type: ignore[index]
    assert sliced[key].shape == whole[key].shape  # type: ignore[index]


@pytest.mark.parametrize("key", [10, (0, 6), (slice(None), slice(None), 0), slice(None, None, -1)])
def test_a_framework_indexed_slice_refuses_what_the_framework_refuses(
    tmp_path: Path, key: object
) -> None:
    whole, sliced = _framework_indexed(tmp_path)
    try:
        expected = whole[key]  # type: ignore[index]
    except IndexError:
        with pytest.raises(IndexError):
            sliced[key]
    else:  # numpy takes a negative step, torch does not: read whole, then numpy's answer
        np.testing.assert_array_equal(sliced[key], expected)


def test_safe_open_reads_a_url_and_the_hub_lazily(site: Any, loopback_hub: Any) -> None:
    # Beyond the reference: safe_open of a URL or an hf:// path reads the header, then only
    # the bytes asked for (here 2 rows of a 4 MiB tensor), over HTTP.
    from safetensors_header._compat import safe_open

    big = np.arange(1 << 20, dtype=np.float32).reshape(1024, 1024)
    data = compat_numpy.save({"big": big, "small": np.ones(3, dtype=np.int8)})
    site.files["m.safetensors"] = data
    loopback_hub.linked["org/repo/resolve/main/model.safetensors"] = data
    for source in (site.url("m.safetensors"), "hf://org/repo/model.safetensors"):
        before = site.sent + loopback_hub.cdn.sent
        with safe_open(source, framework="np") as f:
            assert f.keys() == ["big", "small"]
            np.testing.assert_array_equal(f.get_slice("big")[10:12], big[10:12])
            np.testing.assert_array_equal(f.get_tensor("small"), np.ones(3, dtype=np.int8))
        assert site.sent + loopback_hub.cdn.sent - before < len(data) // 8, source
