"""What the source layer knows of the Hugging Face Hub: ``hf://`` paths as the HTTPS URLs
that serve their bytes, the token sent with them, what a repository named without a file
is read as, and what the Hub's errors mean. No I/O here: the Hub's files are read by
`hub_files`, over HTTP.

Layer: sources (standard library only).
"""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Final

__all__ = ["HUB_ENDPOINT", "REPOSITORY_NAMES", "hub_headers", "hub_hint", "hub_offline"]
__all__ += ["hub_repository", "hub_url", "linked_sha256", "online"]

#: Where the Hub is, unless ``HF_ENDPOINT`` says otherwise (as for huggingface_hub).
HUB_ENDPOINT = "https://huggingface.co"

# The kinds of an hf:// path (huggingface_hub's HF URI grammar, 2.x): the prefix a path may
# start with, and the prefix of its resolve URL. A path without one is a model's.
_KINDS: Final = {
    "models/": "",
    "datasets/": "datasets/",
    "spaces/": "spaces/",
    "kernels/": "kernels/",
    "buckets/": "buckets/",  # not versioned: no @revision, resolve/<path>
}
# Revisions with a "/" that a path may give as they are (huggingface_hub matches them before
# it splits the revision from the file): pull requests and conversions.
_SPECIAL_REVISION: Final = re.compile(r"refs/(?:convert/[\w.-]+|pr/[0-9]+)")
# What huggingface_hub reads as "true" in its environment variables.
_TRUE: Final = frozenset({"1", "ON", "YES", "TRUE"})
_FORM: Final = "hf://[models/|datasets/|spaces/|kernels/|buckets/]<org>/<repo>[@<revision>]/<file>"

#: What a repository named without a file is read as, in this order: the first that exists.
REPOSITORY_NAMES = (
    "model.safetensors.index.json",
    "model.safetensors",
    "diffusion_pytorch_model.safetensors.index.json",
    "diffusion_pytorch_model.safetensors",
)


def hub_url(url: str, /, *, endpoint: str | None = None) -> str:
    """The HTTPS URL of a file on the Hugging Face Hub, from its ``hf://`` path.

    ``hf://[<kind>/]<org>/<repo>[@<revision>]/<path>``, every form huggingface_hub's
    ``HfFileSystem`` reads: a model (no kind, or ``models/``), ``datasets/``, ``spaces/``,
    ``kernels/``, or ``buckets/`` (not versioned), becomes
    ``<endpoint>/[datasets/|spaces/|kernels/]<org>/<repo>/resolve/<revision>/<path>`` (a
    bucket's: ``<endpoint>/buckets/<org>/<name>/resolve/<path>``): the URL the Hub serves
    the file's bytes at (ranged GETs included; a redirect to its CDN for large files). The
    revision is ``main`` unless given; it may be percent-encoded (``@refs%2Fpr%2F1``), and a
    pull request's or a conversion's may be written as it is (``@refs/pr/1/``); in the URL it
    is one percent-encoded segment. `endpoint` defaults to ``HF_ENDPOINT`` from the
    environment, else ``https://huggingface.co``. Any other URL is returned as it is.

        >>> hub_url("hf://openai-community/gpt2/model.safetensors")
        'https://huggingface.co/openai-community/gpt2/resolve/main/model.safetensors'
        >>> hub_url("hf://datasets/org/data@refs/pr/1/part 1.safetensors")
        'https://huggingface.co/datasets/org/data/resolve/refs%2Fpr%2F1/part%201.safetensors'

    Raises:
        ValueError: An ``hf://`` URL without an organisation, a repository and a file.
    """
    if not url.startswith("hf://"):
        return url
    kind, org, repo, revision, path = _parts(url)
    if not path:
        raise ValueError(f"expected {_FORM}, not {url!r}")
    # Imported here: the command line checks every source with `hub_repository`, and a local
    # file's `inspect` should not pay for urllib.parse (and ipaddress): 1.7 ms of 25.
    from urllib.parse import quote, unquote

    base = (endpoint or os.environ.get("HF_ENDPOINT") or HUB_ENDPOINT).rstrip("/")
    where = f"{base}/{_KINDS.get(kind, '')}{quote(org)}/{quote(repo)}/resolve/"
    if kind != "buckets/":
        where += quote(unquote(revision or "main"), safe="") + "/"
    return where + quote(path)


def hub_repository(url: str, /) -> str | None:
    """``hf://[<kind>/]<org>/<repo>[@<revision>]/`` for an ``hf://`` path that names a
    repository and no file (its files are then `REPOSITORY_NAMES`, tried in order); ``None``
    otherwise."""
    if not url.startswith("hf://"):
        return None
    kind, org, repo, revision, path = _parts(url)
    if path:
        return None
    return f"hf://{kind}{org}/{repo}" + ("" if revision is None else f"@{revision}") + "/"


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) says not to ask the Hub, as
    huggingface_hub reads it (``1``, ``ON``, ``YES`` or ``TRUE``, in any case)."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        value = os.environ.get(name)
        if value:
            return value.strip().upper() in _TRUE
    return False


