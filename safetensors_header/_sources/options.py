"""How a source is reached: every transport option and its default, in one record.

Layer: sources. The public functions take these options as ``**transport`` keywords
(``headers=``, ``timeout=``, ...: `_transport.Transport` types them) and build one `Options`
from them (`Options.given`), which every backend reads; a default lives here and nowhere
else. `Clock` is the deadline of one public call, shared by every
request the call makes (a checkpoint's shards too).
"""

from __future__ import annotations

import time

__all__ = ["FIRST_READ", "LOCAL_GAP", "PART_SIZE", "REMOTE_GAP", "RETRIES", "TIMEOUT"]
__all__ += ["TRANSPORT", "WORKERS", "Clock", "Options"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Final

#: Bytes asked for by the first request of a URL or an object. 97 % of the top-1000 models on
#: the Hugging Face Hub have N < 100 KB (82 % < 25 KB); 128 KiB covers every header up to
#: N = 131,064 bytes in one round trip, and the bytes past the header cost less than the round
#: trip a second request would (128 KiB is ~10 ms at 100 Mbit/s; a round trip to a CDN is
#: 20-200 ms). Capped by the file's size where a store says it first.
FIRST_READ: Final = 128 * 1024
#: Seconds a header read of a URL may take in all (connects, replies, retries). A read of
#: tensors has no bound on the whole call by default (a large download takes what it takes);
#: then every single wait (a connect, a socket read) still ends after this long.
TIMEOUT: Final = 10.0
RETRIES: Final = 2  # retries after the first attempt, so at most 3 attempts per request
# The longest single wait handed to a socket: 31 years, as good as none (a socket's timeout
# is held in nanoseconds in 64 bits, so `settimeout` refuses much over 9.2e9 seconds).
_LONGEST_WAIT: Final = 1e9
#: Requests in flight at once, for URLs and object stores: the shards' headers of a
#: checkpoint of up to 16 files in one round trip, and the parts of a long read.
WORKERS: Final = 16
#: A long remote read is cut into parts of this size, fetched in parallel: one connection
#: rarely carries more than 50-100 MB/s from a CDN or a bucket; several do.
PART_SIZE: Final = 16 << 20
#: Ranges of a URL or an object closer than this are one request: a round trip (20-200 ms to
#: a CDN or a bucket) costs more than a mebibyte on most links.
REMOTE_GAP: Final = 1 << 20
#: Ranges of a local file or a file object closer than this are one read: a page.
LOCAL_GAP: Final = 4096
#: The keywords of `Transport`: what every reading function takes as ``**transport``.
_TRANSPORT_ORDER: Final = (
    "headers",
    "timeout",
    "retries",
    "first_read",
    "storage_options",
    "max_workers",
    "part_size",
    "keep_alive",
)
TRANSPORT: Final = frozenset(_TRANSPORT_ORDER)


# `Options.given`'s options of a call given no transport keyword, by its defaults (a few).
_GIVEN: dict[tuple[tuple[str, Any], ...], Options] = {}


class Options:
    """The transport options of one call (or of a file opened once), checked, with their
    defaults: the keywords of `_transport.Transport` (whose docstring says what each does),
    and `gap`, ranges closer than which are one request (``None``: the source's default,
    `REMOTE_GAP` or `LOCAL_GAP`). ``timeout=float("inf")`` is kept as ``None``.
    """

    __slots__ = (*_TRANSPORT_ORDER, "gap")  # the order of Transport

    def __init__(
        self,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = TIMEOUT,
        retries: int = RETRIES,
        first_read: int = FIRST_READ,
        storage_options: Mapping[str, Any] | None = None,
        max_workers: int = WORKERS,
        part_size: int = PART_SIZE,
        keep_alive: bool = True,
        gap: int | None = None,
    ) -> None:
        if timeout is not None:
            if not timeout > 0:  # NaN too
                raise ValueError(
                    f"timeout must be a positive number of seconds or None, not {timeout!r}"
                )
            if timeout == float("inf"):
                timeout = None  # a common way to say "no bound"
        _at_least("retries", retries, 0)
        _at_least("first_read", first_read, 8, " (the length prefix)")
        _at_least("max_workers", max_workers, 1)
        _at_least("part_size", part_size, 1)
        if gap is not None:
            _at_least("gap", gap, 0)
        if not isinstance(keep_alive, bool):
            raise TypeError(f"keep_alive must be a bool, not {type(keep_alive).__name__}")
        self.headers, self.timeout, self.retries = headers, timeout, retries
        self.first_read, self.storage_options = first_read, storage_options
        self.max_workers, self.part_size, self.gap = max_workers, part_size, gap
        self.keep_alive = keep_alive

    @classmethod
    def given(cls, function: str, transport: Mapping[str, Any], /, **defaults: Any) -> Options:
        """The options a public function was given as its ``**transport`` keywords (the
        names of `Transport`), over the function's own `defaults` (``timeout=None`` where it
        reads tensors, its ``gap``)."""
        if not transport:  # the common call: its defaults' options, made once
            key = tuple(defaults.items())
            try:
                return _GIVEN[key]
            except KeyError:
                made = _GIVEN[key] = cls(**defaults)
                return made
            except TypeError:  # (an unhashable default)
                return cls(**defaults)
        for name in transport:
            if name not in TRANSPORT:
                raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")
        return cls(**{**defaults, **transport})

    def replace(self, **changes: Any) -> Options:
        """A copy with some options changed (and checked); itself when none changes (options
        are never changed in place)."""
        if all(getattr(self, name) is value for name, value in changes.items()):
            return self
        values = {name: getattr(self, name) for name in self.__slots__}
        return Options(**{**values, **changes})

    def clock(self, default: float | None = None) -> Clock:
        """The deadline of a call made now: `timeout`, else `default`."""
        return Clock(default if self.timeout is None else self.timeout)

    def __reduce__(self) -> tuple[object, ...]:
        values = {name: getattr(self, name) for name in self.__slots__}
        for name in ("headers", "storage_options"):
            if values[name] is not None:
                values[name] = dict(values[name])
        return (_rebuilt, (values,))

    def __repr__(self) -> str:
        # Headers may hold credentials: their names only.
        shown = ", ".join(
            f"{name}=<{', '.join(map(str, self.headers))}>"
            if name == "headers" and self.headers
            else f"{name}={getattr(self, name)!r}"
            for name in self.__slots__
        )
        return f"Options({shown})"


def _rebuilt(values: dict[str, Any]) -> Options:
    return Options(**values)


def _at_least(name: str, value: int, low: int, why: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be at least {low}{why}, not {value}")


class Clock:
    """The deadline of one call: what every connect, socket read and retry may still wait."""

    __slots__ = ("deadline", "timeout")

    def __init__(self, timeout: float | None) -> None:
        if timeout is not None and timeout == float("inf"):
            timeout = None
        self.timeout = timeout
        self.deadline = None if timeout is None else time.monotonic() + timeout

    def left(self) -> float:
        """Seconds the next wait may take; TimeoutError when the call's time is up."""
        if self.deadline is None:
            return TIMEOUT  # no bound on the call: each wait still ends after a stall
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the call's timeout of {self.timeout:g} s is up")
        return min(left, _LONGEST_WAIT)

    def allows(self, delay: float) -> bool:
        """Whether there is time for a wait of `delay` seconds and another attempt."""
        return self.deadline is None or time.monotonic() + delay < self.deadline

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline
