"""Icechunk repositories of virtual safetensors tensors, with the error-prone set-up done.

Layer: adapters (on `safetensors_header.virtualizarr`).

    >>> import icechunk, zarr  # doctest: +SKIP
    >>> from safetensors_header.icechunk import create_repository, url_prefixes  # doctest: +SKIP
    >>> from safetensors_header.icechunk import commit_virtual, open_store  # doctest: +SKIP
    >>> storage = icechunk.local_filesystem_storage("/repos/llama")  # doctest: +SKIP
    >>> repo = create_repository(storage, url_prefixes(vds))  # doctest: +SKIP
    >>> commit_virtual(repo, vds, "Llama, virtual")  # doctest: +SKIP
    >>> store = open_store(storage, ["file:///models/llama/"])  # doctest: +SKIP
    >>> tensors = read_tensors(zarr.open_group(store, mode="r"))  # doctest: +SKIP

Icechunk reads a virtual chunk only from a *virtual chunk container* that the repository's
config declares for the chunk's URL prefix (``file:///models/``, ``s3://bucket/``), and only
when the code that opens the repository authorizes that container, both when writing and
again every time it is opened; a read-only store is then the store of a read-only session.
Each step fails late and far from its cause when it is missed (a write that refuses the
references, or reads that fail much later). `create_repository`, `open_repository` and
`open_store` take the URL prefixes once and do all of it; `url_prefixes` finds them in a
virtual dataset; `commit_virtual` writes the dataset and commits.

Needs icechunk 2 (Python 3.12 or newer) and VirtualiZarr (``pip install
'safetensors_header[icechunk]'``); importing this module imports them.
"""

from __future__ import annotations

import atexit
import functools
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from ._extras import optional_imports

with optional_imports("icechunk", "safetensors_header.icechunk"):
    import icechunk
    import numpy as np
    import xarray as xr
    from virtualizarr.manifests import ManifestArray

__all__ = ["commit_virtual", "create_repository", "open_repository", "open_store"]
__all__ += ["authorizations", "url_prefixes", "virtual_chunk_container"]


def url_prefixes(source: xr.Dataset | Iterable[str], /) -> list[str]:
    """The URL prefixes that virtual chunk containers must cover: the files' directories.

    `source` is a virtual dataset (the URLs of its chunks are read from its manifests) or
    URLs. Each URL's directory, ending in ``/``, is a prefix; one inside another is left out.
    Sorted.
    """
    urls: set[str] = set()
    if isinstance(source, xr.Dataset):
        for variable in source.variables.values():
            data = variable.data
            if isinstance(data, ManifestArray) and variable.size:
                urls.update(entry["path"] for entry in data.manifest.values())
    else:
        urls.update(source)
    folders = sorted({url[: url.rfind("/") + 1] for url in urls})
    kept: list[str] = []
    for folder in folders:  # sorted: a folder comes right after the ones it is inside
        if not any(folder.startswith(parent) for parent in kept):
            kept.append(folder)
    return kept


def virtual_chunk_container(
    prefix: str, /, store: Any | None = None
) -> icechunk.VirtualChunkContainer:
    """A container for the chunks under `prefix`, with the object store its scheme needs.

    ``file://`` (a local directory), ``http://`` and ``https://``, ``s3://``, ``gs://`` and
    ``gcs://`` have a default store (``icechunk.local_filesystem_store`` at the prefix's
    directory, ``http_store()``, ``s3_store()``, ``gcs_store()``); pass `store` (an
    ``icechunk`` store config, e.g. ``icechunk.s3_store(region="eu-west-1")``) for another
    scheme or other options.

    Raises:
        ValueError: `prefix` does not end in ``/``, or has a scheme with no default store
            and no `store` is given.
    """
    if not prefix.endswith("/"):
        raise ValueError(f"a container's URL prefix must end in '/': {prefix!r}")
    if store is None:
        scheme = urlsplit(prefix).scheme.lower()
        if scheme == "file":
            store = icechunk.local_filesystem_store(unquote(urlsplit(prefix).path))
        elif scheme in ("http", "https"):
            store = icechunk.http_store()
        elif scheme == "s3":
            store = icechunk.s3_store()
        elif scheme in ("gs", "gcs"):
            store = icechunk.gcs_store()
        else:
            raise ValueError(
                f"no default object store for {prefix!r}: pass store= (an icechunk store "
                "config, such as icechunk.s3_store(...))"
            )
    return icechunk.VirtualChunkContainer(prefix, store)


def create_repository(
    storage: icechunk.Storage,
    prefixes: Iterable[str],
    /,
    *,
    config: icechunk.RepositoryConfig | None = None,
    stores: Mapping[str, Any] | None = None,
    credentials: Mapping[str, Any] | None = None,
) -> icechunk.Repository:
    """A new repository whose config has a virtual chunk container for each prefix.

    Args:
        storage: Where the repository is kept (``icechunk.local_filesystem_storage(path)``,
            ``icechunk.s3_storage(...)``, ...).
        prefixes: The URL prefixes of the files the chunks are in (`url_prefixes`).
        config: A config to add the containers to; the default one otherwise.
        stores: Prefix -> an icechunk store config, for the prefixes whose default
            (`virtual_chunk_container`) does not suit.
        credentials: Prefix -> the credentials to read its chunks with (see
            `authorizations`); by default none for ``file://`` and ``http(s)://`` and the
            environment's for the clouds.

    Returns:
        The repository, opened with those containers authorized: write to a
        ``writable_session``'s store (`commit_virtual`).
    """
    _settle_at_exit()
    prefixes = list(prefixes)
    config = config if config is not None else icechunk.RepositoryConfig.default()
    for prefix in prefixes:
        config.set_virtual_chunk_container(
            virtual_chunk_container(prefix, (stores or {}).get(prefix))
        )
    return icechunk.Repository.create(
        storage, config, authorize_virtual_chunk_access=authorizations(prefixes, credentials)
    )


def open_repository(
    storage: icechunk.Storage,
    prefixes: Iterable[str],
    /,
    *,
    credentials: Mapping[str, Any] | None = None,
) -> icechunk.Repository:
    """An existing repository, its virtual chunks under `prefixes` authorized.

    Only the containers named are authorized: Icechunk never reads a virtual chunk that the
    code opening the repository has not allowed (a repository written by someone else could
    otherwise point at any file of the reader's).
    """
    _settle_at_exit()
    return icechunk.Repository.open(
        storage, authorize_virtual_chunk_access=authorizations(prefixes, credentials)
    )


def open_store(
    storage: icechunk.Storage,
    prefixes: Iterable[str],
    /,
    *,
    branch: str = "main",
    credentials: Mapping[str, Any] | None = None,
) -> icechunk.IcechunkStore:
    """The read-only store of a branch of an existing repository, its chunks authorized.

    Open it with ``zarr.open_group(store, mode="r")`` or ``xarray.open_zarr(store,
    consolidated=False)``, and read the tensors with ``safetensors_header.zarr.read_tensors``.
    """
    repository = open_repository(storage, prefixes, credentials=credentials)
    return repository.readonly_session(branch).store


def commit_virtual(
    repository: icechunk.Repository,
    dataset: xr.Dataset,
    message: str,
    /,
    *,
    branch: str = "main",
    **to_icechunk: Any,
) -> str:
    """Write a virtual dataset to a branch in a new writable session, commit, and return the
    snapshot id.

    Zero-size virtual variables (tensors with a 0 in their shape, which have no chunk) are
    written as the empty arrays they are: VirtualiZarr before 2.7.2 fails on them
    (``ValueError: Iteration of zero-sized operands is not enabled``), and an empty array
    has nothing to refer to. Other keyword arguments go to ``dataset.vz.to_icechunk``.
    """
    session = repository.writable_session(branch)
    _with_empties_loaded(dataset).vz.to_icechunk(session.store, **to_icechunk)
    return str(session.commit(message))


# icechunk's worker threads drop Python objects (the task locals of pyo3-async-runtimes) just
# after a read has returned its result; when the program ends at that moment, the drop races
# the interpreter's finalization and crashes the process (SIGSEGV in context_tp_dealloc on
# Python 3.13: PyO3/pyo3-async-runtimes#40). Measured on the 2-core machine, the docs example
# under load: 9 crashes in 160 runs, none in 200 with this pause before finalization.
_EXIT_PAUSE = 0.1


@functools.cache  # once per process
def _settle_at_exit() -> None:
    """Let icechunk's threads finish before the interpreter exits."""
    atexit.register(time.sleep, _EXIT_PAUSE)


def _with_empties_loaded(dataset: xr.Dataset) -> xr.Dataset:
    """The dataset with each zero-size virtual variable an empty numpy array instead."""
    empties = {
        name: xr.Variable(
            variable.dims,
            np.empty(variable.shape, dtype=variable.dtype),
            attrs=variable.attrs,
            encoding={"chunks": variable.data.metadata.chunks},  # as the virtual array had
        )
        for name, variable in dataset.variables.items()
        if isinstance(variable.data, ManifestArray) and variable.size == 0
    }
    return dataset.assign(empties) if empties else dataset


def authorizations(
    prefixes: Iterable[str], credentials: Mapping[str, Any] | None = None, /
) -> dict[str, Any]:
    """``authorize_virtual_chunk_access`` for the prefixes: their credentials.

    A prefix in `credentials` gets its value. Otherwise ``file://`` and ``http(s)://`` get
    icechunk's no-credential markers (``icechunk.credentials.LocalFileSystemAccess`` and
    ``HttpAccess``; ``None`` before icechunk had them), ``s3://`` and ``gs://`` the
    environment's credentials (``s3_from_env_credentials()``, ``gcs_from_env_credentials()``).
    """
    given = dict(credentials or {})
    result: dict[str, Any] = {}
    for prefix in prefixes:
        if prefix in given:
            result[prefix] = given[prefix]
            continue
        scheme = urlsplit(prefix).scheme.lower()
        if scheme == "file":
            result[prefix] = getattr(icechunk.credentials, "LocalFileSystemAccess", None)
        elif scheme in ("http", "https"):
            result[prefix] = getattr(icechunk.credentials, "HttpAccess", None)
        elif scheme == "s3":
            result[prefix] = icechunk.s3_from_env_credentials()
        elif scheme in ("gs", "gcs"):
            result[prefix] = icechunk.gcs_from_env_credentials()
        else:
            result[prefix] = None
    authorized: dict[str, Any] = icechunk.containers_credentials(result)
    return authorized
