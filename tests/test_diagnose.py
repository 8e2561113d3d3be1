"""Files that are not safetensors: the reference's kind, plus a hint that says what they are."""

from __future__ import annotations

import pickle
import struct
import subprocess
import sys
import zipfile
from io import BytesIO
from pathlib import Path

import pytest
from helpers import HAVE_REFERENCE, build, reference_kind, tensor

from safetensors_header import HeaderError, parse_header, read_header


def zip_file() -> bytes:
    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    return buffer.getvalue()


def npy() -> bytes:
    """A .npy file as numpy.save writes it (what an Equinox .eqx file holds, one per leaf)."""
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"
    header += b" " * (-(10 + len(header) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + bytes(12)


def npz() -> bytes:
    """A .npz file as numpy.savez writes it: a zip of .npy members."""
    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("arr_0.npy", npy())
    return buffer.getvalue()


# The first bytes of an ONNX model exported by torch.onnx.export: ir_version 8, producer_name
# "pytorch", producer_version "2.1.0", then the graph (field 7).
ONNX = b"\x08\x08\x12\x07pytorch\x1a\x052.1.0:\xd4\x03\n\x17" + bytes(48)

LFS = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"0" * 64 + b"\nsize 4\n"

CASES = [
    pytest.param(b"", "HeaderTooSmall", "the file is empty", id="empty"),
    pytest.param(LFS, "HeaderTooLarge", "git lfs pull", id="git-lfs-pointer"),
    pytest.param(
        b"<!DOCTYPE html>\n<html><body>Sign in</body></html>",
        "HeaderTooLarge",
        "HTML or XML page",
        id="html",
    ),
    pytest.param(
        b"\n  <HTML><HEAD>" + b" " * 64, "HeaderTooLarge", "HTML or XML page", id="html-upper-case"
    ),
    pytest.param(
        b'<?xml version="1.0"?><Error><Code>AccessDenied</Code></Error>',
        "HeaderTooLarge",
        "HTML or XML page",
        id="s3-error",
    ),
    pytest.param(zip_file(), "HeaderTooLarge", "torch.save", id="torch-zip"),
    pytest.param(
        pickle.dumps({"w": [1.0] * 4}, protocol=2), "HeaderTooLarge", "pickle", id="pickle"
    ),
    pytest.param(b"GGUF\x03\x00\x00\x00" + bytes(64), "HeaderTooLarge", "GGUF", id="gguf"),
    pytest.param(
        b'{"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors"}}',
        "HeaderTooLarge",
        "weight_map",
        id="index-json",
    ),
    pytest.param(b"\x93NUMPY\x01\x00v\x00" + bytes(64), "HeaderTooLarge", "numpy.load", id="npy"),
    pytest.param(ONNX, "HeaderTooLarge", "ONNX model", id="onnx"),
    pytest.param(b"Entry not found", "HeaderTooLarge", "'Entry not found'", id="text-error-page"),
    pytest.param(
        b"model_type: bert\nhidden_size: 384\n", "HeaderTooLarge", "text file", id="text-yaml"
    ),
    pytest.param(b"hello", "HeaderTooSmall", "text file", id="text-short"),
    pytest.param(
        "caf\u00e9 \u00e9t\u00e9 ".encode() * 6 + "\u00e9".encode()[:1],
        "HeaderTooLarge",
        "text file",
        id="text-utf8-cut-in-a-character",
    ),
    pytest.param(npy() + npy(), "HeaderTooLarge", "Equinox", id="eqx"),
    pytest.param(npz(), "HeaderTooLarge", ".npz archive", id="npz"),
    pytest.param(
        b"\x1c\x00\x00\x00TFL3" + bytes(64), "HeaderTooLarge", "TensorFlow Lite", id="tflite"
    ),
    pytest.param(
        build({"a": tensor("U8", [100], 0, 100)}, 100)[:-30],
        "MetadataIncompleteBuffer",
        "interrupted download",  # the message says "30 bytes short"; the hint does not again
        id="truncated-data",
    ),
    pytest.param(
        build({"a": tensor("U8", [1], 0, 1)}, 1)[:30],
        "InvalidHeaderLength",
        "shorter than it says",
        id="truncated-header",
    ),
]


@pytest.mark.parametrize(("data", "kind", "phrase"), CASES)
def test_hint(data: bytes, kind: str, phrase: str) -> None:
    with pytest.raises(HeaderError) as info:
        read_header(data)
    error = info.value
    assert error.kind == kind
    assert error.hint is not None
    assert phrase in error.hint
    assert str(error) == f"{error.message}. Hint: {error.hint}"
    if HAVE_REFERENCE:
        assert reference_kind(data) == kind


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(struct.pack("<Q", 10**9) + bytes(8), id="huge-binary-length"),
        pytest.param(build({"a": tensor("U8", [1], 0, 2)}, 2), id="bad-size"),
        pytest.param(build({"a": tensor("U8", [1], 0, 1)}, 2), id="trailing-byte"),
        pytest.param(b"\x08\x07\x12\x07\x00\x00\x00\x00" + bytes(64), id="binary-not-text"),
    ],
)
def test_no_hint_when_nothing_is_recognised(data: bytes) -> None:
    with pytest.raises(HeaderError) as info:
        read_header(data)
    assert info.value.hint is None
    assert "Hint" not in str(info.value)


def test_a_truncated_file_that_starts_like_onnx_is_called_truncated() -> None:
    # A header length of 0x120708 bytes (1.2 MB) starts like an ONNX file (08 07 12), but its
    # bytes 4-7 are zero where an ONNX file has its producer's name.
    with pytest.raises(HeaderError) as info:
        read_header(b"\x08\x07\x12\x00\x00\x00\x00\x00{}")
    assert info.value.kind == "InvalidHeaderLength"
    assert info.value.hint is not None
    assert "ONNX" not in info.value.hint
    assert "shorter than it says" in info.value.hint


def test_a_truncated_data_buffer_states_its_shortfall_once() -> None:
    data = build({"a": tensor("U8", [100], 0, 100)}, 100)[:-30]
    with pytest.raises(HeaderError) as info:
        parse_header(data, file_size=len(data))
    error = info.value
    assert "it ends 30 bytes short" in str(error)
    assert error.hint is not None
    assert "30" not in error.hint


_HTML = b"<!DOCTYPE html>\n<html><body>Sign in</body></html>"


@pytest.mark.parametrize(
    ("data", "diagnosis"),
    [
        pytest.param(_HTML, "this is an HTML or XML page", id="html"),
        pytest.param(LFS, "this is a Git LFS pointer file", id="git-lfs-pointer"),
    ],
)
def test_validate_says_what_the_file_is_right_after_its_kind(
    tmp_path: Path, data: bytes, diagnosis: str
) -> None:
    # `PATH: KIND:` stays for scripts; then what the file is and what to do, the numbers last.
    path = tmp_path / "model.safetensors"
    path.write_bytes(data)
    with pytest.raises(HeaderError) as info:
        read_header(path)
    error = info.value
    assert error.hint is not None
    assert error.hint.startswith(diagnosis)
    result = subprocess.run(
        [sys.executable, "-m", "safetensors_header", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout == f"{path}: HeaderTooLarge: {error.hint} ({error.message})\n"
    assert result.stdout.index(diagnosis) < result.stdout.index("the header length is")
