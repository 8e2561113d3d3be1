"""The core vendored: `safetensors_header/_core/` copied into another package, as a reader that
embeds the parser would copy it (docs/embedding.md), runs with `safetensors_header` itself
unimportable, and judges every conformance case of docs/format.md as the reference does.

The copy runs in a fresh interpreter (``-I``: no PYTHONPATH, no user site) whose
``sys.modules["safetensors_header"]`` is None, so that any import of the package, direct or
through a module of the copy, fails there.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import build, reference_header, tensor
from test_rules import RULES

import safetensors_header

CORE = Path(safetensors_header.__file__).parent / "_core"
DATA = Path(__file__).parent / "data" / "tiny.safetensors"

# A script the copy runs: each case's verdict through the copy, as JSON on stdout.
_RUN = """
import json, pickle, sys
sys.modules["safetensors_header"] = None  # the package itself: not importable here
sys.path.insert(0, sys.argv[1])
from some_reader._vendor.stcore import (
    HeaderError, Header, KINDS, bytes_needed, parse_header, read_header
)
cases = json.loads(open(sys.argv[2]).read())
out = {}
for name, hexdata in cases.items():
    data = bytes.fromhex(hexdata)
    try:
        header = parse_header(data, file_size=len(data))
    except HeaderError as error:
        assert error.kind in KINDS
        out[name] = {"kind": error.kind}
    else:
        out[name] = {
            "tensors": {
                t.name: [t.dtype, list(t.shape), t.start, t.end]
                for t in header.tensors.values()
            },
            "metadata": None if header.metadata is None else dict(header.metadata),
            "needed": bytes_needed(data[:8], file_size=len(data)),
        }
tiny = read_header(sys.argv[3])
again = pickle.loads(pickle.dumps(tiny))
out["<read_header>"] = {
    "tensors": len(tiny.tensors),
    "equal after a pickle": again == tiny,
    "module": type(tiny).__module__,
}
loaded = sorted(name for name, module in sys.modules.items() if module is not None)
out["<modules>"] = [name for name in loaded if name.split(".")[0] == "safetensors_header"]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The core's folder copied as some_reader/_vendor/stcore/, nothing else of the package."""
    root = tmp_path_factory.mktemp("vendored")
    package = root / "some_reader"
    (package / "_vendor").mkdir(parents=True)
    (package / "__init__.py").write_text('"""A reader that embeds the parser."""\n')
    (package / "_vendor" / "__init__.py").write_text("")
    shutil.copytree(CORE, package / "_vendor" / "stcore", ignore=shutil.ignore_patterns("__py*"))
    return root


