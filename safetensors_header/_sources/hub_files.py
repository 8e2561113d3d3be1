"""The Hugging Face Hub's files as `RangeFile` backends: an ``hf://`` path read at its HTTPS
URL (`HubFile`), and a repository named without a file (`HubRepository`).

Layer: sources. The standard library alone: fsspec and huggingface_hub are not used. What
the Hub's paths, tokens and errors are is `hub`'s.
"""

from __future__ import annotations

from .base import RangeFile
from .http_file import HttpFile
from .hub import REPOSITORY_NAMES, hub_headers, hub_repository, hub_url, online
from .urls import beside

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from .options import Clock, Options
    from .planning import Read

__all__ = ["HubFile", "HubRepository", "hub_file"]


def hub_file(path: str, options: Options) -> RangeFile:
    """An ``hf://`` path as the file at the Hub's HTTPS URL (`HubFile`), with the caller's
    token or the saved one (`hub_headers`): the standard library alone, fsspec and
    huggingface_hub unused. ``storage_options`` may hold ``token`` (a string, False for
    none, True for the saved one) and ``endpoint``. A repository named without a file is a
    `HubRepository`. With ``HF_HUB_OFFLINE`` set, a `RemoteError` before any request."""
    online(path)
    extra = dict(options.storage_options or {})
    token, endpoint = extra.pop("token", None), extra.pop("endpoint", None)
    if extra:
        raise ValueError(
            "an hf:// path is read over HTTPS without fsspec: storage_options takes only "
            f"'token' and 'endpoint' for it, not {sorted(extra)}; for fsspec's "
            "HfFileSystem, pass (HfFileSystem(...), path)"
        )
    if token is not None and not isinstance(token, (str, bool)):
        raise TypeError(
            f"storage_options' token must be a str, True or False, not {type(token).__name__}"
        )
    options = options.replace(headers=hub_headers(options.headers, token), storage_options=None)
    if hub_repository(path) is not None:
        return HubRepository(hub_repository(path) or path, options, endpoint)
    return HubFile(path, options, endpoint)


class HubFile(HttpFile):
    """A file of the Hub: read at its HTTPS URL (its resolve URL: a large file's bytes are
    at the signed URL of the CDN it redirects to, asked for again when that expires),
    named by its ``hf://`` path (a pickle holds the path, the endpoint and the resolve URL,
    never a signed one)."""

    def __init__(self, path: str, options: Options, endpoint: str | None) -> None:
        super().__init__(hub_url(path, endpoint=endpoint), options)
        self.path, self.endpoint = path, endpoint

    @property
    def location(self) -> str:
        return self.path

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def sibling(self, name: str) -> HubFile:
        return HubFile(beside(self.path, name), self.options, self.endpoint)


class HubRepository(RangeFile):
    """A repository of the Hub named without a file (``hf://org/repo[@revision]``): read as
    a checkpoint, its `REPOSITORY_NAMES` in turn (`candidates`); it has no bytes itself."""

    remote = True

    def __init__(self, path: str, options: Options, endpoint: str | None) -> None:
        super().__init__(options, path)
        self.endpoint = endpoint

    def candidates(self, *, follow_links: bool = False) -> list[RangeFile]:
        return [
            HubFile(self.shown + name, self.options, self.endpoint) for name in REPOSITORY_NAMES
        ]

    def none_found(self) -> Exception:
        from .._errors import RemoteError

        return RemoteError(
            f"{self.shown} has no {' and no '.join(REPOSITORY_NAMES)} at its top "
            "level: name the file to read (hf://<org>/<repo>/<file>)",
            url=self.shown,
            status=404,
        )

    def _first(self, count: int, clock: Clock) -> bytes:
        hub_url(self.shown)  # (raises what a path without a file is)
        raise AssertionError

    def _read_into(self, reads: Iterable[Read], clock: Clock) -> None:
        hub_url(self.shown)
        raise AssertionError
