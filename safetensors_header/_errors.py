"""The package's two exceptions: `HeaderError` for bad input, `RemoteError` for the network.

Layer: core (sans-IO).
"""

from __future__ import annotations

__all__ = ["KINDS", "REFERENCE_KINDS", "HeaderError", "RemoteError"]

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

#: Every `HeaderError.kind`: the reference's, then this package's own, for situations the
#: reference never sees:
#:
#: * ``PrefixTooShort``: `parse_header` was given fewer bytes than the header occupies, while
#:   ``file_size`` says the file itself is long enough (fetch ``needed`` bytes);
#: * ``InvalidIndex``: a sharded checkpoint's index is not JSON, has no ``weight_map`` of
#:   shard names, or names a shard outside its directory;
#: * ``IndexMismatch``: an index and its shards disagree (a tensor missing from its shard,
#:   or in two shards; with ``strict=True`` also the findings of ``Checkpoint.problems``);
#: * ``FileChanged``: a local file changed between its header's read and a read of its
#:   data (another file at its path, another size or modification time): the two would be
#:   of different files. (A URL or an object that changes is a `RemoteError`.)
#: * ``NoSplitRule``: a rank's share was asked with ``strict=True`` (`plan_rank`,
#:   ``load_rank``) and tensors no rule of tensor parallelism decides were found (named).
KINDS: Final = (
    *REFERENCE_KINDS,
    "PrefixTooShort",
    "InvalidIndex",
    "IndexMismatch",
    "FileChanged",
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


class RemoteError(OSError):
    """Reading over HTTP(S) or from an object store failed: an HTTP status, or the network.

    An ``OSError``, as a local file that cannot be read raises one, so ``except OSError``
    covers both. A malformed header is still a `HeaderError`, never this.

    Attributes:
        url: The URL given, with any user name, password and query string (signed links
            carry credentials there) replaced by ``<redacted>``.
        status: The HTTP status of the answer at fault (e.g. 404), or ``None`` when the
            failure was the network's (refused, reset, timed out, closed mid-body) or a reply
            that contradicts the request (a wrong ``Content-Range``).

    The message (also ``strerror``) says what happened and where, and for 401, 403 and 404
    what to check.
    """

    url: str
    status: int | None

    def __init__(self, message: str, *, url: str, status: int | None = None) -> None:
        super().__init__(message)
        self.strerror = message  # what tools that print OSError.strerror show
        self.url = url
        self.status = status

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only attributes survive pickling (multiprocessing, concurrent.futures).
        return (_rebuild_remote, (str(self), self.url, self.status))


def _rebuild_remote(message: str, url: str, status: int | None) -> RemoteError:
    return RemoteError(message, url=url, status=status)
