"""What the numpy, torch and JAX loaders share: a file's tensors by name, each read when it is
indexed (`TensorsBase`, `LazyTensorBase`); the loaders open their sources with
`_fetch.open_to_load`, choose tensors with `_fetch.chosen_tensors` and plan a rank's share with
`_ranks.rank_plan`.

Layer: services (the loaders' common part, on the data path).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TypeVar

from ._core.header import shown_shape

__all__ = ["LazyTensorBase", "TensorsBase"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._core.header import Header, TensorInfo
    from ._fetch import SafetensorsFile

_Lazy = TypeVar("_Lazy", bound="LazyTensorBase")


class TensorsBase(Mapping[str, _Lazy]):
    """Tensor name -> lazy tensor, in the file's order.

    Attributes:
        header: The file's `Header` (``header.metadata`` is the reference's ``metadata()``).
        file: The `SafetensorsFile` its tensors are read from.
    """

    __slots__ = ("file", "header")

    def __init__(self, file: SafetensorsFile) -> None:
        self.file = file
        self.header: Header = file.header

    def __getitem__(self, name: str) -> _Lazy:
        return self._lazy(self.header.tensors[name])

    def _lazy(self, info: TensorInfo) -> _Lazy:
        """The lazy tensor of `info` (each loader's own)."""
        raise NotImplementedError

    def __iter__(self) -> Iterator[str]:
        return iter(self.header.tensors)

    def __len__(self) -> int:
        return len(self.header.tensors)

    def __repr__(self) -> str:
        count = len(self)
        return f"<Tensors {count:,} tensor{'' if count == 1 else 's'}>"


class LazyTensorBase:
    """One tensor of a file, not read yet: index it to read (part of) it.

    Attributes:
        info: Its `TensorInfo` (name, dtype name, shape as in the header, byte range).
    """

    __slots__ = ("info",)

    def __init__(self, info: TensorInfo) -> None:
        self.info = info

    @property
    def shape(self) -> tuple[int, ...]:
        return self.info.shape

    @property
    def ndim(self) -> int:
        return len(self.info.shape)

    def __len__(self) -> int:
        if not self.info.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        shape = shown_shape(self.info.shape)
        return f"<LazyTensor {self.info.name!r} {self.info.dtype} {shape}>"
