"""The format in one place: its layout constants, its dtypes, and where a header ends.

Layer: core (sans-IO). docs/format.md states these facts in words (§1.4 in a comment is its
§1.4). `bytes_needed`, sans-IO as h11's "need data", is the first step of reading any
source: from a file's first bytes, how many bytes from offset 0 the header occupies, or that
more are needed to tell, or the verdict the length prefix alone decides.
"""

from __future__ import annotations

from types import MappingProxyType

from .diagnose import SNIFF_SIZE, sniff, truncation_hint
from .errors import HeaderError

__all__ = ["DTYPES", "DTYPE_BITS", "HEADER_LENGTH_SIZE", "MAX_HEADER_SIZE", "METADATA_KEY"]
__all__ += ["TENSOR_FIELDS", "U64_MAX", "Dtype", "bytes_needed", "length_fault"]
__all__ += ["header_end", "header_length", "header_past_the_end", "header_too_large"]
__all__ += ["header_too_small"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Final, TypeAlias

    #: What the sans-IO functions read: any buffer of bytes (an mmap too).
    Buffer: TypeAlias = bytes | bytearray | memoryview

HEADER_LENGTH_SIZE: Final = 8  # the little-endian u64 N that opens every file (§1.1)
MAX_HEADER_SIZE: Final = 100_000_000  # the reference's MAX_HEADER_SIZE, inclusive (§1.4)
U64_MAX: Final = 2**64 - 1  # offsets, dimensions and sizes are u64 (usize) in the reference
METADATA_KEY: Final = "__metadata__"  # the top-level key of the metadata map (§4.2)
TENSOR_FIELDS: Final = ("dtype", "shape", "data_offsets")  # a tensor entry's fields (§4.5)


class Dtype:
    """One safetensors dtype and what it is called elsewhere.

    Attributes:
        name: The name in the header, e.g. ``"BF16"`` (exact, case-sensitive).
        bits: Bits per element: 4 for ``F4``, 6 for ``F6_*``, else a whole number of bytes.
            Sub-byte types are packed, so a tensor's bit count must be a multiple of 8.
        numpy: The little-endian numpy type string (``"<f4"``), or ``None`` where numpy has
            no such type (BF16, F8, F4, F6).
        ml_dtypes: The ``ml_dtypes`` type that stands in for numpy's (``"bfloat16"``), or
            ``None``.
    """

    __slots__ = ("bits", "ml_dtypes", "name", "numpy")

    name: str
    bits: int
    numpy: str | None
    ml_dtypes: str | None

    def __init__(self, name: str, bits: int, numpy: str | None, ml_dtypes: str | None) -> None:
        for attribute, value in (
            ("name", name),
            ("bits", bits),
            ("numpy", numpy),
            ("ml_dtypes", ml_dtypes),
        ):
            object.__setattr__(self, attribute, value)

    @property
    def packed(self) -> bool:
        """Whether several values share a byte (``F4``, ``F6_*``)."""
        return self.bits % 8 != 0

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Dtype is immutable: cannot set {name!r}")

    def __repr__(self) -> str:
        return f"<Dtype {self.name}: {self.bits} bits>"

    def __reduce__(self) -> tuple[object, ...]:
        return (_dtype_named, (self.name,))


#: Every dtype the reference accepts, by name, in its enum order (``BOOL`` first, ``U64``
#: last), which is also the order its writer sorts by (§2.1, §7.1).
DTYPES: Final[Mapping[str, Dtype]] = MappingProxyType(
    {
        dtype.name: dtype
        for dtype in (
            Dtype("BOOL", 8, "|b1", None),
            Dtype("F4", 4, None, None),
            Dtype("F6_E2M3", 6, None, None),
            Dtype("F6_E3M2", 6, None, None),
            Dtype("U8", 8, "|u1", None),
            Dtype("I8", 8, "|i1", None),
            Dtype("F8_E5M2", 8, None, "float8_e5m2"),
            Dtype("F8_E4M3", 8, None, "float8_e4m3fn"),
            Dtype("F8_E8M0", 8, None, "float8_e8m0fnu"),
            Dtype("F8_E4M3FNUZ", 8, None, "float8_e4m3fnuz"),
            Dtype("F8_E5M2FNUZ", 8, None, "float8_e5m2fnuz"),
            Dtype("I16", 16, "<i2", None),
            Dtype("U16", 16, "<u2", None),
            Dtype("F16", 16, "<f2", None),
            Dtype("BF16", 16, None, "bfloat16"),
            Dtype("I32", 32, "<i4", None),
            Dtype("U32", 32, "<u4", None),
            Dtype("F32", 32, "<f4", None),
            Dtype("C64", 64, "<c8", None),
            Dtype("F64", 64, "<f8", None),
            Dtype("I64", 64, "<i8", None),
            Dtype("U64", 64, "<u8", None),
        )
    }
)

#: Every dtype name mapped to its size in bits, in the reference's enum order.
DTYPE_BITS: Final[Mapping[str, int]] = MappingProxyType(
    {name: dtype.bits for name, dtype in DTYPES.items()}
)


def _dtype_named(name: str) -> Dtype:
    return DTYPES[name]


def bytes_needed(
    prefix: Buffer, /, *, file_size: int | None = None, max_header_size: int = MAX_HEADER_SIZE
) -> int:
    """How many bytes from the start of the file reading its header takes.

    Args:
        prefix: The file's first bytes, as many as are at hand (none at all is fine).
        file_size: The size of the whole file, or ``None`` when it is not known (a stream).
        max_header_size: The largest header length N accepted (§1.4).

    Returns:
        ``8 + N``, the end of the header, once `prefix` holds a sound 8-byte length prefix:
        read the file up to there and pass those bytes to `parse_header`. Before that, a
        smaller number, never above 64: the bytes it takes to tell (8 for the length prefix;
        up to 64 when the prefix is bad, so that the error can name what the file is). Read
        that many, or to the end of the file, and ask again; a stream that ends first is
        handed to `parse_header` as it is (``file_size=None``), which gives the verdict.

    Raises:
        HeaderError: What the first bytes alone decide, in the reference's order (§1.2):
            ``HeaderTooSmall`` (a file under 8 bytes), ``HeaderTooLarge`` (N above
            `max_header_size`), ``InvalidHeaderLength`` (``8 + N`` past the end of the file).
            Never for a stream whose end is not known yet, except ``HeaderTooLarge``.
    """
    stop = header_end(prefix, file_size, max_header_size)
    if stop is not None:
        return stop
    have = len(prefix)
    if have < HEADER_LENGTH_SIZE and (file_size is None or file_size >= HEADER_LENGTH_SIZE):
        return HEADER_LENGTH_SIZE
    # A bad length prefix: first the bytes that let the hint say what the file is instead.
    enough = SNIFF_SIZE if file_size is None else min(file_size, SNIFF_SIZE)
    if have < enough:
        return enough
    raise length_fault(prefix, file_size, max_header_size)


def header_length(prefix: Buffer) -> int:
    """N, the header's length: the first 8 bytes, an unsigned little-endian integer (§1.1)."""
    return int.from_bytes(prefix[:HEADER_LENGTH_SIZE], "little")


def header_end(prefix: Buffer, bound: int | None, max_header_size: int) -> int | None:
    """``8 + N`` when `prefix` opens with a sound length prefix, else ``None``.

    Sound: the 8 bytes are there, N is at most `max_header_size` (§1.4) and the header ends
    within `bound`, the file's size (§1.5; ``None``: a stream, whose end is not known yet).
    The one home of the length rules' common case; `length_fault` tells the faults apart.
    """
    if len(prefix) >= HEADER_LENGTH_SIZE:
        # `header_length`, inline: this runs on every read of a header.
        header_size = int.from_bytes(prefix[:HEADER_LENGTH_SIZE], "little")
        stop = HEADER_LENGTH_SIZE + header_size
        if header_size <= max_header_size and (bound is None or stop <= bound):
            return stop
    return None


def length_fault(
    prefix: bytes | bytearray | memoryview, file_size: int | None, max_header_size: int
) -> HeaderError:
    """The verdict of a length prefix `header_end` found unsound: the reference's first three
    checks, in its order (§1.2).

    `prefix` must hold the first 8 bytes, or be the whole file; with ``file_size=None`` it is
    taken to be the whole file, and the error says how many bytes would have done
    (``needed``: a partial download). Its hint comes from the first 64 bytes, if `prefix` has
    them. A sound length prefix is a caller's mistake (AssertionError).
    """
    whole = file_size is None
    size = len(prefix) if file_size is None else file_size
    fault = (
        header_too_small(prefix, size, whole=whole)
        or header_too_large(prefix, max_header_size)
        or header_past_the_end(prefix, size, whole=whole)
    )
    if fault is None:
        raise AssertionError("length_fault() of a sound length prefix")
    return fault


def header_too_small(
    prefix: bytes | bytearray | memoryview, size: int, *, whole: bool = False
) -> HeaderError | None:
    """§1.3: a file of fewer than 8 bytes has no length prefix. (`whole`: `prefix` was taken
    for the whole file; 8 bytes would have done.)"""
    if size >= HEADER_LENGTH_SIZE:
        return None
    return _fault(
        "HeaderTooSmall",
        f"expected at least 8 bytes (the header length), found a file of {size} bytes",
        prefix if len(prefix) >= size else None,  # only the whole file tells what it is
        needed=HEADER_LENGTH_SIZE if whole else None,
    )


def header_too_large(
    prefix: bytes | bytearray | memoryview, max_header_size: int
) -> HeaderError | None:
    """§1.4: N above the limit, checked before the file's size."""
    header_size = header_length(prefix)
    if header_size <= max_header_size:
        return None
    return _fault(
        "HeaderTooLarge",
        f"the header length is {header_size:,} bytes, above the limit of "
        f"{max_header_size:,} (max_header_size); the file starts with "
        f"{bytes(prefix[:HEADER_LENGTH_SIZE])!r}",
        prefix,
    )


def header_past_the_end(
    prefix: bytes | bytearray | memoryview, size: int, *, whole: bool = False
) -> HeaderError | None:
    """§1.5: the header, 8 + N bytes, must end within the file. (`whole`: `prefix` was taken
    for the whole file; 8 + N bytes would have done.)"""
    header_size = header_length(prefix)
    stop = HEADER_LENGTH_SIZE + header_size
    if stop <= size:
        return None
    return _fault(
        "InvalidHeaderLength",
        f"the header length is {header_size:,} bytes, so the header ends at byte {stop:,}, "
        f"but the file is {size:,} bytes",
        prefix,
        missing=stop - size,
        needed=stop if whole else None,
    )


def _fault(
    kind: str,
    message: str,
    prefix: bytes | bytearray | memoryview | None,
    *,
    missing: int = 0,
    needed: int | None = None,
) -> HeaderError:
    hint = None if prefix is None else sniff(bytes(prefix[:SNIFF_SIZE]))
    if hint is None and missing > 0:
        hint = truncation_hint(missing)
    return HeaderError(kind, message, hint=hint, needed=needed)
