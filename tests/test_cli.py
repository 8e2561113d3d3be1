"""The command line, driven in a subprocess as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import build, tensor
from loopback import Site

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
    assert any(line.startswith("a\\nb\\x00 ") for line in result.stdout.splitlines())


def test_no_two_names_print_alike(tmp_path: Path) -> None:
    """A name holding ESC and one holding a backslash, 'x', '1', 'b' (its escape spelled
    out) print differently: the backslash is escaped too, in every command's rows; and
    hash's lines read back (validate --hashes) to the names in the file."""
    names = ["a\x1b", "a\\x1b", "a\\", "a\\\\", "a\n", "a\\n"]
    tensors = {name: tensor("U8", [1], i, i + 1) for i, name in enumerate(names)}
    path = tmp_path / "alike.safetensors"
    path.write_bytes(build(tensors, len(names)))
    printed = {"a\\x1b", "a\\\\x1b", "a\\\\", "a\\\\\\\\", "a\\n", "a\\\\n"}
    for command, name_of in [
        (["inspect"], lambda line: line.split()[0]),
        (["inspect", "--tree"], lambda line: line.split()[0]),
        (["hash"], lambda line: line.split("  ", 1)[1]),
    ]:
        result = run(*command, str(path))
        assert result.returncode == 0, result.stderr
        assert "\x1b" not in result.stdout
        assert "\x00" not in result.stdout
        shown = [name_of(line) for line in result.stdout.splitlines() if "a\\" in line]
        assert sorted(shown) == sorted(printed), command
    manifest = tmp_path / "alike.txt"
    manifest.write_text(run("hash", str(path)).stdout)
    result = run("validate", "--hashes", str(manifest), str(path))
    assert result.returncode == 0, result.stdout + result.stderr


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


def test_inspect_json_totals_sort_and_filter() -> None:
    result = run("inspect", "--json", "--sort", "size", "--filter", "*weight", TINY)
    document = json.loads(result.stdout)
    assert [t["name"] for t in document["tensors"]] == [
        "embed.weight",
        "layers.0.attn.q_proj.weight",
        "layers.0.mlp.up.weight",
    ]
    assert document["totals"] == {
        "tensors": 3,
        "numel": 80,
        "nbytes": 160,
        "by_dtype": {
            "F16": {"tensors": 1, "numel": 32, "nbytes": 64},
            "F32": {"tensors": 1, "numel": 16, "nbytes": 64},
            "I8": {"tensors": 1, "numel": 32, "nbytes": 32},
        },
    }


def test_inspect_sort_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--sort", "name", TINY]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("name")) + 1
    names = [line.split()[0] for line in lines[start : start + 7]]
    assert names == sorted(names)


def test_validate_lines_and_exit_status(tmp_path: Path) -> None:
    lfs = tmp_path / "lfs.safetensors"
    lfs.write_bytes(b"version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 9\n")
    result = run("validate", TINY)
    assert (result.returncode, result.stdout) == (0, f"{TINY}: ok (7 tensors)\n")
    result = run("validate", TINY, str(lfs))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[1].startswith(f"{lfs}: HeaderTooLarge: ")
    assert "git lfs pull" in lines[1]
    assert run("validate").returncode == 2


def test_validate_strict(tmp_path: Path) -> None:
    odd = tmp_path / "odd.safetensors"
    odd.write_bytes(build('{"a":["U8",[1],[0,1]],"a":["U8",[1],[0,1]]}', 1))
    result = run("validate", "--strict", TINY, str(odd))
    assert result.returncode == 1
    # Every finding is shown, each on its own line (issue 18, point 9).
    assert result.stdout.splitlines() == [
        f"{TINY}: ok (7 tensors)",
        f"{odd}: strict: 4 findings",
        f"{odd}: strict: ArrayForm: tensor 'a' is written as an array",
        f"{odd}: strict: DuplicateTensor: tensor 'a' appears again; the last wins",
        f"{odd}: strict: ArrayForm: tensor 'a' is written as an array",
        f"{odd}: strict: DataStartAlignment: the data buffer starts at byte 51, not a multiple "
        "of 8",
    ]
    assert run("validate", str(odd)).returncode == 0  # the reference accepts it


