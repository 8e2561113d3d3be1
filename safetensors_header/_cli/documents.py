"""The ``--json`` objects the commands share (their schema is in docs/cli.md).

Layer: adapters (the command line).
"""

from __future__ import annotations

from collections.abc import Iterable

from .._core.header import TensorInfo, by_dtype

__all__ = ["finding_document", "tensor_document", "totals"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any

    from .._audit import Finding


def tensor_document(t: TensorInfo) -> dict[str, object]:
    return {
        "name": t.name,
        "dtype": t.dtype,
        "shape": list(t.shape),
        "data_offsets": list(t.data_offsets),
        "start": t.start,
        "end": t.end,
        "nbytes": t.nbytes,
    }


def finding_document(finding: Finding) -> dict[str, object]:
    return {"kind": finding.kind, "message": finding.message, "tensor": finding.tensor}


def totals(tensors: Iterable[TensorInfo]) -> dict[str, Any]:
    """The --json "totals": counts, elements and bytes, in all and per dtype."""

    per_dtype = {
        dtype: {"tensors": total.tensors, "numel": total.numel, "nbytes": total.nbytes}
        for dtype, total in by_dtype(tensors).items()
    }
    return {
        "tensors": sum(row["tensors"] for row in per_dtype.values()),
        "numel": sum(row["numel"] for row in per_dtype.values()),
        "nbytes": sum(row["nbytes"] for row in per_dtype.values()),
        "by_dtype": per_dtype,
    }
