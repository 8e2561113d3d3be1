"""The strict audit: one finding per thing the reference accepts but should not."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import HAVE_REFERENCE, build, reference_kind, tensor

from safetensors_header import HeaderError
from safetensors_header._audit import FINDING_KINDS, audit_header

U8 = '{"dtype":"U8","shape":[1],"data_offsets":[0,1]}'


def kinds(data: bytes) -> list[str]:
    return [finding.kind for finding in audit_header(data, file_size=len(data))]


CASES = [
    pytest.param(
        build("{" + f'"a":{U8},"a":{U8}' + "}", 1, pad=True),
        ["DuplicateTensor"],
        id="DuplicateTensor",
    ),
    pytest.param(
        build('{"__metadata__":{"k":"1","k":"2"}}', pad=True),
        ["DuplicateMetadataKey"],
        id="DuplicateMetadataKey",
    ),
    pytest.param(build(" {}" + " " * 5), ["HeaderStart"], id="HeaderStart"),
    pytest.param(build("{}\n" + " " * 5), ["Padding"], id="Padding"),
    pytest.param(build("{}"), ["DataStartAlignment"], id="DataStartAlignment"),
    pytest.param(
        build({"a": tensor("U8", [1], 0, 1), "b": tensor("F32", [1], 1, 5)}, 5, pad=True),
        ["TensorAlignment"],
        id="TensorAlignment",
    ),
    pytest.param(
        build('{"a\\u0000":' + U8 + "}", 1, pad=True),
        ["ControlCharacterInName"],
        id="ControlCharacterInName",
    ),
    pytest.param(build('{"a":["U8",[1],[0,1]]}', 1, pad=True), ["ArrayForm"], id="ArrayForm"),
    pytest.param(
        build('{"a":{"dtype":{"U8":null},"shape":[1],"data_offsets":[0,1]}}', 1, pad=True),
        ["MapFormDtype"],
        id="MapFormDtype",
    ),
    pytest.param(
        build('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":[1]}}', 1, pad=True),
        ["UnknownField"],
        id="UnknownField",
    ),
]


@pytest.mark.parametrize(("data", "expected"), CASES)
def test_each_finding(data: bytes, expected: list[str]) -> None:
    assert kinds(data) == expected
    if HAVE_REFERENCE:
        assert reference_kind(data) is None  # all of these are valid files


# Found by read_checkpoint, not by audit_header: tests/test_checkpoint.py exercises them.
CHECKPOINT_KINDS = {"UnlistedTensor", "TotalSize"}


def test_every_kind_is_exercised() -> None:
    exercised = {kind for param in CASES for kind in param.values[1]}
    assert exercised | CHECKPOINT_KINDS == set(FINDING_KINDS)
    assert exercised.isdisjoint(CHECKPOINT_KINDS)


def test_kinds_are_camel_case_like_header_error_kinds() -> None:
    for kind in FINDING_KINDS:
        assert kind.isidentifier()
        assert kind[0].isupper()
        assert "_" not in kind


def test_findings_name_the_tensor() -> None:
    data = build('{"a":["U8",[1],[0,1]]}', 1, pad=True)
    (finding,) = audit_header(data)
    assert finding.tensor == "a"
    assert "array" in finding.message


def test_invalid_files_raise() -> None:
    with pytest.raises(HeaderError) as info:
        audit_header(build({"a": tensor("F32", [2], 0, 4)}, 4))
    assert info.value.kind == "TensorInvalidInfo"


@pytest.mark.skipif(not HAVE_REFERENCE, reason="the safetensors package is not installed")
@pytest.mark.parametrize("metadata", [None, {}, {"format": "pt"}], ids=["none", "empty", "one"])
def test_files_written_by_the_reference_pass(metadata: dict[str, str] | None) -> None:
    from safetensors.numpy import save

    rng = np.random.default_rng(7)
    arrays = {
        f"t{i}.{dtype}": rng.integers(0, 100, size=shape).astype(dtype)
        for i, (dtype, shape) in enumerate(
            [("u1", (3,)), ("f8", (2, 3)), ("f2", (5,)), ("i4", (1, 7)), ("?", (9,)), ("c8", ())]
        )
    }
    data = save(arrays, metadata=metadata)
    assert audit_header(data, file_size=len(data)) == []
