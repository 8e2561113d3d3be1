"""``diff --values``: which tensors' values changed between two sources, and by how much.

Layer: adapters (the command line).

Each side's tensors are hashed once (`hash_tensors`, through the data path: any source), so
that a tensor whose bytes are the same on both sides costs one digest a side and nothing
more. Only for the tensors whose digests differ, and only with ``--stats``, are both sides
read again, a chunk at a time (`_CHUNK_ELEMENTS` a side: memory does not grow with the tensor),
and compared element by element with numpy.
"""

from __future__ import annotations

import math

from .._core.fileformat import DTYPE_BITS
from .reading import Failure, Read, failure_from, failure_of

__all__ = ["ALGORITHM", "SideFailure", "ValueChange", "changed_values", "statistics_need"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, Final


# Elements of each side read and compared at a time: with their float64 copies (8 MiB each)
# a few tens of MiB in all, whatever the tensor's size or dtype.
_CHUNK_ELEMENTS: Final = 1 << 20
ALGORITHM: Final = "sha256"  # the digests compared: hash's default, so that they can be checked
# The dtypes numpy reads without ml_dtypes (BF16 is widened to F32 here, by its bits).
_PLAIN: Final = {
    "BOOL": "|b1",
    "U8": "|u1",
    "I8": "|i1",
    "U16": "<u2",
    "I16": "<i2",
    "U32": "<u4",
    "I32": "<i4",
    "U64": "<u8",
    "I64": "<i8",
    "F16": "<f2",
    "F32": "<f4",
    "F64": "<f8",
}


class SideFailure(Exception):
    """One side's tensors cannot be read: which side (its source as given), and why."""

    def __init__(self, source: str, failure: Failure) -> None:
        super().__init__(source)
        self.source, self.failure = source, failure


class ValueChange:
    """A tensor whose bytes differ between A and B: its digests and, with ``--stats``, how
    much its values differ (`statistics`)."""

    def __init__(self, name: str, a: str, b: str) -> None:
        self.name, self.a, self.b = name, a, b
        self.statistics: dict[str, Any] | None = None
        self.why_none: str | None = None  # why there are no statistics, when asked for

    def document(self) -> dict[str, object]:
        """The ``--json`` object of the change (docs/cli.md lists its keys)."""
        document = {"name": self.name, "a": self.a, "b": self.b}
        return {**document, "statistics": self.statistics, "note": self.why_none}


def statistics_need() -> str | None:
    """Why ``--stats`` cannot be computed here (numpy is missing), or None."""
    import importlib.util

    if importlib.util.find_spec("numpy") is None:
        return (
            "--stats needs numpy, which is not installed: pip install 'safetensors_header[numpy]'"
        )
    return None


def changed_values(
    a: Read,
    b: Read,
    names: Sequence[str],
    *,
    statistics: bool,
    progress: Callable[[int, int], object] | None = None,
) -> list[ValueChange]:
    """The tensors of `names` (in both, with the same dtype and shape) whose bytes differ,
    in that order; `SideFailure` says which side cannot be read, and why."""
    from .hash import hashes_of

    def digests_of(side: Read) -> Mapping[str, str]:
        try:
            return hashes_of(side, ALGORITHM, progress=progress).tensors
        except Failure as failure:
            raise SideFailure(side.source, failure) from None

    digests = [digests_of(a), digests_of(b)]
    changes = [
        ValueChange(name, digests[0][name], digests[1][name])
        for name in names
        if digests[0][name] != digests[1][name]
    ]
    if statistics:
        for change in changes:
            found = _statistics(_Side(a, change.name), _Side(b, change.name))
            if isinstance(found, str):
                change.why_none = found
            else:
                change.statistics = found
    return changes


class _Side:
    """One side's tensor: its record, and its bytes a range at a time (`Failure` says why
    they cannot be read, naming that side's source)."""

    def __init__(self, read: Read, name: str) -> None:
        self.read, self.info = read, read.tensors[name]
        if read.checkpoint is not None:
            self.file = read.checkpoint.shards[read.checkpoint.weight_map[name]]
        else:
            assert read.file is not None  # (standard input: hashing has refused it already)
            self.file = read.file

    def bytes(self, at: int, length: int) -> memoryview:
        from .._errors import HeaderError

        try:
            (chunk,) = self.file.read_ranges([(self.info.start + at, length)])
        except (HeaderError, OSError) as error:
            raise SideFailure(self.read.source, failure_of(error, self.read.source)) from None
        except ValueError as error:
            raise SideFailure(self.read.source, failure_from(error)) from None
        return chunk


def _statistics(side_a: _Side, side_b: _Side) -> dict[str, Any] | str:
    """How the values of one tensor differ, A's bytes against B's (same dtype and shape),
    read `_CHUNK_ELEMENTS` at a time; or why that cannot be told (a text)."""
    import numpy as np

    info = side_a.info
    bits = DTYPE_BITS[info.dtype]
    if bits % 8:
        return f"{info.dtype} packs several values a byte: not compared element by element"
    size = bits // 8
    values = _values_of(info.dtype)
    if values is None:
        return f"{info.dtype} needs ml_dtypes: pip install 'safetensors_header[ml-dtypes]'"
    raw = np.dtype(f"<u{size}" if size > 1 else "|u1")
    step = _CHUNK_ELEMENTS * size
    # Integers are subtracted exactly (as Python ints: an I64's 2**60 + 1 and 2**60 differ by
    # 1, which float64 cannot tell); floats as float64.
    integer = _PLAIN.get(info.dtype) if info.dtype[0] in "IUB" else None
    differing = nonfinite = 0
    largest_difference: float | int = 0
    largest_a = 0.0
    measured = False  # whether two finite values that differ were met
    for at in range(0, info.nbytes, step):
        length = min(step, info.nbytes - at)
        chunk_a, chunk_b = side_a.bytes(at, length), side_b.bytes(at, length)
        bits_a, bits_b = np.frombuffer(chunk_a, raw), np.frombuffer(chunk_b, raw)
        changed = bits_a != bits_b
        differing += int(np.count_nonzero(changed))
        value_a, value_b = values(chunk_a), values(chunk_b)
        finite_a = np.isfinite(value_a)
        if finite_a.any():
            largest_a = max(largest_a, float(np.max(np.abs(value_a[finite_a]))))
        both = changed & finite_a & np.isfinite(value_b)
        nonfinite += int(np.count_nonzero(changed & ~both))
        if both.any():
            measured = True
            if integer is not None:
                exact_a = np.frombuffer(chunk_a, integer)[both].astype(object)
                exact_b = np.frombuffer(chunk_b, integer)[both].astype(object)
                difference: float | int = int(max(abs(exact_b - exact_a)))
            else:
                with np.errstate(over="ignore"):
                    difference = float(np.max(np.abs(value_b[both] - value_a[both])))
            largest_difference = max(largest_difference, difference)
        del chunk_a, chunk_b
    # None where nothing could be measured: no two finite values that differ (only NaN or
    # infinity changed), or finite values further apart than a float64 holds.
    finite = measured and math.isfinite(largest_difference)
    relative = largest_difference / largest_a if finite and largest_a > 0 else None
    return {
        "elements": info.numel,
        "differing": differing,
        "nonfinite": nonfinite,
        "max_abs_diff": largest_difference if finite else None,
        "max_rel_diff": relative if relative is None or math.isfinite(relative) else None,
    }


def _values_of(dtype: str) -> Callable[[memoryview], Any] | None:
    """What makes a chunk's bytes float64 values (None: the dtype needs ml_dtypes, absent)."""
    import numpy as np

    if dtype == "BF16":  # the upper half of an F32: no ml_dtypes needed

        def bf16(chunk: memoryview) -> Any:
            widened = np.frombuffer(chunk, "<u2").astype("<u4") << 16
            return widened.view("<f4").astype(np.float64)

        return bf16
    plain = _PLAIN.get(dtype)
    if plain is not None:
        return lambda chunk: np.frombuffer(chunk, plain).astype(np.float64)
    from .._core.fileformat import DTYPES

    name = DTYPES[dtype].ml_dtypes
    try:
        import ml_dtypes
    except ImportError:
        return None
    kind = getattr(ml_dtypes, name or "", None)
    if kind is None:
        return None
    return lambda chunk: np.frombuffer(chunk, kind).astype(np.float64)
