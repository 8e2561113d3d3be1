"""Work on threads: jobs run in parallel, the first failure raised in the caller.

Layer: sources. Used by the backends (the parts of a long read, a local file's long read
over the cores) and the services (a checkpoint's shards, the hashes of many tensors).
"""

from __future__ import annotations

__all__ = ["map_parallel", "run_parallel"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, Final, TypeVar

    _T = TypeVar("_T")
    _R = TypeVar("_R")


def run_parallel(
    work: Callable[[_T], None], jobs: Iterable[_T], workers: int, *, first_alone: bool = False
) -> None:
    """`work(job)` for every job, on at most `workers` threads; the first failure is raised.

    The jobs are taken one at a time from `jobs` (which may be a generator: at most
    `workers` of them exist at once). With `first_alone`, the first job runs alone before
    the others start (it learns what they need: a URL's final address and identity). With
    one worker, at interpreter shutdown (no thread can be started) or for a single job,
    the jobs run in the calling thread.
    """
    jobs = iter(jobs)
    if first_alone:
        for job in jobs:
            work(job)
            break
    if workers <= 1:
        for job in jobs:
            work(job)
        return
    import threading

    lock = threading.Lock()
    failures: list[BaseException] = []

    def loop() -> None:
        while True:
            with lock:
                if failures:
                    return
                job = next(jobs, _DONE)
            if job is _DONE:
                return
            try:
                work(job)  # type: ignore[arg-type]
            except BaseException as error:  # re-raised in the calling thread
                with lock:
                    failures.append(error)
                return

    threads = []
    for _ in range(workers - 1):
        thread = threading.Thread(target=loop, daemon=True)
        try:
            thread.start()
        except RuntimeError:  # "can't create new thread at interpreter shutdown"
            break
        threads.append(thread)
    try:
        loop()  # the calling thread works too
    finally:
        for thread in threads:
            thread.join()
    if failures:
        raise failures[0]


def map_parallel(work: Callable[[_T], _R], jobs: Sequence[_T], workers: int) -> list[_R]:
    """`[work(job) for job in jobs]` on at most `workers` threads, in order."""
    results: list[Any] = [None] * len(jobs)

    def one(index: int) -> None:
        results[index] = work(jobs[index])

    run_parallel(one, range(len(jobs)), min(workers, len(jobs)))
    return results


_DONE: Final = object()
