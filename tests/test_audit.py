"""The strict audit: one finding per thing the reference accepts but should not."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import HAVE_REFERENCE, build, reference_kind, tensor

from safetensors_header import HeaderError
from safetensors_header._audit import FINDING_CODES, audit_header

U8 = '{"dtype":"U8","shape":[1],"data_offsets":[0,1]}'


def codes(data: bytes) -> list[str]:
    return [finding.code for finding in audit_header(data, file_size=len(data))]


CASES = [
    pytest.param(
        build("{" + f'"a":{U8},"a":{U8}' + "}", 1, pad=True),
        ["duplicate-tensor"],
        id="duplicate-tensor",
    ),
    pytest.param(
        build('{"__metadata__":{"k":"1","k":"2"}}', pad=True),
        ["duplicate-metadata-key"],
        id="duplicate-metadata-key",
    ),
    pytest.param(build(" {}" + " " * 5), ["header-start"], id="header-start"),
    pytest.param(build("{}\n" + " " * 5), ["padding"], id="padding"),
    pytest.param(build("{}"), ["data-start-alignment"], id="data-start-alignment"),
    pytest.param(
        build({"a": tensor("U8", [1], 0, 1), "b": tensor("F32", [1], 1, 5)}, 5, pad=True),
        ["tensor-alignment"],
        id="tensor-alignment",
    ),
    pytest.param(
        build('{"a\\u0000":' + U8 + "}", 1, pad=True),
        ["control-character-in-name"],
        id="control-character-in-name",
    ),
    pytest.param(build('{"a":["U8",[1],[0,1]]}', 1, pad=True), ["array-form"], id="array-form"),
    pytest.param(
        build('{"a":{"dtype":{"U8":null},"shape":[1],"data_offsets":[0,1]}}', 1, pad=True),
        ["map-form-dtype"],
        id="map-form-dtype",
    ),
    pytest.param(
        build('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":[1]}}', 1, pad=True),
        ["unknown-field"],
        id="unknown-field",
    ),
]


@pytest.mark.parametrize(("data", "expected"), CASES)
def test_each_finding(data: bytes, expected: list[str]) -> None:
    assert codes(data) == expected
    if HAVE_REFERENCE:
        assert reference_kind(data) is None  # all of these are valid files


def test_every_code_is_exercised() -> None:
    assert {code for param in CASES for code in param.values[1]} == set(FINDING_CODES)


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
