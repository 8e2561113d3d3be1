"""`DtypeTotal` and `by_dtype`: a header's or a checkpoint's tensors totalled per dtype.

Layer: core (sans-IO).
"""

from __future__ import annotations

from ._core.records import frozen_record, set_fields

__all__ = ["DtypeTotal", "by_dtype"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._core.header import TensorInfo


@frozen_record()
class DtypeTotal:
    """The tensors of one dtype: how many, their elements (`numel`) and bytes (`nbytes`)."""

    __slots__ = ("tensors", "numel", "nbytes")  # noqa: RUF023 - the fields, in order

    tensors: int
    numel: int
    nbytes: int

    def __init__(self, tensors: int, numel: int, nbytes: int) -> None:
        set_fields(self, DtypeTotal, (tensors, numel, nbytes))

    def __repr__(self) -> str:
        return (
            f"<DtypeTotal {self.tensors:,} tensor{'' if self.tensors == 1 else 's'}, "
            f"numel={self.numel:,}, nbytes={self.nbytes:,}>"
        )


def by_dtype(tensors: Iterable[TensorInfo], /) -> dict[str, DtypeTotal]:
    """Totals per dtype of the given tensors, in order of the dtypes' names."""
    totals: dict[str, list[int]] = {}
    for info in tensors:
        row = totals.get(info.dtype)
        if row is None:
            row = totals[info.dtype] = [0, 0, 0]
        row[0] += 1
        row[1] += info.numel
        row[2] += info.nbytes
    return {dtype: DtypeTotal(*totals[dtype]) for dtype in sorted(totals)}
