"""The command line, driven in a subprocess as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import build, tensor

from safetensors_header._cli import main

TINY = str(Path(__file__).parent / "data" / "tiny.safetensors")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "safetensors_header", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_inspect_table() -> None:
    result = run("inspect", TINY)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{TINY}: 7 tensors, header 576 bytes, data at 584, file 819")
    assert "  format: np" in lines
    header = next(line for line in lines if line.startswith("name"))
    assert header.split() == ["name", "dtype", "shape", "bytes", "in", "file", "size"]
    row = next(line for line in lines if line.startswith("embed.weight"))
    assert row.split() == ["embed.weight", "F16", "[8,", "4]", "720-784", "64"]
    assert result.stderr == ""


def test_inspect_json() -> None:
    result = run("inspect", "--json", TINY)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["header_size"] == 576
    assert document["data_start"] == 584
    assert document["file_size"] == 819
    assert document["metadata"] == {"format": "np", "source": "safetensors_header tests"}
    first = document["tensors"][0]
    assert first == {
        "name": "position_ids",
        "dtype": "I64",
        "shape": [6],
        "data_offsets": [0, 48],
        "start": 584,
        "end": 632,
        "nbytes": 48,
    }


def test_bad_and_missing_files_exit_1_with_one_line_each(tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(build({"a": tensor("F32", [2], 0, 4)}, 4))
    result = run("inspect", TINY, str(bad), str(tmp_path / "missing"))
    assert result.returncode == 1
    errors = result.stderr.splitlines()
    assert len(errors) == 2
    assert errors[0].startswith(f"safetensors-header: {bad}: TensorInvalidInfo: tensor 'a'")
    assert errors[1].endswith("missing: FileNotFoundError: No such file or directory")
    assert "Traceback" not in result.stderr
    assert "position_ids" in result.stdout  # the good file is still listed


def test_usage_error_exits_2() -> None:
    assert run().returncode == 2
    assert run("frobnicate").returncode == 2


def test_names_with_control_characters_stay_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "odd.safetensors"
    path.write_bytes(build({"a\nb\x00": tensor("U8", [1], 0, 1)}, 1))
    result = run("inspect", str(path))
    assert result.returncode == 0
    assert any(line.startswith("a\\nb\\u0000") for line in result.stdout.splitlines())


def test_metadata_with_long_values_is_cut(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "long.safetensors"
    path.write_bytes(build({"__metadata__": {"k": "x" * 1000}}))
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "  k: " + "x" * 197 + "..." in out.splitlines()


def test_several_files_in_one_table_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", TINY, TINY]) == 0
    out = capsys.readouterr().out
    assert out.count(f"{TINY}: 7 tensors") == 2


def test_broken_pipe_is_quiet(tmp_path: Path) -> None:
    many = tmp_path / "many.safetensors"
    many.write_bytes(build({f"t{i}": tensor("U8", [1], i, i + 1) for i in range(20000)}, 20000))
    command = f"{sys.executable} -m safetensors_header inspect {many} | head -n 2"
    result = subprocess.run(
        command, shell=True, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.stdout.count("\n") == 2
    assert "Error" not in result.stderr
    assert "Traceback" not in result.stderr
