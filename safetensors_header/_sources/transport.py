"""`Transport`: the keywords that say how a source is reached, typed once for every function.

Layer: sources. Every reading function takes these as ``**transport`` keywords (``headers=``,
``timeout=``, ...), checked and given their defaults by `_options.Options`, the one place that
holds them. This module is imported for the type only (it imports `typing`, which reading a
header does not).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from .._core.records import publish

__all__ = ["Transport"]


class Transport(TypedDict, total=False):
    """How a remote source is reached: the keyword arguments every reading function takes.

    ``read_header(url, headers=..., timeout=5)``, ``read_checkpoint(url, retries=4)``,
    ``numpy.load(url, max_workers=32)``, ... Each is optional; local sources (paths, file
    objects, bytes) ignore them, but for ``max_workers``, so that one call can serve both. A
    name not listed here is a ``TypeError``.

    Attributes:
        headers: For URLs: extra request headers, e.g. ``{"Authorization": "Bearer ..."}``.
            ``Authorization`` and ``Cookie`` go only to the URL's own scheme, host and port,
            never on to a host it redirects to; ``Range`` and ``If-Range`` are set by the
            library. Default: none.
        timeout: For URLs and object stores: seconds the whole call may take: connects,
            every read of a reply (a server that trickles bytes, or answers ``100 Continue``
            without end, is cut off), the waits between retries, a checkpoint's index and
            every shard. ``None`` or ``float("inf")``: no bound on the whole call, each wait
            still at most 10 s. Default: 10 s for a header or a checkpoint's headers, none
            for reading tensors (a large download takes what it takes).
        retries: For URLs and object stores: how many times to retry a request after a
            connection error, a timeout, a body cut short or a 5xx status, waiting 0.25 s,
            0.5 s, ... (with jitter). 4xx statuses are never retried. Default: 2.
        first_read: For URLs and object stores: bytes asked for by the first request of a
            file (at least 8). Default: 128 KiB, which holds the whole header of 97 % of
            popular models in one round trip.
        storage_options: For fsspec URLs: passed to ``fsspec.core.url_to_fs``
            (credentials, an ``endpoint_url``, ...). Default: none.
        max_workers: Requests in flight at once (a checkpoint's shards; the parts of a
            long read, at most 2 per core, or 4: past that, more streams cost this process
            more CPU than they add speed); for local files, reads at once, at most 1 per
            core.
            Default: 16.
        part_size: How a long read is cut for URLs and object stores: a read longer than
            this is cut into equal parts, fetched in parallel, each at most `part_size`
            bytes, or, where that would make more parts than there are streams (see
            `max_workers`), one part per stream of up to ``4 * part_size`` (fewer
            requests, each a round trip, while every stream stays busy). Default: 16 MiB.
        keep_alive: For URLs: whether requests go on the process's kept-alive connections
            (one per host, reused by the calls that follow: no new connection or TLS
            handshake each time). ``False``: each request on a new connection, closed
            after its reply. ``SAFETENSORS_HEADER_KEEP_ALIVE=0`` in the environment turns
            them off for every call. Default: ``True``.
    """

    headers: Mapping[str, str] | None
    timeout: float | None
    retries: int
    first_read: int
    storage_options: Mapping[str, Any] | None
    max_workers: int
    part_size: int
    keep_alive: bool


publish(Transport)
