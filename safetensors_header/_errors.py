"""The package's two exceptions: `HeaderError` for bad input (the core's), `RemoteError` for
the network.

Layer: core (no I/O here: the network's error is raised by the sources).
"""

from __future__ import annotations

from ._core.errors import KINDS, REFERENCE_KINDS, HeaderError

__all__ = ["KINDS", "REFERENCE_KINDS", "HeaderError", "RemoteError"]


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
        code: The Hugging Face Hub's error code (its ``X-Error-Code``: ``"RepoNotFound"``,
            ``"GatedRepo"``, ``"EntryNotFound"``, ``"RevisionNotFound"``,
            ``"DisabledRepo"``), or ``None`` (another server, another code).

    The message (also ``strerror``) says what happened and where, and for 401, 403 and 404
    what to check.
    """

    url: str
    status: int | None
    code: str | None

    def __init__(
        self, message: str, *, url: str, status: int | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.strerror = message  # what tools that print OSError.strerror show
        self.url = url
        self.status = status
        self.code = code

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only attributes survive pickling (multiprocessing, concurrent.futures).
        return (_rebuild_remote, (str(self), self.url, self.status, self.code))


def _rebuild_remote(
    message: str, url: str, status: int | None, code: str | None = None
) -> RemoteError:
    return RemoteError(message, url=url, status=status, code=code)
