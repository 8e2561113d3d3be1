"""``diff --values`` and ``diff --stats``: which tensors' values changed, and by how much.

The default compares headers alone (a fine-tune of the same shapes is "the same", and the
output says that values were not compared); ``--values`` hashes every tensor on each side,
``--stats`` reads the changed ones again, a chunk at a time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from loopback import Site
from test_cli import run

from safetensors_header import write_file
from safetensors_header._cli import main, values

np = pytest.importorskip("numpy")


def _save(path: Path, arrays: dict[str, object], dtypes: dict[str, str] | None = None) -> None:
    """A file of numpy arrays, each stored as the dtype its name maps to in `dtypes`
    (default: F32), its bytes as given."""
    tensors = {}
    for name, array in arrays.items():
        data = np.ascontiguousarray(array)
        dtype = (dtypes or {}).get(name, "F32")
        tensors[name] = (dtype, list(data.shape), data.tobytes())
    write_file(str(path), tensors, metadata={"format": "pt"})


@pytest.fixture
def base_and_tuned(tmp_path: Path) -> tuple[Path, Path]:
    """A base model and its fine-tune: the same names, dtypes and shapes; one tensor's
    values changed (two elements: by 0.5 and by -2), one unchanged."""
    weight = np.arange(12, dtype=np.float32).reshape(3, 4)  # largest |value|: 11
    bias = np.ones(4, dtype=np.float32)
    tuned = weight.copy()
    tuned[0, 1] += 0.5
    tuned[2, 3] -= 2
    _save(tmp_path / "base.safetensors", {"layer.weight": weight, "layer.bias": bias})
    _save(tmp_path / "tuned.safetensors", {"layer.weight": tuned, "layer.bias": bias})
    return tmp_path / "base.safetensors", tmp_path / "tuned.safetensors"


def test_the_default_reads_headers_and_says_values_were_not_compared(
    base_and_tuned: tuple[Path, Path],
) -> None:
    base, tuned = map(str, base_and_tuned)
    result = run("diff", base, tuned)
    assert result.returncode == 0, result.stderr
    assert (
        "tensors: the same 2 (names, dtypes and shapes; values not compared: --values)"
        in result.stdout.splitlines()
    )
    document = json.loads(run("diff", "--json", base, tuned).stdout)
    assert document["same_values"] is None
    assert document["values"] is None


def test_values_names_the_tensor_whose_values_changed(base_and_tuned: tuple[Path, Path]) -> None:
    base, tuned = map(str, base_and_tuned)
    result = run("diff", "--values", base, tuned)
    assert result.returncode == 1, result.stderr  # they differ
    lines = result.stdout.splitlines()
    assert lines[2:4] == [
        "tensors: the same 2 (names, dtypes and shapes)",
        "values: 1 of 2 tensors changed (sha256 of each tensor's bytes)",
    ]
    row = next(line for line in lines if line.startswith("~"))
    assert row.split()[:2] == ["~", "layer.weight"]
    document = json.loads(run("diff", "--values", "--json", base, tuned).stdout)
    assert document["same_tensors"] is True
    assert document["same_values"] is False
    (change,) = document["values"]["changed"]
    assert document["values"]["compared"] == 2
    assert change["name"] == "layer.weight"
    assert change["statistics"] is None  # (only with --stats)
    # The digests are hash's: the same manifest checks them.
    hashes = json.loads(run("hash", "--json", base).stdout)
    assert change["a"] == hashes["tensors"]["layer.weight"]
    assert change["b"] != change["a"]


def test_the_same_values_exit_0(base_and_tuned: tuple[Path, Path], tmp_path: Path) -> None:
    base, _ = base_and_tuned
    copy = tmp_path / "copy.safetensors"
    copy.write_bytes(base.read_bytes())
    result = run("diff", "--values", str(base), str(copy))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "values: the same in all 2 tensors compared (sha256 of each tensor's bytes)" in (
        result.stdout.splitlines()
    )
    document = json.loads(run("diff", "--stats", "--json", str(base), str(copy)).stdout)
    assert document["same_values"] is True
    assert document["values"]["changed"] == []


def test_stats_say_by_how_much(base_and_tuned: tuple[Path, Path]) -> None:
    base, tuned = map(str, base_and_tuned)
    result = run("diff", "--stats", "--json", base, tuned)
    assert result.returncode == 1, result.stderr
    (change,) = json.loads(result.stdout)["values"]["changed"]
    assert change["statistics"] == {
        "elements": 12,
        "differing": 2,
        "nonfinite": 0,
        "max_abs_diff": 2.0,
        "max_rel_diff": 2.0 / 11,  # the largest difference over A's largest |value|
    }
    text = run("diff", "--stats", base, tuned).stdout.splitlines()
    row = next(line for line in text if line.startswith("~"))
    assert row.split() == ["~", "layer.weight", "2", "of", "12", "2", "0.1818"]


@pytest.mark.parametrize(
    ("dtype", "numpy_type", "before", "after", "expected"),
    [
        # BF16 read by its bits (the upper half of an F32): no ml_dtypes needed.
        ("BF16", "<u2", [0x3F80, 0x4000], [0x3F80, 0x4040], (1, 1.0, 0.5)),  # 1, 2 -> 1, 3
        ("I32", "<i4", [5, -7, 9], [5, -10, 9], (1, 3.0, 3 / 9)),
        ("F16", "<f2", [1.0, 4.0], [1.5, 4.0], (1, 0.5, 0.125)),
        ("BOOL", "|b1", [True, False], [True, True], (1, 1.0, 1.0)),
        ("U8", "|u1", [0, 0], [0, 3], (1, 3.0, None)),  # A all zeros: no relative difference
    ],
    ids=["bf16", "i32", "f16", "bool", "a-all-zero"],
)
def test_stats_of_each_kind_of_dtype(  # noqa: PLR0917 - the parameters, then tmp_path
    tmp_path: Path,
    dtype: str,
    numpy_type: str,
    before: list[object],
    after: list[object],
    expected: tuple[int, float, float | None],
) -> None:
    _save(tmp_path / "a.safetensors", {"t": np.array(before, numpy_type)}, {"t": dtype})
    _save(tmp_path / "b.safetensors", {"t": np.array(after, numpy_type)}, {"t": dtype})
    result = run(
        "diff",
        "--stats",
        "--json",
        str(tmp_path / "a.safetensors"),
        str(tmp_path / "b.safetensors"),
    )
    assert result.returncode == 1, result.stderr
    (change,) = json.loads(result.stdout)["values"]["changed"]
    found = change["statistics"]
    assert (found["differing"], found["max_abs_diff"], found["max_rel_diff"]) == expected


def test_nan_and_infinity_are_counted_not_measured(tmp_path: Path) -> None:
    before = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    after = np.array([1.0, np.nan, np.inf, 4.25], np.float32)
    _save(tmp_path / "a.safetensors", {"t": before})
    _save(tmp_path / "b.safetensors", {"t": after})
    result = run(
        "diff",
        "--stats",
        "--json",
        str(tmp_path / "a.safetensors"),
        str(tmp_path / "b.safetensors"),
    )
    found = json.loads(result.stdout)["values"]["changed"][0]["statistics"]  # valid JSON
    assert found == {
        "elements": 4,
        "differing": 3,
        "nonfinite": 2,
        "max_abs_diff": 0.25,
        "max_rel_diff": 0.25 / 4,
    }


def test_packed_dtypes_are_hashed_but_not_measured(tmp_path: Path) -> None:
    write_file(str(tmp_path / "a.safetensors"), {"t": ("F4", [4], b"\x12\x34")})
    write_file(str(tmp_path / "b.safetensors"), {"t": ("F4", [4], b"\x12\x35")})
    result = run(
        "diff",
        "--stats",
        "--json",
        str(tmp_path / "a.safetensors"),
        str(tmp_path / "b.safetensors"),
    )
    assert result.returncode == 1
    (change,) = json.loads(result.stdout)["values"]["changed"]
    assert change["statistics"] is None
    assert "packs several values a byte" in change["note"]


def test_a_checkpoint_against_a_file_over_http(
    base_and_tuned: tuple[Path, Path],
    site: Site,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Any source on either side: a sharded checkpoint (its tensors in two files) against the
    # fine-tune served over HTTP.
    base, tuned = base_and_tuned
    folder = tmp_path / "sharded"
    folder.mkdir()
    weight = np.arange(12, dtype=np.float32).reshape(3, 4)
    _save(folder / "model-00001-of-00002.safetensors", {"layer.weight": weight})
    _save(folder / "model-00002-of-00002.safetensors", {"layer.bias": np.ones(4, np.float32)})
    index = {
        "metadata": {},
        "weight_map": {
            "layer.weight": "model-00001-of-00002.safetensors",
            "layer.bias": "model-00002-of-00002.safetensors",
        },
    }
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    site.files["tuned.safetensors"] = tuned.read_bytes()
    assert main(["diff", "--stats", "--json", str(folder), site.url("tuned.safetensors")]) == 1
    document = json.loads(capsys.readouterr().out)
    (change,) = document["values"]["changed"]
    assert change["name"] == "layer.weight"
    assert change["statistics"]["max_abs_diff"] == 2.0
    # The same checkpoint against the base file: the same values.
    assert main(["diff", "--values", str(folder), str(base)]) == 0
    assert "values: the same in all 2 tensors compared" in capsys.readouterr().out


def test_stats_read_in_chunks(
    base_and_tuned: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Memory bounded by the chunk, whatever the tensor's size: every read of the statistics
    # is at most _CHUNK_ELEMENTS, and the answer is the one read whole.
    base, tuned = map(str, base_and_tuned)
    assert main(["diff", "--stats", "--json", base, tuned]) == 1
    whole = json.loads(capsys.readouterr().out)["values"]["changed"]
    lengths: list[int] = []
    real = values._Side.bytes

    def recorded(self: values._Side, at: int, length: int) -> memoryview:
        lengths.append(length)
        return real(self, at, length)

    monkeypatch.setattr(values, "_CHUNK_ELEMENTS", 2)  # two F32 values at a time
    monkeypatch.setattr(values._Side, "bytes", recorded)
    assert main(["diff", "--stats", "--json", base, tuned]) == 1
    assert json.loads(capsys.readouterr().out)["values"]["changed"] == whole
    assert lengths == [8] * 12  # both sides' 48 bytes, 8 at a time


def test_standard_input_cannot_be_compared_by_value(base_and_tuned: tuple[Path, Path]) -> None:
    base, tuned = map(str, base_and_tuned)
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "safetensors_header", "diff", "--values", "-", tuned],
        input=Path(base).read_bytes(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert b"standard input" in done.stderr


def test_a_side_that_cannot_be_read_exits_2_and_says_which(
    base_and_tuned: tuple[Path, Path], site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    base, tuned = base_and_tuned
    # The header is served; the data then fails (the file was cut short).
    data = tuned.read_bytes()
    site.files["cut.safetensors"] = data
    site.replace_after_first["cut.safetensors"] = data[:-8]
    url = site.url("cut.safetensors")
    assert main(["diff", "--values", "--json", str(base), url]) == 2
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["error"]["path"] == url
    assert document["same_tensors"] is None
    assert url in captured.err


def test_stats_without_numpy_is_a_usage_error(
    base_and_tuned: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # not importable
    assert values.statistics_need() is not None
    base, tuned = map(str, base_and_tuned)
    assert main(["diff", "--stats", base, tuned]) == 2
    assert "pip install 'safetensors_header[numpy]'" in capsys.readouterr().err
    # --values needs no numpy.
    assert main(["diff", "--values", base, tuned]) == 1


def test_f8_stats_through_ml_dtypes_and_packed_rows_in_the_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    before = np.array([1.0, 2.0, 4.0], ml_dtypes.float8_e4m3fn)
    after = np.array([1.0, 2.5, 4.0], ml_dtypes.float8_e4m3fn)
    for name, array in (("a", before), ("b", after)):
        write_file(
            str(tmp_path / f"{name}.safetensors"),
            {
                "f8": ("F8_E4M3", [3], array.tobytes()),
                "f4": ("F4", [4], b"\x12\x34" if name == "a" else b"\x12\x35"),
            },
        )
    a, b = str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors")
    assert main(["diff", "--stats", "--json", a, b]) == 1
    changed = {c["name"]: c for c in json.loads(capsys.readouterr().out)["values"]["changed"]}
    found = changed["f8"]["statistics"]
    assert (found["differing"], found["max_abs_diff"], found["max_rel_diff"]) == (1, 0.5, 0.125)
    assert main(["diff", "--stats", a, b]) == 1
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("~")]
    assert rows[0].split()[:2] == ["~", "f4"]
    assert "packs several values a byte" in rows[0]  # said where the numbers would be
    assert rows[1].split() == ["~", "f8", "1", "of", "3", "0.5", "0.125"]


def test_f8_without_ml_dtypes_is_hashed_and_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_file(str(tmp_path / "a.safetensors"), {"t": ("F8_E5M2", [2], b"\x01\x02")})
    write_file(str(tmp_path / "b.safetensors"), {"t": ("F8_E5M2", [2], b"\x01\x03")})
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # not importable
    args = [str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors")]
    assert main(["diff", "--stats", "--json", *args]) == 1
    (change,) = json.loads(capsys.readouterr().out)["values"]["changed"]
    assert change["statistics"] is None
    assert "pip install 'safetensors_header[ml-dtypes]'" in change["note"]


def test_a_side_that_fails_while_its_values_are_compared(
    base_and_tuned: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Hashed, then unreadable when read again for the statistics: exit 2, naming the side.
    from safetensors_header import SafetensorsFile

    base, tuned = map(str, base_and_tuned)
    real = values._statistics

    def failing(side_a: values._Side, side_b: values._Side) -> object:
        def refuse(*_: object, **__: object) -> object:
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr(SafetensorsFile, "read_ranges", refuse)
        return real(side_a, side_b)

    monkeypatch.setattr(values, "_statistics", failing)
    assert main(["diff", "--stats", "--json", base, tuned]) == 2
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["error"]["path"] == base
    assert document["error"]["kind"] == "PermissionError"
    assert f"{base}: PermissionError: Permission denied" in captured.err


def _stats(a: Path, b: Path) -> dict[str, object]:
    result = run("diff", "--stats", "--json", str(a), str(b))
    assert result.returncode == 1, result.stderr

    def refuse(constant: str) -> object:
        raise ValueError(f"not JSON: {constant}")

    document = json.loads(result.stdout, parse_constant=refuse)  # (no NaN, no Infinity)
    [changed] = document["values"]["changed"]
    return dict(changed["statistics"])


def test_stats_are_exact_for_integers_and_null_where_nothing_is_measured(tmp_path: Path) -> None:
    # I64 near 2**60: float64 cannot tell 2**60 from 2**60 + 1; the difference is 1.
    _save(tmp_path / "i_a.safetensors", {"x": np.array([2**60, 5], np.int64)}, {"x": "I64"})
    _save(tmp_path / "i_b.safetensors", {"x": np.array([2**60 + 1, 5], np.int64)}, {"x": "I64"})
    stats = _stats(tmp_path / "i_a.safetensors", tmp_path / "i_b.safetensors")
    assert stats["max_abs_diff"] == 1
    # Only a NaN changed: nothing to measure (null, not 0, which would read as no change).
    _save(tmp_path / "n_a.safetensors", {"x": np.array([np.nan, 1], np.float32)})
    _save(tmp_path / "n_b.safetensors", {"x": np.array([1, 1], np.float32)})
    stats = _stats(tmp_path / "n_a.safetensors", tmp_path / "n_b.safetensors")
    assert (stats["max_abs_diff"], stats["max_rel_diff"], stats["nonfinite"]) == (None, None, 1)
    # A relative difference past float64's range (A's largest a subnormal): null, and the
    # JSON stays JSON (no Infinity).
    dtypes = {"x": "F64"}
    _save(tmp_path / "t_a.safetensors", {"x": np.array([5e-324, 0.0])}, dtypes)
    _save(tmp_path / "t_b.safetensors", {"x": np.array([5e-324, 1e300])}, dtypes)
    stats = _stats(tmp_path / "t_a.safetensors", tmp_path / "t_b.safetensors")
    assert (stats["max_abs_diff"], stats["max_rel_diff"]) == (1e300, None)