def test_validate_json(tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(build({"a": tensor("F32", [2], 0, 4)}, 4))
    result = run("validate", "--json", "--strict", TINY, str(bad), str(tmp_path / "missing"))
    assert result.returncode == 1
    good, wrong, missing = map(json.loads, result.stdout.splitlines())
    assert good == {
        "path": TINY,
        "valid": True,
        "tensors": 7,
        "error": None,
        "findings": [],
        "problems": [],
        "other_files": [],
        "hashes": None,
        "hub": None,
    }
    assert wrong["valid"] is False
    assert wrong["error"]["kind"] == "TensorInvalidInfo"
    assert wrong["error"]["tensor"] == "a"
    # An OS error's object has the keys of a HeaderError's (issue 18, point 10).
    assert missing["error"] == {
        "kind": "FileNotFoundError",
        "message": "No such file or directory",
        "hint": None,
        "tensor": None,
        "offset": None,
    }


def test_wide_names_are_cut_in_the_middle_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import io

    from safetensors_header._cli.arguments import argument_parser
    from safetensors_header._cli.inspect import inspect_sources
    from safetensors_header._cli.output import Output

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    path = tmp_path / "wide.safetensors"
    path.write_bytes(build({"a" * 150 + "b" * 150: tensor("U8", [1], 0, 1)}, 1))
    monkeypatch.setenv("COLUMNS", "80")
    stream = Terminal()
    args = argument_parser().parse_args(["inspect", str(path)])
    assert inspect_sources(args, Output(stream), Output(io.StringIO())) == 0
    row = next(line for line in stream.getvalue().splitlines() if line.startswith("aaa"))
    assert len(row) == 80
    name = row.split()[0]
    assert name.startswith("a" * 10)
    assert "…" in name
    assert name.endswith("b" * 10)  # the end, which tells such names apart, is kept


def test_inspect_and_validate_a_sharded_checkpoint(tmp_path: Path) -> None:
    from test_checkpoint import write

    index = write(tmp_path)
    result = run("inspect", str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{tmp_path}: 2 files, 4 tensors"
    assert [line.split()[0] for line in lines[4:8]] == ["embed", "l0.w", "l1.w", "head"]
    document = json.loads(run("inspect", "--json", str(index)).stdout)
    assert [f["name"] for f in document["files"]] == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    assert document["tensors"][3]["file"] == "model-00002-of-00002.safetensors"
    assert document["totals"]["nbytes"] == 51
    assert document["problems"] == []
    result = run("validate", "--strict", str(tmp_path), str(index))
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        f"{tmp_path}: ok (4 tensors)",
        f"{index}: ok (4 tensors)",
    ]
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    result = run("validate", str(tmp_path))
    assert result.returncode == 1
    assert "FileNotFoundError" in result.stdout


def test_inspect_a_url(site: Site) -> None:
    site.files["tiny.safetensors"] = Path(TINY).read_bytes()
    url = site.url("tiny.safetensors")
    result = run("inspect", "--json", url)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["file_size"] == 819
    missing = run("inspect", url.replace("tiny", "missing"))
    assert missing.returncode == 1
    assert "HTTP 404" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_totals_table_for_people(capsys: pytest.CaptureFixture[str]) -> None:
    # The text says "parameters" and "bytes"; the --json keys are numel and nbytes.
    assert main(["inspect", TINY]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "total: 7 tensors, 94 parameters, 235 bytes" in lines
    assert "dtype  tensors  parameters  bytes" in lines
    summary = lines[lines.index("dtype  tensors  parameters  bytes") + 1 : -1]
    assert lines[-1] == "(bytes in file: absolute offsets, start-end, end exclusive)"
    assert [line.split() for line in summary] == [
        ["BOOL", "1", "3", "3"],
        ["F16", "1", "32", "64"],
        ["F32", "2", "20", "80"],
        ["F64", "1", "1", "8"],
        ["I64", "1", "6", "48"],
        ["I8", "1", "32", "32"],
    ]


def test_validate_json_findings_carry_their_kind(tmp_path: Path) -> None:
    from safetensors_header.audit import FINDING_KINDS, audit_header

    odd = tmp_path / "odd.safetensors"
    odd.write_bytes(build('{"a":["U8",[1],[0,1]],"a":["U8",[1],[0,1]]}', 1))
    result = run("validate", "--json", "--strict", str(odd))
    assert result.returncode == 1
    (verdict,) = map(json.loads, result.stdout.splitlines())
    expected = audit_header(odd.read_bytes())
    assert verdict["findings"] == [
        {"kind": f.kind, "message": f.message, "tensor": f.tensor} for f in expected
    ]
    assert {finding["kind"] for finding in verdict["findings"]} <= set(FINDING_KINDS)
    assert verdict["findings"][0]["kind"] == "ArrayForm"


def test_checkpoint_problems_carry_their_kind(tmp_path: Path) -> None:
    from test_checkpoint import write

    index = write(tmp_path, metadata={"total_size": 50})
    document = json.loads(run("inspect", "--json", str(index)).stdout)
    assert [problem["kind"] for problem in document["problems"]] == ["TotalSize"]
    assert set(document["problems"][0]) == {"kind", "message", "tensor"}
    assert document["totals"]["numel"] == 19
    text = run("inspect", str(index)).stdout.splitlines()
    assert any(line.startswith("warning: TotalSize: the index's total_size is 50") for line in text)


# --- issue 18: the command line as a person uses it -----------------------------------------


def test_a_missing_shard_is_named(tmp_path: Path) -> None:
    from test_checkpoint import write

    index = write(tmp_path)
    shard = tmp_path / "model-00002-of-00002.safetensors"
    shard.unlink()
    for source in (str(tmp_path), str(index)):
        result = run("inspect", source)
        assert result.returncode == 1
        assert result.stderr.startswith(
            f"safetensors-header: {source}: FileNotFoundError: No such file or directory: {shard}."
            " Hint: the checkpoint's index names this file, but it is not there"
        )
        (document,) = map(json.loads, run("validate", "--json", source).stdout.splitlines())
        assert document["error"]["message"] == f"No such file or directory: {shard}"
        assert "Fetch every file the index lists" in document["error"]["hint"]


def test_a_directory_without_a_checkpoint_says_what_it_holds(tmp_path: Path) -> None:
    for name in ("encoder.safetensors", "decoder.safetensors", "config.json"):
        (tmp_path / name).write_bytes(Path(TINY).read_bytes())
    result = run("inspect", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr == (
        f"safetensors-header: {tmp_path}: FileNotFoundError: no model.safetensors or "
        "model.safetensors.index.json (nor the diffusers names) in the directory; it holds 2 "
        "safetensors files: decoder.safetensors, encoder.safetensors. Hint: name the files: "
        f"safetensors-header inspect {tmp_path}/*.safetensors\n"
    )
    (tmp_path / "decoder.safetensors").unlink()
    result = run("validate", str(tmp_path))
    assert result.stdout.endswith(
        f"Hint: name the file: safetensors-header validate {tmp_path}/encoder.safetensors\n"
    )
    (tmp_path / "model.fp16.safetensors.index.json").write_text("{}")
    result = run("validate", "--json", str(tmp_path))
    error = json.loads(result.stdout)["error"]
    assert "it holds the index model.fp16.safetensors.index.json" in error["message"]
    assert error["hint"] == (
        f"name the index: safetensors-header validate {tmp_path}/model.fp16.safetensors.index.json"
    )


@pytest.mark.parametrize(
    ("files", "said"),
    [
        pytest.param([], "no safetensors file in the directory (it is empty)", id="empty"),
        pytest.param(
            ["pytorch_model.bin", "config.json"],
            "no safetensors file in the directory (it holds config.json, pytorch_model.bin)",
            id="pytorch-only",
        ),
    ],
)
def test_a_directory_without_safetensors_files(tmp_path: Path, files: list[str], said: str) -> None:
    for name in files:
        (tmp_path / name).write_bytes(b"x")
    result = run("inspect", str(tmp_path))
    assert result.returncode == 1
    wanted = ": a checkpoint directory holds model.safetensors or model.safetensors.index.json"
    assert result.stderr == f"safetensors-header: {tmp_path}: FileNotFoundError: {said}{wanted}\n"


def test_files_beside_a_directory_checkpoint_are_named(tmp_path: Path) -> None:
    from test_checkpoint import write

    write(tmp_path)
    for name in ("model.safetensors", "adapter_model.safetensors"):
        (tmp_path / name).write_bytes(Path(TINY).read_bytes())
    note = "note: also in the directory, not read: adapter_model.safetensors, model.safetensors"
    assert note in run("inspect", str(tmp_path)).stdout.splitlines()
    document = json.loads(run("inspect", "--json", str(tmp_path)).stdout)
    assert document["other_files"] == ["adapter_model.safetensors", "model.safetensors"]
    result = run("validate", str(tmp_path))
    assert (result.returncode, result.stdout.splitlines()) == (
        0,
        [f"{tmp_path}: ok (4 tensors)", f"{tmp_path}: {note}"],
    )
    # The index is read (not model.safetensors), so the files beside it are named.
    (tmp_path / "model.safetensors.index.json").unlink()
    document = json.loads(run("validate", "--json", str(tmp_path)).stdout)
    assert document["tensors"] == 7
    assert document["other_files"] == [
        "adapter_model.safetensors",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]


def test_help_says_what_a_source_is_with_examples() -> None:
    top = run("--help")
    assert top.returncode == 0
    assert "examples:" in top.stdout
    for command in ("inspect", "validate", "diff"):
        result = run(command, "--help")
        assert result.returncode == 0
        assert "http(s):// URL" in " ".join(result.stdout.split())
        assert "a checkpoint (a directory, or its index .json)" in " ".join(result.stdout.split())
        assert "examples:" in result.stdout
        assert f"  safetensors-header {command} " in result.stdout
        assert "exit status:" in result.stdout


def test_version() -> None:
    from safetensors_header import __version__

    result = run("--version")
    assert (result.returncode, result.stdout) == (0, f"safetensors-header {__version__}\n")


def test_checkpoint_problems_are_warnings_unless_strict(tmp_path: Path) -> None:
    from test_checkpoint import write

    weight_map = {
        "embed": "model-00001-of-00002.safetensors",
        "l0.w": "model-00001-of-00002.safetensors",
    }
    weight_map |= {"l1.w": "model-00002-of-00002.safetensors"}  # "head" is not listed
    index = write(tmp_path, weight_map=weight_map, metadata={"total_size": 90_857_060})
    result = run("validate", str(index))
    assert result.returncode == 0  # warnings leave the exit status alone
    assert result.stdout.splitlines() == [
        f"{index}: ok (4 tensors), 2 warnings",
        f"{index}: warning: UnlistedTensor: tensor 'head' is in "
        "'model-00002-of-00002.safetensors' but not in the index's weight_map",
        f"{index}: warning: TotalSize: the index's total_size is 90857060, but the tensors "
        "hold 51 bytes",
    ]
    result = run("validate", "--strict", str(index))
    assert result.returncode == 1
    assert result.stdout.splitlines()[0] == f"{index}: strict: 2 findings"
    assert result.stdout.splitlines()[1].startswith(f"{index}: strict: UnlistedTensor: ")
    document = json.loads(run("validate", "--json", "--strict", str(index)).stdout)
    assert document["valid"] is False
    assert [p["kind"] for p in document["problems"]] == ["UnlistedTensor", "TotalSize"]
    assert document["findings"] == []
    # inspect shows the index's numbers as people read them.
    text = run("inspect", str(index)).stdout.splitlines()
    assert "  total_size: 90,857,060" in text
    assert f"{index}: 2 files, 4 tensors" in text


def test_strict_audits_every_shard(tmp_path: Path) -> None:
    from test_checkpoint import write

    write(tmp_path)
    shard = tmp_path / "model-00002-of-00002.safetensors"
    shard.write_bytes(
        build(
            '{"l1.w":["BF16",[2,2],[0,8]],"head":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}}',
            11,
            pad=True,
        )
    )
    result = run("validate", "--strict", str(tmp_path))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"{tmp_path}: strict: 1 finding",
        f"{tmp_path}: strict: ArrayForm: model-00002-of-00002.safetensors: tensor 'l1.w' is "
        "written as an array",
    ]
    assert run("validate", str(tmp_path)).returncode == 0


def test_singular_and_plural(tmp_path: Path) -> None:
    one = tmp_path / "one.safetensors"
    one.write_bytes(build({"a": tensor("U8", [1], 0, 1)}, 1))
    lines = run("inspect", str(one)).stdout.splitlines()
    assert lines[0].startswith(f"{one}: 1 tensor, header ")
    assert "total: 1 tensor, 1 parameter, 1 byte" in lines
    assert run("validate", str(one)).stdout == f"{one}: ok (1 tensor)\n"
    (tmp_path / "model.safetensors").write_bytes(one.read_bytes())
    assert run("inspect", str(tmp_path)).stdout.startswith(f"{tmp_path}: 1 file, 1 tensor\n")


def test_standard_input(tmp_path: Path) -> None:
    odd = build('{"a":["U8",[1],[0,1]]}', 1)

    def piped(*args: str, data: bytes) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "safetensors_header", *args],
            input=data,
            capture_output=True,
            timeout=60,
            check=False,
        )

    result = piped("inspect", "-", data=Path(TINY).read_bytes())
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        b"<stdin>: 7 tensors, header 576 bytes, data at 584, file unknown"
    )
    result = piped("validate", "--strict", "-", data=odd)
    assert result.returncode == 1
    assert b"<stdin>: strict: ArrayForm: tensor 'a' is written as an array" in result.stdout
    result = piped("validate", "--json", "-", TINY, data=b"GGUF" + bytes(60))
    verdict = json.loads(result.stdout.splitlines()[0])
    assert (verdict["path"], verdict["error"]["kind"]) == ("-", "HeaderTooLarge")
    assert "GGUF" in verdict["error"]["hint"]
    result = piped("inspect", "-", "-", data=b"")
    assert result.returncode == 2
    assert b"can be read only once" in result.stderr


