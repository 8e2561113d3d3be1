"""URLs: which strings are URLs, how one is shown, and the file beside one.

Layer: sources. ``urllib.parse`` is imported by the functions that need it, not here: a local
file's read never pays for it.
"""

from __future__ import annotations

import re

__all__ = ["beside", "credentials", "is_url", "redact", "scrub", "signed_until", "url_scheme"]
__all__ += ["url_sibling"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Final

# A URL's scheme (RFC 3986), of two letters or more: ``C://x`` is a Windows path.
_SCHEME: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")
# A signed query's times: seconds since the epoch (a fraction allowed), a lifetime in seconds,
# and the compact UTC time of AWS's and Google's signatures (20261203T151800Z).
_EPOCH: Final = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,9})?")
_SECONDS: Final = re.compile(r"[0-9]{1,9}")
_COMPACT_TIME: Final = re.compile(r"([0-9]{4})([0-9]{2})([0-9]{2})T([0-9]{2})([0-9]{2})([0-9]{2})Z")


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
    the one rule of every remote backend's `sibling` (a local file's is a plain join). An
    http(s) URL: `name` percent-quoted and joined to it, its query dropped (a shard has no
    signature of its index's); another URL (``hf://``, ``s3://``...): its folder and `name`,
    as they are; a local path: its folder and `name`."""
    if is_url(location):
        return url_sibling(location, name)
    if url_scheme(location) is not None:
        return location.split("?", 1)[0].rsplit("/", 1)[0] + "/" + name
    import os

    return os.path.join(os.path.dirname(location), name)


def signed_until(url: str) -> float | None:
    """When the signature in `url`'s query expires (seconds since the epoch), where the query
    says so, else None: ``Expires`` (CloudFront's signed URLs, as the Hub's CDN gives them;
    Google's V2), ``X-Amz-Date`` plus ``X-Amz-Expires`` (S3's, the Hub's Xet storage's),
    ``X-Goog-Date`` plus ``X-Goog-Expires``, or ``se`` (an Azure SAS). A value that is not
    what the scheme writes is no expiry (the server's refusal then says it)."""
    query = url.partition("?")[2].partition("#")[0]
    if not query:
        return None
    from urllib.parse import parse_qsl

    found = {name.lower(): value for name, value in parse_qsl(query, keep_blank_values=True)}
    for prefix in ("x-amz-", "x-goog-"):
        date, life = found.get(prefix + "date", ""), found.get(prefix + "expires", "")
        match = _COMPACT_TIME.fullmatch(date)
        if match is not None and _SECONDS.fullmatch(life):
            import calendar

            start = calendar.timegm((*(int(part) for part in match.groups()), 0, 0, 0))
            return start + int(life)
    expires = found.get("expires", "")
    if _EPOCH.fullmatch(expires):
        return float(expires)
    if "se" in found and "sig" in found:
        from datetime import datetime

        try:
            return datetime.fromisoformat(found["se"].replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None
