"""``inspect --tree``: a model's structure at a glance, from its header alone.

Layer: adapters (the command line).

Tensor names are dotted module paths (``model.layers.0.self_attn.q_proj.weight``); the tree
groups them by those paths, and a run of numbered blocks of the same tensors (the same names
below the number, dtypes and shapes) is shown once: ``layers.{0..31}  x32``, with the
parameters and bytes of all 32. A block that differs (a mixture-of-experts layer among dense
ones) breaks the run, so that what is shown once is what every block of the run holds.
"""

from __future__ import annotations

from .._core.header import TensorInfo, shown_shape
from .columns import columns
from .output import Output, human_bytes, human_count

__all__ = ["Node", "tree_document", "tree_of", "tree_rows"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any, TypeAlias

    #: A tensor's place below a node: its name relative to the node, dtype, shape.
    Signature: TypeAlias = tuple[tuple[str, str, tuple[int, ...]], ...]


class Node:
    """A module path: the modules below it, and the tensors that end in it."""

    __slots__ = ("_signature", "_totals", "children", "tensors")

    def __init__(self) -> None:
        self.children: dict[str, Node] = {}
        self.tensors: list[tuple[str, TensorInfo]] = []  # (the name's last part, the tensor)
        self._signature: Signature | None = None
        self._totals: dict[str, tuple[int, int, int]] | None = None

    def signature(self) -> Signature:
        """Every tensor below, by its name relative to this node, with dtype and shape."""
        if self._signature is None:
            own = [(leaf, info.dtype, info.shape) for leaf, info in self.tensors]
            for key, child in self.children.items():
                own += [(f"{key}.{name}", dtype, shape) for name, dtype, shape in child.signature()]
            self._signature = tuple(sorted(own))
        return self._signature

    def totals(self) -> dict[str, tuple[int, int, int]]:
        """dtype -> (tensors, parameters, bytes) of everything below."""
        if self._totals is None:
            totals: dict[str, tuple[int, int, int]] = {}
            for _, info in self.tensors:
                _add(totals, info.dtype, (1, info.numel, info.nbytes))
            for child in self.children.values():
                for dtype, row in child.totals().items():
                    _add(totals, dtype, row)
            self._totals = totals
        return self._totals


def _add(totals: dict[str, tuple[int, int, int]], dtype: str, row: tuple[int, int, int]) -> None:
    old = totals.get(dtype, (0, 0, 0))
    totals[dtype] = (old[0] + row[0], old[1] + row[1], old[2] + row[2])


def tree_of(tensors: Iterable[TensorInfo]) -> Node:
    """The module tree of the tensors' dotted names."""
    root = Node()
    for info in tensors:
        *path, leaf = info.name.split(".")
        node = root
        for part in path:
            child = node.children.get(part)
            if child is None:
                child = node.children[part] = Node()
            node = child
        node.tensors.append((leaf, info))
    return root


def _natural(key: str) -> tuple[int, int | str]:
    """Numbered modules in number order (2 before 10), then the others by name."""
    return (0, int(key)) if key.isdigit() and len(key) < 19 else (1, key)


def _groups(node: Node) -> Iterator[tuple[str, list[Node]]]:
    """The node's children in order, runs of consecutive numbers with the same tensors as one
    group (``{0..31}``), every other child a group of one."""
    keys = sorted(node.children, key=_natural)
    index = 0
    while index < len(keys):
        key = keys[index]
        end = index + 1
        if key.isdigit() and len(key) < 19:
            signature = node.children[key].signature()
            while (
                end < len(keys)
                and keys[end].isdigit()
                and len(keys[end]) < 19
                and int(keys[end]) == int(keys[end - 1]) + 1
                and node.children[keys[end]].signature() == signature
            ):
                end += 1
        run = keys[index:end]
        label = run[0] if len(run) == 1 else f"{{{run[0]}..{run[-1]}}}"
        yield label, [node.children[k] for k in run]
        index = end


def _sum(nodes: list[Node]) -> dict[str, tuple[int, int, int]]:
    totals: dict[str, tuple[int, int, int]] = {}
    for node in nodes:
        for dtype, row in node.totals().items():
            _add(totals, dtype, row)
    return totals


#: A row: indent, label, repeat count, dtype(s), shape, parameters, bytes.
Row = tuple[int, str, int, str, str, int, int]


def _rows(node: Node, depth: int, prefix: str) -> Iterator[Row]:
    """The rows below `node`: its tensors, then its module groups (a group with one module
    below it and no tensor of its own is joined to it: ``model.layers``)."""
    for leaf, info in node.tensors:
        yield (
            depth,
            prefix + leaf,
            1,
            info.dtype,
            shown_shape(info.shape),
            info.numel,
            info.nbytes,
        )
    for label, group in _groups(node):
        nodes, first = group, group[0]
        name = prefix + label
        # A module with no tensor of its own and one group below is one row with it:
        # "model.layers", "model.layers.{0..31}".
        while len(nodes) == 1 and not first.tensors and first.children:
            groups = list(_groups(first))
            if len(groups) != 1:
                break
            [(below, nodes)] = groups
            name, first = f"{name}.{below}", nodes[0]
        if not first.children and len(nodes) == 1:
            # Only tensors below: each on a row of its own, named from here (q_proj.weight).
            yield from _rows(first, depth, name + ".")
            continue
        totals = _sum(nodes)
        yield (
            depth,
            name,
            len(nodes),
            "+".join(sorted(totals)),
            "",
            sum(row[1] for row in totals.values()),
            sum(row[2] for row in totals.values()),
        )
        yield from _rows(first, depth + 1, "")


def tree_rows(out: Output, root: Node, *, exact: bool) -> bool:
    """The tree as aligned rows: module, dtype, shape, parameters, bytes (a repeated block's
    parameters and bytes are those of all its copies; the rows below it are one copy's).
    Whether a block was repeated."""
    rows = []
    repeated = False
    for depth, label, repeat, dtype, shape, numel, nbytes in _rows(root, 0, ""):
        shown = "  " * depth + out.shown(label) + (f"  x{repeat}" if repeat > 1 else "")
        repeated = repeated or repeat > 1
        rows.append(
            (
                shown,
                dtype,
                shape,
                f"{numel:,}" if exact else human_count(numel),
                f"{nbytes:,}" if exact else human_bytes(nbytes),
            )
        )
    columns(out, ("module", "dtype", "shape", "parameters", "bytes"), rows, right=(3, 4))
    return repeated


def tree_document(root: Node) -> dict[str, Any]:
    """The tree for --json: exact numbers, every group with its dtypes' totals."""

    def document(node: Node) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = [
            {
                "name": leaf,
                "dtype": info.dtype,
                "shape": list(info.shape),
                "numel": info.numel,
                "nbytes": info.nbytes,
            }
            for leaf, info in node.tensors
        ]
        for label, nodes in _groups(node):
            totals = _sum(nodes)
            entries.append(
                {
                    "name": label,
                    "repeat": len(nodes),
                    "numel": sum(row[1] for row in totals.values()),
                    "nbytes": sum(row[2] for row in totals.values()),
                    "by_dtype": {
                        dtype: {"tensors": row[0], "numel": row[1], "nbytes": row[2]}
                        for dtype, row in sorted(totals.items())
                    },
                    "children": document(nodes[0]),
                }
            )
        return entries

    return {"children": document(root)}
