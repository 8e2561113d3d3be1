"""``safetensors.torch`` of the alias (issue 52): load_file, save_file, load, save, save_model,
load_model and the helpers of shared tensors, compared with the ``safetensors`` package.

Run in the nox ``torch`` session (it needs torch). Where the alias is installed, it is in a
subprocess: this process imports the reference.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from test_compat import aliased

torch = pytest.importorskip("torch")
reference = pytest.importorskip("safetensors.torch")
import safetensors  # noqa: E402

from safetensors_header import read_header  # noqa: E402
from safetensors_header._compat import SafetensorError, safe_open  # noqa: E402
from safetensors_header._compat import torch as compat  # noqa: E402


class Tied(torch.nn.Module):
    """The example every tutorial shows: two layers that are one ``nn.Linear``."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = self.a


class Untied(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)


def _tensors() -> dict[str, Any]:
    generator = torch.Generator().manual_seed(52)
    return {
        "w": torch.randn((4, 6), generator=generator),
        "h": torch.randn((3,), generator=generator).to(torch.bfloat16),
        "i": torch.arange(5, dtype=torch.int64),
        "e": torch.zeros((2, 0)),
        "f8": torch.tensor([-0.5, 2.0], dtype=torch.float8_e4m3fn),
        "c": torch.zeros(2, dtype=torch.complex64),
    }


