"""The alias against code written for the reference, where a review found them apart
(issue 52): each test compares this project's ``safetensors`` API with the ``safetensors``
package (the reference) in this process, or runs the alias in a subprocess.

Run in the nox ``torch`` session (it needs torch).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
reference = pytest.importorskip("safetensors.torch")
import safetensors  # noqa: E402

from safetensors_header._compat import safe_open  # noqa: E402


@pytest.fixture
def path(tmp_path: Path) -> Path:
    target = tmp_path / "m.safetensors"
    tensors = {
        "w": torch.arange(40, dtype=torch.float32).reshape(10, 4),
        "s": torch.tensor(3.5, dtype=torch.bfloat16),
    }
    reference.save_file(tensors, str(target))
    return target


def _outcome(get: Any) -> tuple[str, Any]:
    """What `get()` gives: ``("tensor", (dtype, shape, values))`` or ``(error type, words)``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's word on a list used as an index
            tensor = get()
    except Exception as error:  # the reference's, whatever it is
        return type(error).__name__, str(error)
    return "tensor", (tensor.dtype, tuple(tensor.shape), tensor.float().tolist())


# The reference's ``safe_open(..., "pt")`` (default backend) indexes a torch view of its map:
# a slice's bounds are clamped to the shape, ``None``, bools, lists and tensors index as torch
# indexes them, and its refusals are torch's errors.
TORCH_KEYS = [
    pytest.param(slice(8, 12), id="stop-past-the-end"),
    pytest.param(slice(12, 20), id="start-past-the-end"),
    pytest.param(slice(-20, 2), id="start-before-the-beginning"),
    pytest.param((slice(None), slice(2, 9)), id="stop-past-the-end-of-dim-1"),
    pytest.param(slice(5, 2), id="stop-before-start"),
    pytest.param((Ellipsis, slice(1, None)), id="ellipsis"),
    pytest.param((Ellipsis, None), id="new-axis-last"),
    pytest.param(None, id="new-axis"),
    pytest.param((1, None, slice(None, 2)), id="int-new-axis-slice"),
    pytest.param(True, id="bool"),
    pytest.param([0, 2], id="list"),
    pytest.param([], id="empty-list"),
    pytest.param(np.int64(3), id="numpy-int"),
    pytest.param(slice(None, None, 3), id="step"),
    pytest.param(slice(None, None, -1), id="negative-step"),
    pytest.param(10, id="index-out-of-range"),
    pytest.param(-11, id="negative-index-out-of-range"),
    pytest.param((0, 0, 0), id="too-many-indexes"),
    pytest.param(1.0, id="float"),
]


def _sliced(path: Path, name: str, key: object) -> tuple[tuple[str, Any], tuple[str, Any]]:
    """`_outcome` of ``get_slice(name)[key]`` here and in the reference (``"pt"``)."""
    with reference.safe_open(str(path), "pt") as theirs, safe_open(path, "pt") as ours:
        return _outcome(lambda: ours.get_slice(name)[key]), _outcome(
            lambda: theirs.get_slice(name)[key]
        )


@pytest.mark.parametrize("key", TORCH_KEYS)
def test_pt_get_slice_indexes_as_torch_as_the_reference(path: Path, key: object) -> None:
    found, expected = _sliced(path, "w", key)
    assert found == expected


def test_pt_get_slice_of_a_tensor_index_as_the_reference(path: Path) -> None:
    found, expected = _sliced(path, "w", torch.tensor([0, 9]))
    assert found == expected


@pytest.mark.parametrize("key", [(), Ellipsis, None, 0], ids=["empty", "ellipsis", "new", "int"])
def test_pt_get_slice_of_a_scalar_as_the_reference(path: Path, key: object) -> None:
    found, expected = _sliced(path, "s", key)
    assert found == expected


def test_tensor_parallel_shards_of_an_uneven_dimension(path: Path) -> None:
    """The pattern of tensor-parallel loaders: rank r reads rows ``[r * n : (r + 1) * n]``,
    the last rank's stop past the end."""
    with safe_open(path, "pt") as ours:
        rows = ours.get_slice("w")
        shards = [rows[rank * 4 : (rank + 1) * 4] for rank in range(3)]
    assert [shard.shape[0] for shard in shards] == [4, 4, 2]
    assert torch.equal(torch.cat(shards), torch.arange(40, dtype=torch.float32).reshape(10, 4))


def test_the_reference_is_the_one_compared() -> None:
    assert safetensors.__name__ == "safetensors"


def test_a_folder_is_refused_by_its_name(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError) as found:
        safe_open(tmp_path, "pt")
    assert found.value.filename == str(tmp_path)
    with pytest.raises(OSError, match="No such device"):
        reference.safe_open(str(tmp_path), "pt")  # the reference's, an OSError too


def test_installing_twice_returns_the_same_alias() -> None:
    """The docstring's word: a second call while installed returns the same alias, which
    still puts back the reference it replaced."""
    from test_compat import aliased

    found = aliased(
        """
        import json, sys
        alias.uninstall()
        import safetensors
        first = safetensors_header.install_as_safetensors(replace=True)
        second = safetensors_header.install_as_safetensors()
        same = second is first
        second.uninstall()
        import safetensors as back
        print(json.dumps([same, back is safetensors, first.installed]))
        """
    )
    assert found == [True, True, False]
