"""Hugging Face Hub URLs: ``hf://`` paths as the HTTPS URLs that serve their bytes.

Layer: sources (standard library only).
"""

from __future__ import annotations

import os
from urllib.parse import quote, unquote

__all__ = ["HUB_ENDPOINT", "hub_url"]

#: Where the Hub is, unless ``HF_ENDPOINT`` says otherwise (as for huggingface_hub).
HUB_ENDPOINT = "https://huggingface.co"

_REPO_TYPES = ("datasets/", "spaces/")


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
    rest = url[len("hf://") :]
    kind = next((prefix for prefix in _REPO_TYPES if rest.startswith(prefix)), "")
    parts = rest[len(kind) :].split("/", 2)
    if len(parts) < 3 or not all(parts):
        raise ValueError(
            f"expected hf://[datasets/|spaces/]<org>/<repo>[@<revision>]/<file>, not {url!r}"
        )
    org, repo, path = parts
    repo, _, revision = repo.partition("@")
    revision = unquote(revision) or "main"
    base = (endpoint or os.environ.get("HF_ENDPOINT") or HUB_ENDPOINT).rstrip("/")
    return (
        f"{base}/{kind}{quote(org)}/{quote(repo)}/resolve/{quote(revision, safe='')}/{quote(path)}"
    )
