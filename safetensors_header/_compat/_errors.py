"""The reference's error type, for code that catches it by name.

Layer: adapters (the reference's Python API).
"""

from __future__ import annotations

import contextlib

from .._errors import HeaderError

__all__ = ["SafetensorError", "as_reference_error", "reference_errors"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterator


class SafetensorError(Exception):
    """The error the reference's ``safetensors`` package raises (its ``SafetensorError``)."""


class _InvalidFile(SafetensorError, HeaderError):
    """A file (or bytes) the reference refuses: its `SafetensorError`, which is also this
    project's `HeaderError` with the reference's variant name as ``kind``."""


def as_reference_error(error: HeaderError, doing: str, /) -> HeaderError:
    """`error` as the reference raises it: ``SafetensorError("Error while <doing>: ...")``,
    still a `HeaderError` of the same kind (``except HeaderError`` goes on catching it)."""
    return _InvalidFile(
        error.kind,
        f"Error while {doing}: {error.kind}: {error.message}",
        tensor=error.tensor,
        offset=error.offset,
        needed=error.needed,
        hint=error.hint,
    )


@contextlib.contextmanager
def reference_errors(doing: str, /) -> Iterator[None]:
    """A `HeaderError` raised inside, raised as the reference raises it (`as_reference_error`),
    the error as its ``__cause__``."""
    try:
        yield
    except HeaderError as error:
        raise as_reference_error(error, doing) from error
