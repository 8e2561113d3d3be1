"""An opt-in strict audit: what the reference accepts but a careful reader should not.

Layer: core (sans-IO).
"""

from __future__ import annotations

from collections import Counter
from types import MappingProxyType
from typing import Final

from ._core.fileformat import (
    DTYPE_BITS,
    HEADER_LENGTH_SIZE,
    MAX_HEADER_SIZE,
    METADATA_KEY,
    TENSOR_FIELDS,
)
from ._core.header import Header
from ._core.parse import JsonObject, decode_pairs, parse_header
from ._core.records import frozen_record, set_fields

__all__ = ["FINDING_KINDS", "Finding", "audit_header"]

#: Every `Finding.kind`, with what it means: those of `audit_header`, then those of
#: ``Checkpoint.problems``.
FINDING_KINDS: Final = MappingProxyType(
    {
        "DuplicateTensor": "a tensor name appears more than once; readers disagree on which wins",
        "DuplicateMetadataKey": "a __metadata__ key appears more than once",
        "HeaderStart": "the header does not start with '{' (whitespace before the JSON object)",
        "Padding": "the header is padded with something other than spaces after the JSON object",
        "DataStartAlignment": "the data buffer does not start at a multiple of 8 bytes",
        "TensorAlignment": "a tensor does not start at a multiple of its element size",
        "ControlCharacterInName": "a tensor name holds NUL or another control character",
        "ArrayForm": "a tensor entry is a [dtype, shape, data_offsets] array, not an object",
        "MapFormDtype": 'a dtype is written as {"F32": null}, not as a string',
        "UnknownField": "a tensor entry has a field other than dtype, shape and data_offsets",
        "UnlistedTensor": "a checkpoint's shard holds a tensor its index's weight_map omits",
        "TotalSize": "a checkpoint index's total_size is not the sum of its tensors' bytes",
    }
)

_SHOWN_MESSAGE: Final = 80  # characters of a message a repr shows


@frozen_record(module="safetensors_header.audit")
class Finding:
    """One thing the strict audit (or a checkpoint's consistency check) reports.

    Attributes:
        kind: A stable name for what was found, a key of `FINDING_KINDS` (CamelCase, as
            ``HeaderError.kind``), e.g. ``"DuplicateTensor"``.
        message: What was found, for people.
        tensor: The tensor concerned, where there is one, else ``None``.
    """

    __slots__ = ("kind", "message", "tensor")

    kind: str
    message: str
    tensor: str | None

    def __init__(self, kind: str, message: str, tensor: str | None = None) -> None:
        set_fields(self, Finding, (kind, message, tensor))

    def __repr__(self) -> str:
        message = self.message
        if len(message) > _SHOWN_MESSAGE:
            message = message[: _SHOWN_MESSAGE - 3] + "..."
        return f"<Finding {self.kind}: {message}>"


def audit_header(
    prefix: bytes | bytearray | memoryview,
    /,
    *,
    file_size: int | None = None,
    max_header_size: int = MAX_HEADER_SIZE,
) -> list[Finding]:
    """Audit a valid safetensors header for what the reference accepts but should not.

    Takes the same input as `parse_header` and first validates it the same way (an invalid
    file raises `HeaderError`). Returns the findings in header order; a file written by the
    reference implementation has none.
    """
    header = parse_header(prefix, file_size=file_size, max_header_size=max_header_size)
    with memoryview(prefix) as raw, raw.cast("B") as view:
        text = str(view[HEADER_LENGTH_SIZE : header.data_start], "utf-8")
    findings: list[Finding] = []
    # A valid header's JSON object is its first '{': only JSON whitespace comes before it.
    start = text.index("{")
    if start:
        findings.append(
            Finding("HeaderStart", f"the header starts with {text[:start]!r}, not '{{'")
        )
    top, end = decode_pairs(text, start)
    padding = text[end:]
    if padding.strip(" "):
        shown = sorted(set(padding) - {" "})
        findings.append(Finding("Padding", f"the header is padded with {shown} besides spaces"))
    findings += _entry_findings(top)
    findings += _alignment_findings(header)
    return findings


def _entry_findings(top: JsonObject) -> list[Finding]:
    findings: list[Finding] = []
    seen: set[str] = set()
    for name, value in top:
        if name == METADATA_KEY:
            if value is not None:
                counts = Counter(key for key, _ in value)
                findings.extend(
                    Finding("DuplicateMetadataKey", f"metadata key {key!r} is repeated")
                    for key in sorted(key for key, count in counts.items() if count > 1)
                )
            continue
        if name in seen:
            findings.append(
                Finding("DuplicateTensor", f"tensor {name!r} appears again; the last wins", name)
            )
        seen.add(name)
        if any(ord(char) < 0x20 or char == "\x7f" for char in name):
            findings.append(Finding("ControlCharacterInName", f"tensor name {name!r}", name))
        if type(value) is list:
            findings.append(Finding("ArrayForm", f"tensor {name!r} is written as an array", name))
            dtype = value[0]
        else:
            fields = dict(value)
            findings.extend(
                Finding("UnknownField", f"tensor {name!r} has the field {key!r}", name)
                for key in sorted(set(fields) - set(TENSOR_FIELDS))
            )
            dtype = fields["dtype"]
        if type(dtype) is JsonObject:
            findings.append(
                Finding("MapFormDtype", f"tensor {name!r} writes its dtype as an object", name)
            )
    return findings


def _alignment_findings(header: Header) -> list[Finding]:
    findings: list[Finding] = []
    if header.data_start % 8:
        findings.append(
            Finding(
                "DataStartAlignment",
                f"the data buffer starts at byte {header.data_start:,}, not a multiple of 8",
            )
        )
    for info in header.tensors.values():
        size = DTYPE_BITS[info.dtype] // 8
        if size > 1 and info.start % size and info.nbytes:
            findings.append(
                Finding(
                    "TensorAlignment",
                    f"tensor {info.name!r} ({info.dtype}) starts at byte {info.start:,}, "
                    f"not a multiple of {size}",
                    info.name,
                )
            )
    return findings
