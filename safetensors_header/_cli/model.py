"""``inspect --tree``'s "model" section: what the model is, its parameters as its model card
counts them, the memory it needs, and the evidence (``describe_model``'s `ModelInfo`).

Layer: adapters (the command line).
"""

from __future__ import annotations

from .._core.records import field_names
from .._describe import config_of
from .._model import ModelInfo, describe
from .output import STDIN, Output, cut, human_bytes, human_count

__all__ = ["describe_read", "model_document", "model_lines"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Final

    from .reading import Read

_SHOWN_DETAIL: Final = 200  # characters of an evidence's detail the text shows


def describe_read(read: Read, *, context: int | None = None, batch: int = 1) -> ModelInfo:
    """The model of a source as read: its headers, and the config.json beside it (a local
    one's, or a remote one's first file's: one request)."""
    notes: list[str] = []
    config = None
    if read.source == STDIN:
        notes.append("standard input has no config.json beside it")
    else:
        shards = read.checkpoint.shards if read.checkpoint is not None else {}
        config = config_of(read.source, shards, notes)
    return describe(read.headers, config=config, notes=notes, context=context, batch=batch)


def model_document(info: ModelInfo) -> object:
    """The --json "model" object: every field of the record, exact."""
    return _plain_value(info)


def _plain_value(value: object) -> object:
    if hasattr(type(value), "__dataclass_fields__"):  # a record
        return {name: _plain_value(getattr(value, name)) for name in field_names(type(value))}
    if isinstance(value, tuple):
        return [_plain_value(item) for item in value]
    if hasattr(value, "items"):  # a mapping
        return {key: _plain_value(item) for key, item in value.items()}
    return value


def model_lines(out: Output, info: ModelInfo, *, exact: bool) -> None:
    """A few lines on top of the tree: the kind, the parameters, the memory, the estimate,
    then the evidence and the notes."""

    def say(text: str) -> None:
        if not out.tty or out.wide:
            return out.line(text)
        import textwrap  # (on a terminal only: a start pays for every import)

        width = max(out.width(), 20)
        return out.lines(textwrap.wrap(out.shown(text), width, subsequent_indent="    "))

    def size(number: int) -> str:
        return f"{number:,} bytes" if exact else human_bytes(number)

    def many(number: int) -> str:
        return f"{number:,}" if exact else human_count(number)

    kind = f"{'an' if info.kind[0] in 'aeiou' else 'a'} {info.kind}"
    if info.architecture is not None:
        kind += f" ({info.architecture})"
    schemes = [
        f"{q.scheme}, {q.bits} bits"
        + ("" if q.group_size is None else f", groups of {q.group_size:,}")
        for q in info.quantization
    ]
    say(f"model: {kind}" + (f", quantized: {'; '.join(schemes)}" if schemes else ""))
    if info.adapter is not None:
        adapter = info.adapter
        ranks = ", ".join(map(str, adapter.ranks))
        say(
            f"  {adapter.method}: rank {ranks}, {adapter.pairs:,} modules "
            f"({', '.join(adapter.targets)})"
        )
    counted = f"  parameters: {many(info.parameters)}"
    packed = sum(q.parameters for q in info.quantization)
    if packed:
        counted += f" ({many(packed)} of them quantized), constants apart: {many(info.constants)}"
    if info.buffers:
        counted += f"; buffers apart: {many(info.buffers)}"
    if info.tied:
        counted += f"; tied, not stored: {', '.join(info.tied)}"
    say(counted)
    memory = info.memory
    say(
        f"  memory: {size(memory['stored'])} as stored; {size(memory['BF16'])} as BF16 or F16, "
        f"{size(memory['F8'])} as F8, {size(memory['4-bit'])} as 4-bit"
    )
    estimate = info.inference
    if estimate is not None:
        say(
            f"  inference: {estimate.context:,} tokens x {estimate.batch:,}: KV cache "
            f"{size(estimate.kv_cache)} ({estimate.kv_dtype}), {size(estimate.total)} with the "
            "weights"
        )
    for evidence in info.evidence:
        detail = cut(out.shown(evidence.detail), _SHOWN_DETAIL)
        say(f"  evidence: {evidence.claim} ({evidence.basis}): {detail}")
    for note in info.notes:
        say(f"  note: {note}")
