"""`HeaderError`: the one exception for bad input, with a stable `kind`.

Layer: core (sans-IO).
"""

from __future__ import annotations

__all__ = ["KINDS", "REFERENCE_KINDS", "HeaderError"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any, Final

# The reference's `SafeTensorError` variants that reading a header can produce, in the order in
# which its checks run (docs/format.md §1.2).
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

#: Every `HeaderError.kind`: the reference's, then the package's own, for what the reference
#: never sees (docs/errors.md): ``PrefixTooShort`` (`parse_header` given fewer bytes than the
#: header takes: fetch ``needed``), ``InvalidIndex`` and ``IndexMismatch`` (a checkpoint's
#: index, and its shards), ``FileChanged`` (a file that changed, or is not the one a header
#: given was read from), ``TooLarge`` (more data than memory and swap hold) and
#: ``NoSplitRule`` (a rank's share asked with ``strict=True``, and tensors no rule decides).
KINDS: Final = (
    *REFERENCE_KINDS,
    "PrefixTooShort",
    "InvalidIndex",
    "IndexMismatch",
    "FileChanged",
    "TooLarge",
    "NoSplitRule",
)


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
        message: The message (what was expected, and what was found), without the hint.
    """

    kind: str
    tensor: str | None
    offset: int | None
    needed: int | None
    hint: str | None
    message: str

    def __init__(self, kind: str, message: str, *, tensor: str | None = None,
                 offset: int | None = None, needed: int | None = None,
                 hint: str | None = None) -> None:  # fmt: skip
        super().__init__(message if hint is None else f"{message}. Hint: {hint}")
        self.kind, self.message, self.hint = kind, message, hint
        # Where the fault is, and (for a prefix that ends too early) how many bytes would do.
        self.tensor, self.offset, self.needed = tensor, offset, needed

    def __repr__(self) -> str:
        return f"HeaderError({self.kind!r}, {self.message!r})"

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only attributes survive pickling (multiprocessing, concurrent.futures).
        attributes = {
            "tensor": self.tensor,
            "offset": self.offset,
            "needed": self.needed,
            "hint": self.hint,
        }
        return (_rebuild_header_error, (self.kind, self.message, attributes))


def _rebuild_header_error(kind: str, message: str, attributes: dict[str, Any]) -> HeaderError:
    return HeaderError(kind, message, **attributes)
