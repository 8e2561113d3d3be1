"""The optional libraries: the extra that installs each, the Python it needs, and the error
raised when one is missing.

Layer: core (standard library only, no I/O). An adapter imports its libraries at its top
inside ``with optional_imports(extra, needed_by):``, which turns a `ModuleNotFoundError` into
`missing`'s: a message that names the module, the extra to install and the Python that extra
installs on, so that an extra which installed nothing on an older Python (its markers keep it
installable there, as nothing) is said to be the cause instead of a bare ``No module named
'obspec_utils'``.
"""

from __future__ import annotations

import sys

__all__ = ["EXTRAS", "install_hint", "missing", "optional_imports"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Final

#: Each extra of pyproject.toml -> the oldest Python it installs its libraries on (the
#: ``python_version`` markers there; tests/test_extras.py checks that the two agree).
EXTRAS: Final[dict[str, tuple[int, int]]] = {
    **dict.fromkeys(("numpy", "ml-dtypes", "fsspec", "s3", "obstore", "awkward"), (3, 10)),
    **dict.fromkeys(("dask", "blake3", "torch", "tensorflow", "paddle", "mlx"), (3, 10)),
    "zarr": (3, 11),  # zarr 3
    "virtualizarr": (3, 11),  # VirtualiZarr 2
    "jax": (3, 11),  # JAX 0.10
    "icechunk": (3, 12),  # icechunk 2
}


def install_hint(extra: str, /) -> str:
    """``pip install 'safetensors_header[extra]' (Python 3.x+)``, and when this Python is
    older than that, that it is (the extra's markers leave the library out here)."""
    major, minor = EXTRAS[extra]
    if sys.version_info >= (major, minor):
        return f"pip install 'safetensors_header[{extra}]' (Python {major}.{minor}+)"
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return (
        f"pip install 'safetensors_header[{extra}]' (Python {major}.{minor}+; this is Python "
        f"{here}, where the extra leaves it out)"
    )


def missing(error: ModuleNotFoundError, extra: str, needed_by: str, /) -> ModuleNotFoundError:
    """The error for `error`, an optional library not installed: that `needed_by` (a module,
    a function) needs it, and how to install it (`install_hint`). Raise it ``from None``."""
    name = error.name or str(error)
    return ModuleNotFoundError(
        f"{needed_by} needs {name}, which is not installed: {install_hint(extra)}", name=name
    )


class optional_imports:
    """``with optional_imports("numpy", __name__): import numpy as np``: an import of the
    block that finds no module raises `missing`'s error, which names `needed_by` and the
    `extra` that installs it."""

    __slots__ = ("extra", "needed_by")

    def __init__(self, extra: str, needed_by: str, /) -> None:
        self.extra, self.needed_by = extra, needed_by

    def __enter__(self) -> None:
        return None

    def __exit__(self, *raised: object) -> None:  # (type, error, traceback), or Nones
        error = raised[1]
        if isinstance(error, ModuleNotFoundError):
            raise missing(error, self.extra, self.needed_by) from None
