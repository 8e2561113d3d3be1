"""Files that are not safetensors: the reference's kind, plus a hint that says what they are."""

from __future__ import annotations

import pickle
import struct
import zipfile
from io import BytesIO

import pytest
from helpers import HAVE_REFERENCE, build, reference_kind, tensor

from safetensors_header import HeaderError, read_header


def zip_file() -> bytes:
    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    return buffer.getvalue()


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
    pytest.param(
        build({"a": tensor("U8", [100], 0, 100)}, 100)[:-30],
        "MetadataIncompleteBuffer",
        "30 bytes shorter",
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
    ],
)
def test_no_hint_when_nothing_is_recognised(data: bytes) -> None:
    with pytest.raises(HeaderError) as info:
        read_header(data)
    assert info.value.hint is None
    assert "Hint" not in str(info.value)
