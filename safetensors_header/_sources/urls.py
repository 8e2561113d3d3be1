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
# Patterns compiled on first use (re's own cache): only a signed URL's expiry or a URL's
# normal form asks for them, and compiling them costs every command's start.
_EPOCH: Final = r"[0-9]{1,12}(?:\.[0-9]{1,9})?"
_SECONDS: Final = r"[0-9]{1,9}"
_COMPACT_TIME: Final = r"([0-9]{4})([0-9]{2})([0-9]{2})T([0-9]{2})([0-9]{2})([0-9]{2})Z"


def is_url(source: str) -> bool:
    """Whether `source` is read over HTTP(S) rather than as a local path."""
    return source[:8].lower().startswith(("http://", "https://"))


def url_scheme(source: str) -> str | None:
    """The scheme of a URL that fsspec reads (``s3``, ``hf``, ``file``...), else None."""
    match = _SCHEME.match(source)
    if match is None or is_url(source):
        return None
    return match[1].lower()


def normal_url(url: str) -> str:
    """`url` in the normal form of RFC 3986 (section 6.2.2), for telling whether two URLs
    name one resource: scheme and host in lower case, the scheme's default port dropped, an
    empty path ``/``, dot-segments removed, the percent-escapes of unreserved characters
    decoded and the others' hex digits in upper case. A URL that cannot be split is
    returned as it is."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return url
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"  # an IPv6 literal
    if port is not None and _DEFAULT_PORTS.get(scheme) != port:
        host += f":{port}"
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    netloc = f"{userinfo}@{host}" if userinfo else host
    path = _without_dot_segments(_normal_escapes(parts.path)) or ("/" if netloc else "")
    return urlunsplit((scheme, netloc, path, _normal_escapes(parts.query), ""))


_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_ESCAPE: Final = r"%([0-9A-Fa-f]{2})"
_UNRESERVED: Final = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
)


def _normal_escapes(text: str) -> str:
    """Percent-escapes of unreserved characters decoded; the others' hex in upper case."""

    def one(match: re.Match[str]) -> str:
        code = int(match[1], 16)
        return chr(code) if code in _UNRESERVED else f"%{code:02X}"

    return re.sub(_ESCAPE, one, text) if "%" in text else text


def _without_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4: ``.`` and ``..`` segments resolved away."""
    if "." not in path:
        return path
    out: list[str] = []
    segments = path.split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == ".":
            if last:
                out.append("")
        elif segment == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(segment)
    return "/".join(out)


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


def url_place(url: str) -> str:
    """A URL as a file's place (`FileIdentity.location`): `redact`'s, but for a query that
    names something other than a signature (``?file=a``), which stands as a digest of it
    (two queries of one path may be two files). A signature's parameters (S3's, Google's,
    CloudFront's, Azure's) are left out: a URL signed again is the same place."""
    shown = redact(url)
    query = url.partition("?")[2].partition("#")[0]
    if not query:
        return shown
    from urllib.parse import parse_qsl

    kept = sorted(
        (name, value)
        for name, value in parse_qsl(query, keep_blank_values=True)
        if not _is_signature(name.lower())
    )
    base = shown.partition("?")[0]
    if not kept:
        return base
    import hashlib
    import json

    # (JSON of the pairs: unambiguous whatever they hold, a lone surrogate too)
    text = json.dumps(kept, ensure_ascii=True)
    digest = hashlib.sha256(text.encode("ascii")).hexdigest()[:16]
    return f"{base}?<query {digest}>"


# A signed URL's own parameters (S3's and Google's X-Amz-*/X-Goog-*, CloudFront's, an Azure
# SAS's): what signing again changes.
_SIGNATURE_PREFIXES: Final = ("x-amz-", "x-goog-")
_SIGNATURE_NAMES: Final = frozenset(
    (
        *("signature", "expires", "key-pair-id", "policy", "awsaccesskeyid", "googleaccessid"),
        *("sig", "se", "st", "sp", "sv", "sr", "spr", "sip", "si", "ss", "srt"),
        *("skoid", "sktid", "skt", "ske", "sks", "skv"),
    )
)


def _is_signature(name: str) -> bool:
    return name.startswith(_SIGNATURE_PREFIXES) or name in _SIGNATURE_NAMES


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
        match = re.fullmatch(_COMPACT_TIME, date)
        if match is not None and re.fullmatch(_SECONDS, life):
            from datetime import datetime, timezone

            try:
                year, month, day, hour, minute, second = map(int, match.groups())
                when = datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
                start = when.timestamp()
            except (ValueError, OverflowError):  # month 13, year 0: no date, no known expiry
                return None
            return start + int(life)
    expires = found.get("expires", "")
    if re.fullmatch(_EPOCH, expires):
        return float(expires)
    if "se" in found and "sig" in found:
        from datetime import datetime

        try:
            return datetime.fromisoformat(found["se"].replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None
