"""The one exception this package raises for bad input."""

from __future__ import annotations

from typing import Final

__all__ = ["KINDS", "REFERENCE_KINDS", "HeaderError"]

# The reference's `SafeTensorError` variants that reading a header can produce, in the order in
# which its checks run (format-rules.md section 1).
REFERENCE_KINDS: Final = (
    "HeaderTooSmall",
    "HeaderTooLarge",
    "InvalidHeaderLength",
    "InvalidHeader",
    "InvalidHeaderDeserialization",
    "InvalidOffset",
    "ValidationOverflow",
    "MisalignedSlice",
    "TensorInvalidInfo",
    "MetadataIncompleteBuffer",
)

# Kinds of this package's own, for situations the reference never sees.
# PrefixTooShort: `parse_header` was given fewer bytes than the header occupies, while
# `file_size` says the file itself is long enough (the caller should fetch `needed` bytes).
KINDS: Final = (*REFERENCE_KINDS, "PrefixTooShort")


class HeaderError(ValueError):
    """The bytes are not a valid safetensors header (or file).

    Attributes:
        kind: A stable name for the failure. For every failure the reference implementation
            (the Rust core of the ``safetensors`` package) can detect, it is the name of the
            reference's ``SafeTensorError`` variant for the same bytes, e.g.
            ``"InvalidOffset"``. See ``KINDS``.
        tensor: The tensor at fault, where one is (``InvalidOffset``, ``TensorInvalidInfo``,
            ...), else ``None``.
        offset: A byte offset in the file that locates the fault, where one is known
            (e.g. the first byte that is not UTF-8), else ``None``.
        needed: Set when the bytes given end before the header does: the number of bytes,
            counted from the start of the file, that parsing needs. Fetch that many and try
            again. ``None`` otherwise.

    The message says what was expected and what was found.
    """

    kind: str
    tensor: str | None
    offset: int | None
    needed: int | None

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        tensor: str | None = None,
        offset: int | None = None,
        needed: int | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.tensor = tensor
        self.offset = offset
        self.needed = needed

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only attributes survive pickling (multiprocessing, concurrent.futures).
        return (_rebuild, (self.kind, str(self), self.tensor, self.offset, self.needed))


def _rebuild(
    kind: str, message: str, tensor: str | None, offset: int | None, needed: int | None
) -> HeaderError:
    return HeaderError(kind, message, tensor=tensor, offset=offset, needed=needed)