def test_save_writes_the_references_bytes(tmp_path: Path) -> None:
    tensors = _tensors()
    assert compat.save(tensors, {"format": "pt"}) == reference.save(tensors, {"format": "pt"})
    compat.save_file(tensors, tmp_path / "ours", metadata={"format": "pt"})
    reference.save_file(tensors, str(tmp_path / "theirs"), metadata={"format": "pt"})
    assert (tmp_path / "ours").read_bytes() == (tmp_path / "theirs").read_bytes()


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_load_file_gives_the_references_tensors(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "m.safetensors"
    reference.save_file(_tensors(), str(path))
    mine = compat.load_file(path, backend=backend)
    expected = reference.load_file(str(path), backend=backend)
    assert list(mine) == list(expected)
    for name, tensor in expected.items():
        assert mine[name].dtype == tensor.dtype
        assert mine[name].shape == tensor.shape
        assert torch.equal(mine[name].view(torch.uint8), tensor.view(torch.uint8))
    from_bytes = compat.load(path.read_bytes())
    for name, tensor in expected.items():
        assert torch.equal(from_bytes[name].view(torch.uint8), tensor.view(torch.uint8))


def test_safe_open_pt_slices_and_device(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    tensors = _tensors()
    reference.save_file(tensors, str(path))
    with safe_open(path, "pt", device="cpu") as f:
        assert torch.equal(f.get_slice("w")[1:3, -1], tensors["w"][1:3, -1])
        assert f.get_slice("w")[[]].shape == (0, 6)
        assert torch.equal(f.get_tensor("i"), tensors["i"])
    with pytest.raises(SafetensorError, match="device cuda:x is invalid"):
        safe_open(path, "pt", device="cuda:x")


def test_save_file_refuses_shared_tensors_as_the_reference(tmp_path: Path) -> None:
    state = Tied().state_dict()
    with pytest.raises(RuntimeError) as expected:
        reference.save_file(state, str(tmp_path / "r"))
    with pytest.raises(RuntimeError) as found:
        compat.save_file(state, tmp_path / "o")
    assert str(found.value) == str(expected.value)
    assert "save_model" in str(found.value)


CHECKS = [
    pytest.param({"x": torch.arange(6.0).reshape(2, 3).t()}, ValueError, id="non-contiguous"),
    pytest.param({"x": torch.sparse_coo_tensor(size=(2, 3))}, ValueError, id="sparse"),
    pytest.param({"x": {"some": "thing"}}, ValueError, id="not-a-tensor"),
    pytest.param("notadict", ValueError, id="not-a-dict"),
    pytest.param({"x": torch.zeros(2, device="meta")}, RuntimeError, id="meta"),
]


@pytest.mark.parametrize(("tensors", "error"), CHECKS)
def test_save_file_refuses_what_the_reference_refuses(
    tmp_path: Path, tensors: Any, error: type[Exception]
) -> None:
    with pytest.raises(error) as expected:
        reference.save_file(tensors, str(tmp_path / "r"))
    with pytest.raises(error) as found:
        compat.save_file(tensors, tmp_path / "o")
    if error is ValueError:
        assert str(found.value) == str(expected.value)
    assert not (tmp_path / "o").exists()


def test_shared_tensor_helpers_as_the_reference() -> None:
    base = torch.zeros(4)
    for state in (
        {"A": base, "B": base[:1]},
        {"B": base[:2], "C": base[2:]},
        {"B": base[:2], "C": base[1:]},
        {"B": base[:2], "C": base[2:], "D": base[:1]},
        {"m": torch.zeros(2, device="meta")},
        Tied().state_dict(),
        Untied().state_dict(),
    ):
        assert compat._find_shared_tensors(state) == reference._find_shared_tensors(state)
    for tensor in (base, base[:1], base[::2], torch.zeros(2, device="meta")):
        assert compat._is_complete(tensor) == reference._is_complete(tensor)
        assert compat.storage_ptr(tensor) == reference.storage_ptr(tensor)
        assert compat.storage_size(tensor) == reference.storage_size(tensor)
    assert compat._end_ptr(base[::2]) == reference._end_ptr(base[::2])
    state = {"A": base, "B": base[:1], "C": base}
    assert compat._remove_duplicate_names(state) == reference._remove_duplicate_names(state)
    assert compat._remove_duplicate_names(
        state, preferred_names=["C"]
    ) == reference._remove_duplicate_names(state, preferred_names=["C"])
    with pytest.raises(RuntimeError, match="no suitable name to keep"):
        compat._remove_duplicate_names({"B": base[:1]})


def test_save_model_drops_duplicates_as_the_reference(tmp_path: Path) -> None:
    model = Tied()
    compat.save_model(model, tmp_path / "ours")
    reference.save_model(model, str(tmp_path / "theirs"))
    # (The reference writes the metadata's keys in the order of a hash map: the header's
    # bytes may differ; its contents and the data may not.)
    ours, theirs = read_header(tmp_path / "ours"), read_header(tmp_path / "theirs")
    assert ours.tensors == theirs.tensors
    assert ours.metadata == theirs.metadata
    data = (tmp_path / "ours").read_bytes()[ours.data_start :]
    assert data == (tmp_path / "theirs").read_bytes()[theirs.data_start :]
    with safe_open(tmp_path / "ours", "pt") as f:
        assert f.metadata() == {"b.bias": "a.bias", "b.weight": "a.weight"}
        assert f.keys() == ["a.bias", "a.weight"]
    again = Tied()
    assert compat.load_model(again, tmp_path / "theirs") == (set(), [])
    assert torch.equal(again.b.weight, model.a.weight)
    assert again.a is again.b  # still tied


def test_save_model_force_contiguous(tmp_path: Path) -> None:
    model = Untied()
    model.a.weight = torch.nn.Parameter(torch.zeros(8, 8).t())
    with pytest.raises(ValueError, match=r"use save_model\(\.\.\., force_contiguous=True\)"):
        compat.save_model(model, tmp_path / "m", force_contiguous=False)
    compat.save_model(model, tmp_path / "m")
    assert torch.equal(compat.load_file(tmp_path / "m")["a.weight"], model.a.weight)


def test_load_model_reports_missing_and_unexpected_as_the_reference(tmp_path: Path) -> None:
    compat.save_model(Tied(), tmp_path / "tied")
    compat.save_model(Untied(), tmp_path / "untied")
    for model, path in ((Untied(), "tied"), (Tied(), "untied")):
        with pytest.raises(RuntimeError) as expected:
            reference.load_model(copy.deepcopy(model), str(tmp_path / path))
        with pytest.raises(RuntimeError) as found:
            compat.load_model(copy.deepcopy(model), tmp_path / path)
        assert str(found.value) == str(expected.value)
        assert compat.load_model(
            copy.deepcopy(model), tmp_path / path, strict=False
        ) == reference.load_model(copy.deepcopy(model), str(tmp_path / path), strict=False)


def test_torch_through_the_alias(tmp_path: Path) -> None:
    path = tmp_path / "tied.safetensors"
    found = aliased(
        f"""
        import json, torch
        import safetensors.torch
        from safetensors import safe_open
        from safetensors.torch import load_model, save_model, save_file, load_file
        class Tied(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = torch.nn.Linear(8, 8)
                self.b = self.a
        torch.manual_seed(0)
        model = Tied()
        try:
            save_file(model.state_dict(), {str(path)!r})
        except RuntimeError as error:
            refused = "save_model" in str(error)
        save_model(model, {str(path)!r})
        again = Tied()
        report = load_model(again, {str(path)!r})
        with safe_open({str(path)!r}, framework="pt") as f:
            metadata = f.metadata()
        print(json.dumps([refused, sorted(report[0]), report[1], metadata,
                          torch.equal(again.b.weight, model.a.weight),
                          safetensors.torch.__name__]))
        """
    )
    assert found == [
        True,
        [],
        [],
        {"b.bias": "a.bias", "b.weight": "a.weight"},
        True,
        "safetensors_header._compat.torch",
    ]
    loaded = reference.load_file(str(path))
    assert sorted(loaded) == ["a.bias", "a.weight"]
    assert safetensors.__name__ == "safetensors"  # this process kept the reference


def test_safe_open_pt_reads_the_hub_lazily(loopback_hub: Any) -> None:
    # safe_open("hf://...", "pt"): the header, then the rows a rank asks for, over HTTP.
    big = torch.arange(1 << 20, dtype=torch.float32).reshape(1024, 1024)
    data = compat.save({"big": big})
    loopback_hub.linked["org/repo/resolve/main/model.safetensors"] = data
    with safe_open("hf://org/repo/model.safetensors", framework="pt") as f:
        rows = f.get_slice("big")[1020:1030]  # clamped, as torch clamps
        assert torch.equal(rows, big[1020:1030])
        assert rows.shape == (4, 1024)
    assert loopback_hub.sent + loopback_hub.cdn.sent < len(data) // 8