def online(path: str, /) -> None:
    """Nothing, unless `hub_offline`: then the `RemoteError` of an ``hf://`` path offline,
    raised before anything of HTTP is imported or asked."""
    if not hub_offline():
        return
    from .._errors import RemoteError

    raise RemoteError(
        f"{path} is on the Hugging Face Hub, and HF_HUB_OFFLINE is set: nothing is asked of "
        "the Hub offline (read a local copy, such as the file's path in the Hub's cache, or "
        "unset HF_HUB_OFFLINE)",
        url=path,
    )


def hub_headers(
    headers: Mapping[str, str] | None, token: str | bool | None = None
) -> dict[str, str]:
    """The caller's headers for a request to the Hub, with ``Authorization: Bearer <token>``
    added unless the caller gives one: `token`, else ``HF_TOKEN`` (or the older
    ``HUGGING_FACE_HUB_TOKEN``) from the environment, else the token huggingface_hub's
    login saved (``$HF_TOKEN_PATH``, else ``$HF_HOME/token``, else
    ``~/.cache/huggingface/token``). As huggingface_hub reads them: ``token=False`` sends
    none; with ``HF_HUB_DISABLE_IMPLICIT_TOKEN`` set, the environment's or the saved token
    is sent only when ``token=True`` asks for it. The HTTP client sends it to the Hub's
    own origin only, never on to the CDN a large file is redirected to."""
    given = dict(headers or {})
    if token is False or any(name.lower() == "authorization" for name in given):
        return given
    if token is None and _true("HF_HUB_DISABLE_IMPLICIT_TOKEN"):
        return given
    found = (token if isinstance(token, str) else None) or _saved_token()
    if found:
        given["Authorization"] = f"Bearer {found}"
    return given


def _true(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in _TRUE


def _saved_token() -> str | None:
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        token = os.environ.get(name, "").strip()
        if token:
            return token
    path = os.environ.get("HF_TOKEN_PATH") or os.path.join(
        os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface"),
        "token",
    )
    try:
        with open(path, encoding="utf-8") as file:
            return file.read(4096).strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _parts(url: str) -> tuple[str, str, str, str | None, str]:
    """An ``hf://`` path's kind (``""``, ``"datasets/"``...), organisation, repository, its
    revision as written after the ``@`` (None for none) and its file's path (``""``)."""
    rest = url[len("hf://") :]
    kind = next((prefix for prefix in _KINDS if rest.startswith(prefix)), "")
    rest = rest[len(kind) :].strip("/")
    if kind == "models/":
        kind = ""
    revision: str | None = None
    at = rest.find("@")
    # An "@" is the revision's only right after <org>/<repo>: one deeper is in a file name.
    if at != -1 and rest.count("/", 0, at) == 1 and kind != "buckets/":
        repo_id, after = rest[:at], rest[at + 1 :]
        special = _SPECIAL_REVISION.match(after)
        if special is not None and after[special.end() : special.end() + 1] in ("", "/"):
            revision, path = special[0], after[special.end() + 1 :]
        else:
            revision, _, path = after.partition("/")
        org, _, repo = repo_id.partition("/")
    else:
        org, _, rest = rest.partition("/")
        repo, _, path = rest.partition("/")
    if not org or not repo or "@" in repo or revision == "":
        raise ValueError(f"expected {_FORM}, not {url!r}")
    return kind, org, repo, revision, path


def linked_sha256(validators: Iterable[tuple[str, str | int]] | None) -> str | None:
    """The file's sha256 as the Hub publishes it, from a file's validators: the
    ``X-Linked-Etag`` of its resolve reply (the LFS object's id), in lower-case hex; None
    where there is none (a file the Hub serves itself, whose ``ETag`` is a git object's id;
    another server)."""
    value = dict(validators or ()).get("x-linked-etag")
    if not isinstance(value, str):
        return None
    digest = value.removeprefix("W/").strip('"').lower()
    if len(digest) != 64 or digest.strip("0123456789abcdef"):
        return None
    return digest


_HUB_HINTS: Final = {
    "RepoNotFound": (
        "the Hugging Face Hub has no such repository, or it is private or gated and the "
        "request had no token for it (set HF_TOKEN, or pass headers={'Authorization': "
        "'Bearer <token>'})"
    ),
    "GatedRepo": (
        "the repository is gated: accept its conditions on its page on the Hub, then read "
        "it with a token of that account (HF_TOKEN)"
    ),
    "EntryNotFound": "the repository has no such file at this revision",
    "RevisionNotFound": "the repository has no such revision (branch, tag or commit)",
    "DisabledRepo": "the repository has been disabled on the Hub",
}


def hub_hint(code: str) -> str | None:
    """What the Hub's ``X-Error-Code`` means for the reader (None for a code it does not
    know: the server's own message never reaches a terminal)."""
    return _HUB_HINTS.get(code)
