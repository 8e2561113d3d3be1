"""What the source layer knows of the Hugging Face Hub: ``hf://`` paths as the HTTPS URLs
that serve their bytes, the token sent with them, what a repository named without a file
is read as, and what the Hub's errors mean. No I/O here: the Hub's files are read by
`hub_files`, over HTTP.

Layer: sources (standard library only).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Final

__all__ = ["HUB_ENDPOINT", "REPOSITORY_NAMES", "hub_headers", "hub_hint", "hub_repository"]
__all__ += ["hub_url"]

#: Where the Hub is, unless ``HF_ENDPOINT`` says otherwise (as for huggingface_hub).
HUB_ENDPOINT = "https://huggingface.co"

_REPO_TYPES = ("datasets/", "spaces/")

#: What a repository named without a file is read as, in this order: the first that exists.
REPOSITORY_NAMES = (
    "model.safetensors.index.json",
    "model.safetensors",
    "diffusion_pytorch_model.safetensors.index.json",
    "diffusion_pytorch_model.safetensors",
)


def hub_url(url: str, /, *, endpoint: str | None = None) -> str:
    """The HTTPS URL of a file on the Hugging Face Hub, from its ``hf://`` path.

    ``hf://<org>/<repo>[@<revision>]/<path>`` (a model), ``hf://datasets/...`` or
    ``hf://spaces/...``, as huggingface_hub's ``HfFileSystem`` writes them, becomes
    ``<endpoint>/[datasets/|spaces/]<org>/<repo>/resolve/<revision>/<path>``: the URL the
    Hub serves the file's bytes at (ranged GETs included; a redirect to its CDN for large
    files). The revision is ``main`` unless given; one with a ``/`` (``refs/pr/1``) is
    written percent-encoded after the ``@``, as ``HfFileSystem`` does. `endpoint` defaults
    to ``HF_ENDPOINT`` from the environment, else ``https://huggingface.co``. Any other URL
    is returned as it is.

        >>> hub_url("hf://openai-community/gpt2/model.safetensors")
        'https://huggingface.co/openai-community/gpt2/resolve/main/model.safetensors'
        >>> hub_url("hf://datasets/org/data@v1.0/part 1.safetensors")
        'https://huggingface.co/datasets/org/data/resolve/v1.0/part%201.safetensors'

    Raises:
        ValueError: An ``hf://`` URL without an organisation, a repository and a file.
    """
    if not url.startswith("hf://"):
        return url
    kind, org, repo, path = _parts(url)
    if not path:
        raise ValueError(
            f"expected hf://[datasets/|spaces/]<org>/<repo>[@<revision>]/<file>, not {url!r}"
        )
    # Imported here: the command line checks every source with `hub_repository`, and a local
    # file's `inspect` should not pay for urllib.parse (and ipaddress): 1.7 ms of 25.
    from urllib.parse import quote, unquote

    repo, _, revision = repo.partition("@")
    revision = unquote(revision) or "main"
    base = (endpoint or os.environ.get("HF_ENDPOINT") or HUB_ENDPOINT).rstrip("/")
    return (
        f"{base}/{kind}{quote(org)}/{quote(repo)}/resolve/{quote(revision, safe='')}/{quote(path)}"
    )


def hub_repository(url: str, /) -> str | None:
    """``hf://<org>/<repo>[@<revision>]/`` for an ``hf://`` path that names a repository and
    no file (its files are then `REPOSITORY_NAMES`, tried in order); ``None`` otherwise."""
    if not url.startswith("hf://"):
        return None
    kind, org, repo, path = _parts(url)
    return None if path else f"hf://{kind}{org}/{repo}/"


def hub_headers(
    headers: Mapping[str, str] | None, token: str | bool | None = None
) -> dict[str, str]:
    """The caller's headers for a request to the Hub, with ``Authorization: Bearer <token>``
    added unless the caller gives one: `token`, else ``HF_TOKEN`` (or the older
    ``HUGGING_FACE_HUB_TOKEN``) from the environment, else the token huggingface_hub's
    login saved (``$HF_TOKEN_PATH``, else ``$HF_HOME/token``, else
    ``~/.cache/huggingface/token``); ``token=False`` sends none (as huggingface_hub reads
    it). The HTTP client sends it to the Hub's own origin only, never on to the CDN a large
    file is redirected to."""
    given = dict(headers or {})
    if token is False or any(name.lower() == "authorization" for name in given):
        return given
    if not isinstance(token, str):
        token = None
    token = token or _saved_token()
    if token:
        given["Authorization"] = f"Bearer {token}"
    return given


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


def _parts(url: str) -> tuple[str, str, str, str]:
    """An ``hf://`` path's repository type prefix, organisation, repository (with its
    ``@revision``) and file path (``""`` for none)."""
    rest = url[len("hf://") :]
    kind = next((prefix for prefix in _REPO_TYPES if rest.startswith(prefix)), "")
    parts = rest[len(kind) :].split("/", 2)
    org, repo = parts[0], parts[1] if len(parts) > 1 else ""
    path = parts[2] if len(parts) > 2 else ""
    if not org or not repo or repo.startswith("@"):
        raise ValueError(
            f"expected hf://[datasets/|spaces/]<org>/<repo>[@<revision>]/<file>, not {url!r}"
        )
    return kind, org, repo, path


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
