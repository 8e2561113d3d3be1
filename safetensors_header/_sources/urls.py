"""URLs: which strings are URLs, how one is shown, and the file beside one.

Layer: sources. ``urllib.parse`` is imported by the functions that need it, not here: a local
file's read never pays for it.
"""

from __future__ import annotations

import re

__all__ = ["beside", "credentials", "is_url", "redact", "scrub", "url_scheme", "url_sibling"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Final

# A URL's scheme (RFC 3986), of two letters or more: ``C://x`` is a Windows path.
_SCHEME: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")


def is_url(source: str) -> bool:
    """Whether `source` is read over HTTP(S) rather than as a local path."""
    return source[:8].lower().startswith(("http://", "https://"))


def url_scheme(source: str) -> str | None:
    """The scheme of a URL that fsspec reads (``s3``, ``hf``, ``file``...), else None."""
    match = _SCHEME.match(source)
    if match is None or is_url(source):
        return None
    return match[1].lower()


def redact(url: str) -> str:
    """The URL without user info or query (signed links carry credentials there)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "<an unreadable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "<redacted>@" + netloc.rpartition("@")[2]
    query = "<redacted>" if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def url_sibling(url: str, name: str) -> str:
    """The URL of the file `name` beside an http(s) URL: `name` percent-quoted and joined to
    the URL, its query dropped (a shard has no signature of its index's)."""
    from urllib.parse import quote, urljoin, urlsplit, urlunsplit

    parts = urlsplit(url)
    return urljoin(urlunsplit((*parts[:3], "", "")), quote(name))


def credentials(url: str) -> tuple[str, str | None]:
    """`url` without its user info, and that user info (``user:password``, percent-decoded),
    or None: sent as an ``Authorization: Basic`` header instead, it never reaches a socket
    layer that would put it in an error message."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if not sep or "@" not in authority:
        return url, None
    from urllib.parse import unquote

    userinfo, _, host = authority.rpartition("@")
    return f"{scheme}://{host}{slash}{path}", unquote(userinfo)


def scrub(text: str, url: str) -> str:
    """`text` (an error's, a server's) with the secrets of `url` taken out: its user info,
    its password and its query (a signature), as they are and percent-decoded."""
    from urllib.parse import unquote

    authority = url.partition("://")[2].partition("/")[0]
    userinfo = authority.rpartition("@")[0]
    secrets = {userinfo, userinfo.partition(":")[2], url.partition("?")[2].partition("#")[0]}
    secrets |= {unquote(secret) for secret in secrets}
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) > 1:
            text = text.replace(secret, "<redacted>")
    return text


def beside(location: str, name: str) -> str:
    """Where the file `name` is beside the file at `location` (a shard beside its index):
    the one rule of every backend's `sibling`. An http(s) URL: `name` percent-quoted and
    joined to it, its query dropped (a shard has no signature of its index's); another URL
    (``hf://``, ``s3://``...): its folder and `name`, as they are; a local path: its folder
    and `name`."""
    if is_url(location):
        return url_sibling(location, name)
    if url_scheme(location) is not None:
        return location.split("?", 1)[0].rsplit("/", 1)[0] + "/" + name
    import os

    return os.path.join(os.path.dirname(location), name)
