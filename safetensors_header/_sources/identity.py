"""`FileIdentity`: what a source said of a file when its header was read.

Layer: sources. A header read through a source carries one (`Header.identity`); the rule that
holds later reads to it is `base.RangeFile`'s (`_identify`, `confirm`).
"""

from __future__ import annotations

import os

from .._core.records import frozen_record, set_fields

__all__ = ["FileIdentity", "absolute", "identity_of", "make_identity", "same_path"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any, Final

    from .._core.header import Header


@frozen_record()
class FileIdentity:
    """What a source said of a file when its header was read: later reads are checked
    against it, so that a header and data of two different files are never mixed (the
    rule: docs/errors.md).

    Attributes:
        location: Where the file is: a local file's absolute path, a URL without credentials
            (its query as a digest: two queries may name two files), ``"a BytesIO
            object"``.
        size: Its size in bytes, ``None`` where the source did not say (a stream).
        validators: What changes when the file does, as ``(name, value)`` pairs in the
            source's own terms: ``etag`` and ``last-modified`` of a URL (the Hub's
            ``x-linked-etag`` and ``x-xet-hash``); ``e_tag``, ``version``,
            ``last_modified`` of an object in a store; ``device``, ``inode``, ``mtime_ns``
            and ``ctime_ns`` of a local file. Empty where the source says nothing (bytes, a
            file object without a descriptor, a server without ETag or Last-Modified).
        header_digest: The CRC-32 of the header's bytes (``[0, 8 + N)``), where they were
            read through the source layer's loop (``None`` for a local path's header: its
            validators decide, and a copy is held to its header parsed again).
    """

    __slots__ = ("location", "size", "validators", "header_digest")  # noqa: RUF023

    location: str
    size: int | None
    validators: tuple[tuple[str, str | int], ...]
    header_digest: int | None

    def __init__(
        self,
        location: str,
        size: int | None,
        validators: tuple[tuple[str, str | int], ...] = (),
        header_digest: int | None = None,
    ) -> None:
        set_fields(self, FileIdentity, (location, size, validators, header_digest))

    def __repr__(self) -> str:
        size = "size unknown" if self.size is None else f"{self.size:,} bytes"
        said = "".join(f", {name}={value!r}" for name, value in self.validators)
        return f"<FileIdentity {self.location!r}, {size}{said}>"


class _IdentityBuilder:
    """A `FileIdentity` under construction: the same slots, plain stores, then its class set
    (as the core's builders make a `TensorInfo`): one is made per header read, and this costs
    a sixth of the record's ``__init__`` (which sets each field through
    ``object.__setattr__``) and half of the slots' own stores called one by one."""

    __slots__ = FileIdentity.__slots__

    def __init__(self, *fields: Any) -> None:
        # (All four given: mypy checks the calls of make_identity against FileIdentity's.)
        self.location, self.size, self.validators, self.header_digest = fields
        self.__class__ = FileIdentity  # type: ignore[assignment]


#: Make a `FileIdentity` of its four fields, all given (`_IdentityBuilder`).
make_identity: type[FileIdentity] = _IdentityBuilder  # type: ignore[assignment]


def identity_of(header: Header) -> FileIdentity | None:
    """The `FileIdentity` a header was read with; None for one `parse_header` made (or one
    whose identity another reader attached)."""
    identity = header.identity
    return identity if type(identity) is FileIdentity else None


def absolute(path: str | os.PathLike[str] | os.PathLike[bytes]) -> str:
    """A local file's place: `path` made absolute against the working directory as it is now
    (no link resolved: `same_path` resolves both sides when it compares)."""
    text = path if type(path) is str else os.fsdecode(path)
    if text.startswith(_ROOT) if _POSIX else os.path.isabs(text):  # (inline: once a read)
        return text
    try:
        folder = os.getcwd()
    except OSError:  # the working directory was deleted: the path as it is
        return text
    # os.path.join's result for a relative `text`, without its generality (a third the time).
    return folder + text if folder.endswith(os.sep) else folder + os.sep + text


_ROOT: Final = os.sep
_POSIX: Final = os.name == "posix"  # where a path is absolute exactly when it starts with /


def same_path(location: str, path: str) -> bool:
    """Whether two absolute paths reach the same place, links resolved (now)."""
    if location == path:
        return True
    try:
        return os.path.normcase(os.path.realpath(location)) == os.path.normcase(
            os.path.realpath(path)
        )
    except (OSError, ValueError):  # a path the system cannot resolve (a NUL in it)
        return False
