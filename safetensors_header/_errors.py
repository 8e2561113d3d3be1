"""The one exception this package raises for bad input."""

from __future__ import annotations

from typing import Any, Final

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
        hint: When the bytes are not safetensors at all, or were cut short: what they look
            like and what to do (a Git LFS pointer: ``git lfs pull``; an HTML page: a wrong
            URL or a login page; a PyTorch zip or pickle file; GGUF; an empty or truncated
            file). Also the end of the message. ``None`` otherwise.
        message: The message without the hint.

    The message says what was expected and what was found.
    """

    kind: str
    tensor: str | None
    offset: int | None
    needed: int | None
    hint: str | None
    message: str

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        tensor: str | None = None,
        offset: int | None = None,
        needed: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message if hint is None else f"{message}. Hint: {hint}")
        self.kind = kind
        self.message = message
        self.tensor = tensor
        self.offset = offset
        self.needed = needed
        self.hint = hint

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only attributes survive pickling (multiprocessing, concurrent.futures).
        attributes = {
            "tensor": self.tensor,
            "offset": self.offset,
            "needed": self.needed,
            "hint": self.hint,
        }
        return (_rebuild, (self.kind, self.message, attributes))


def _rebuild(kind: str, message: str, attributes: dict[str, Any]) -> HeaderError:
    return HeaderError(kind, message, **attributes)