def test_an_interrupt_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from safetensors_header._cli import validate

    def interrupted(*args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(validate, "validate_sources", interrupted)
    assert main(["validate", TINY]) == 130
    assert capsys.readouterr().err == "safetensors-header: interrupted\n"


def test_validate_strict_reads_a_url(site: Any, tmp_path: Path) -> None:
    from test_checkpoint import write

    odd = build('{"a":["U8",[1],[0,1]]}', 1, pad=True)
    site.files["tiny.safetensors"] = Path(TINY).read_bytes()
    site.files["odd.safetensors"] = odd
    write(tmp_path)
    for path in tmp_path.iterdir():
        site.files[f"ck/{path.name}"] = path.read_bytes()
    site.files["ck/model-00002-of-00002.safetensors"] = odd  # not the shard the index names
    tiny, bad = site.url("tiny.safetensors"), site.url("odd.safetensors")
    result = run("validate", "--strict", tiny, bad)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [
        f"{tiny}: ok (7 tensors)",
        f"{bad}: strict: 1 finding",
        f"{bad}: strict: ArrayForm: tensor 'a' is written as an array",
    ]
    # Only the header's bytes are asked for, with one ranged request each for the audit.
    audits = [hit for hit in site.hits if hit.path == "/odd.safetensors"][1:]
    assert [hit.range for hit in audits] == [f"bytes=0-{len(odd) - 2}"]
    index = site.url("ck/model.safetensors.index.json")
    result = run("validate", "--strict", "--json", index)
    assert result.returncode == 1
    verdict = json.loads(result.stdout)
    assert verdict["error"]["kind"] == "IndexMismatch"  # the wrong shard, found before the audit
    site.files["ck/model-00002-of-00002.safetensors"] = (
        tmp_path / "model-00002-of-00002.safetensors"
    ).read_bytes()
    result = run("validate", "--strict", index)
    assert (result.returncode, result.stdout) == (0, f"{index}: ok (4 tensors)\n")


def test_fsspec_urls(tmp_path: Path) -> None:
    pytest.importorskip("fsspec")
    from test_checkpoint import write

    index = write(tmp_path)
    url = index.as_uri()
    assert run("validate", "--strict", url).stdout == f"{url}: ok (4 tensors)\n"
    assert run("diff", url, str(tmp_path)).returncode == 0
    # Every shard is audited, read beside the index.
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(
        build(
            '{"l1.w":["BF16",[2,2],[0,8]],"head":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}}',
            11,
            pad=True,
        )
    )
    result = run("validate", "--strict", url)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [
        f"{url}: strict: 1 finding",
        f"{url}: strict: ArrayForm: model-00002-of-00002.safetensors: tensor 'l1.w' is "
        "written as an array",
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "a.safetensors", "--json", "--sort", "name", "--filter", "*.bias", "-q"],
        ["inspect", "a", "b", "--tree", "--wide", "--offsets", "--exact"],
        ["validate", "a", "--strict", "--hashes", "m.json"],
        ["hash", "a", "--algorithm", "blake2b", "--json"],
        ["diff", "a", "b", "--json", "--wide"],
    ],
)
def test_a_commands_parser_alone_reads_its_arguments_as_the_whole(argv: list[str]) -> None:
    # main() builds only the command's own arguments (a start pays for every parser made).
    from safetensors_header._cli.arguments import argument_parser

    alone = argument_parser(argv[0])
    assert vars(alone.parse_args(argv)) == vars(argument_parser().parse_args(argv))
    whole = argument_parser("--help").format_help()  # not a command: every one listed
    assert all(name in whole for name in ("inspect", "validate", "hash", "diff"))


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "m.safetensors"],
        ["inspect", "a.safetensors", "./dir", "hf://org/model", "-"],
        ["inspect", "@file", "ORG/MODEL"],
    ],
)
def test_the_quick_parse_of_inspect_is_the_parsers(argv: list[str]) -> None:
    # `inspect SOURCE...` is parsed without argparse (a first command's start): to the very
    # values argparse gives, every option's default included.
    from safetensors_header._cli.arguments import argument_parser, parsed_quickly

    quick = parsed_quickly(argv)
    assert quick is not None
    assert vars(quick) == vars(argument_parser("inspect").parse_args(argv))


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["inspect"],
        ["inspect", "--json", "m.safetensors"],
        ["inspect", "m.safetensors", "-q"],
        ["inspect", "--", "m.safetensors"],
        ["validate", "m.safetensors"],
        ["--version"],
    ],
)
def test_anything_else_is_the_parsers_to_parse(argv: list[str]) -> None:
    from safetensors_header._cli.arguments import parsed_quickly

    assert parsed_quickly(argv) is None