def _run_copy(copy: Path, cases: dict[str, bytes]) -> dict[str, Any]:
    where = copy / "cases.json"
    where.write_text(json.dumps({name: data.hex() for name, data in cases.items()}))
    done = subprocess.run(
        [sys.executable, "-I", "-c", _RUN, str(copy), str(where), str(DATA)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=copy,
        env={key: value for key, value in os.environ.items() if not key.startswith("PYTHON")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_copy_imports_only_itself_and_the_standard_library(copy: Path) -> None:
    result = _run_copy(copy, {})
    assert result["<modules>"] == []
    assert result["<read_header>"] == {
        "tensors": len(safetensors_header.read_header(DATA).tensors),
        "equal after a pickle": True,
        "module": "some_reader._vendor.stcore",  # where the copy's records say they live
    }
    assert not list((copy / "some_reader" / "_vendor" / "stcore").glob("*.so"))


def test_the_copy_gives_the_references_verdict_on_every_conformance_case(copy: Path) -> None:
    """Every case of docs/format.md (tests/test_rules.py): accepted or refused as the
    reference does, with its error kind; an accepted file's tensors at the reference's bytes."""
    cases = {rule.id: rule.data for rule in RULES}
    # And files of every dtype, the metadata, and a header longer than a first read.
    long = {f"t{i}": tensor("F32", [2], 8 * i, 8 * i + 8) for i in range(3000)}
    cases["long header"] = build({"__metadata__": {"k": "v"}, **long}, 8 * 3000)
    result = _run_copy(copy, cases)
    for rule in RULES:
        got = result[rule.id]
        if rule.expected is None:
            assert "tensors" in got, (rule.id, got)
        else:
            expected = rule.expected if isinstance(rule.expected, tuple) else (rule.expected,)
            assert got.get("kind") in expected, (rule.id, got)
    for name, data in cases.items():
        got = result[name]
        mine = _verdict(data)
        assert got.get("kind") == mine.get("kind") or name in _RANDOM_KINDS, name
        if "tensors" not in got:
            continue
        assert got["tensors"] == mine["tensors"], name
        reference = reference_header(data)
        assert set(got["tensors"]) == set(reference), name
        for tensor_name, (dtype, shape, start, end) in got["tensors"].items():
            assert (dtype, tuple(shape), data[start:end]) == reference[tensor_name], name
        assert got["metadata"] == mine["metadata"], name


_RANDOM_KINDS = {rule.id for rule in RULES if isinstance(rule.expected, tuple)}


def _verdict(data: bytes) -> dict[str, Any]:
    """The package's own verdict on a whole file, in the copy's terms."""
    try:
        header = safetensors_header.parse_header(data, file_size=len(data))
    except safetensors_header.HeaderError as error:
        return {"kind": error.kind}
    return {
        "tensors": {
            t.name: [t.dtype, list(t.shape), t.start, t.end] for t in header.tensors.values()
        },
        "metadata": None if header.metadata is None else dict(header.metadata),
    }


def test_the_core_is_a_folder_a_reader_can_take_whole() -> None:
    """What docs/embedding.md promises: one folder of Python files, small enough to read (at
    most 3,000 lines), and its records pickled by the package's public names here."""
    assert not [path for path in CORE.iterdir() if path.suffix not in (".py", "")]
    lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in CORE.glob("*.py"))
    assert lines <= 3000, f"the core is {lines:,} lines"
    header = safetensors_header.read_header(DATA)
    assert type(header).__module__ == "safetensors_header"
    assert pickle.loads(pickle.dumps(header)) == header


def test_the_cores_read_header_of_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The core's own reader of a local path: a header in its first read, a longer one read on
    (its prefix says how far), and a file cut short while it is read (judged as it is)."""
    from safetensors_header import _core

    small = tmp_path / "small.safetensors"
    small.write_bytes(build({"a": tensor("U8", [4], 0, 4)}, 4))
    assert _core.read_header(small) == safetensors_header.read_header(small)
    long = tmp_path / "long.safetensors"
    tensors = {f"t{i:05}": tensor("F32", [2], 8 * i, 8 * i + 8) for i in range(3000)}
    long.write_bytes(build(tensors, 8 * 3000))
    header = _core.read_header(str(long), max_header_size=10**6)
    assert header == safetensors_header.read_header(long)
    assert header.header_size > 16 * 1024
    with pytest.raises(_core.HeaderError) as caught:
        _core.read_header(long, max_header_size=1000)
    assert caught.value.kind == "HeaderTooLarge"
    # The file shorter than its stat said (cut while read): its bytes judged as they are.
    real_fstat = os.fstat

    def larger(descriptor: int) -> os.stat_result:
        found = real_fstat(descriptor)
        values = list(found)
        values[6] = found.st_size + 10**6  # st_size
        return os.stat_result(values)

    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(long.read_bytes()[:20_000])
    monkeypatch.setattr(os, "fstat", larger)
    with pytest.raises(_core.HeaderError) as caught:
        _core.read_header(cut)
    assert caught.value.kind == "InvalidHeaderLength"


def test_the_documented_commands_copy_and_update_the_folder(tmp_path: Path) -> None:
    # docs/embedding.md's shell blocks, run as written from a folder holding the package:
    # the copy, then the update over it (a copy onto the old folder would nest the new one).
    import re

    if shutil.which("bash") is None:
        pytest.skip("no bash here")
    page = (Path(__file__).parents[1] / "docs" / "embedding.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", page, flags=re.DOTALL)
    assert len(blocks) == 2  # copy, update
    shutil.copytree(CORE, tmp_path / "safetensors_header" / "_core")
    (tmp_path / "safetensors_header" / "_core" / "__pycache__").mkdir(exist_ok=True)
    stcore = tmp_path / "your_reader" / "_vendor" / "stcore"
    for script in blocks:
        for line in script.splitlines():  # the indented block of a list item too
            subprocess.run(["bash", "-c", line.strip()], cwd=tmp_path, check=True)
        copied = sorted(path.relative_to(stcore) for path in stcore.rglob("*"))
        assert copied == sorted(Path(path.name) for path in CORE.glob("*.py"))
