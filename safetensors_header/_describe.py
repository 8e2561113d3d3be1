"""`describe_model`: what a model is and what it needs, from a source's headers and the
config.json beside it.

Layer: services (on checkpoints and the data path); the description itself is `_model`'s.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping

from ._checkpoint import Checkpoint, read_checkpoint
from ._core.header import Header
from ._documents import json_document
from ._errors import RemoteError
from ._fetch import SafetensorsFile, read_beside
from ._model import ModelInfo, describe

__all__ = ["config_beside", "config_of", "describe_model"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any, Final, TypeGuard

    from typing_extensions import Unpack

    from ._sources.transport import Transport

CONFIG_NAME: Final = "config.json"
# The largest config.json read. The configs of the largest published models are tens of KB;
# one of 10^7 bytes is not a config, and reading it stops there.
_MAX_CONFIG_SIZE: Final = 10_000_000
# The largest bitsandbytes quant state read: its JSON is about 200 bytes.
_MAX_STATE_SIZE: Final = 65_536
_QUANT_STATE_SUFFIX: Final = ".weight.quant_state.bitsandbytes__"
# Opening a config: O_NONBLOCK so that a FIFO does not wait for a writer (it is then refused
# as not a regular file).
_CONFIG_FLAGS: Final = (
    os.O_RDONLY
    | getattr(os, "O_BINARY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NONBLOCK", 0)
)


def describe_model(
    source: Any,
    /,
    *,
    config: Mapping[str, Any] | None = None,
    context: int | None = None,
    batch: int = 1,
    kv_dtype: str | None = None,
    read_data: bool = False,
    **transport: Unpack[Transport],
) -> ModelInfo:
    """What a model is, how many parameters it has as its model card counts them, and the
    memory it needs: from its headers alone (and its config.json, where there is one).

    The kind (a model, a LoRA adapter, an embedding model, a diffusers component), each
    quantization scheme (GPTQ, AWQ, compressed-tensors, bitsandbytes 4-bit and 8-bit, FP8,
    NVFP4, MXFP4, the F4 and F6 dtypes) and tied weights are told with their evidence
    (`ModelInfo.evidence`): never a guess without one. Packed weights are counted unpacked
    (an I32 of GPTQ or AWQ holds ``32 / bits`` values, a U8 of 4-bit values two), their
    scales and zero points apart (`ModelInfo.constants`), so that a quantized model counts
    the parameters of the model it was made from.

    With a config (the ``config`` given, or the ``config.json`` beside the source),
    `ModelInfo.inference` estimates the memory to run the model as hf-mem does:
    ``weights + 2 * tokens * kv_heads * head_dim * bytes(kv_dtype) * batch``, ``tokens``
    being ``context`` for each full-attention layer (see `Inference`).

    Args:
        source: What `read_checkpoint` reads (a file, an index, a directory, a URL, an
            ``hf://`` path...), or headers read already: a `Header`, a `Checkpoint`, a
            `SafetensorsFile`, or a mapping of file names to `Header`.
        config: The model's config.json, as a dict. By default the ``config.json`` beside
            the source is read, if there is one (beside a local file, index or directory;
            beside a URL, an ``hf://`` file or repository, a store's path: one request);
            ``{}`` reads none.
        context: Tokens a sequence, for the estimate (default: the config's
            ``max_position_embeddings``, as hf-mem's).
        batch: Sequences at once, for the estimate.
        kv_dtype: The KV cache's dtype (``"BF16"``, ``"F8_E4M3"``...); by default an FP8
            quantization's, else the config's ``torch_dtype``, else F16 (hf-mem's rule).
        read_data: Read bitsandbytes' 4-bit quant states (a few hundred bytes each, one
            a weight) for the weights' exact shapes; without it a 4-bit weight of ``n``
            bytes holds ``2 n`` parameters (one more than some of odd size had).
        **transport: How a URL or an object store is reached (`Transport`), for reading
            `source` with `read_checkpoint`.

    Returns:
        A `ModelInfo`.

    Raises:
        HeaderError, RemoteError, OSError: As `read_checkpoint` (reading the source).
        ValueError: `batch` or `context` is not a positive int, or `kv_dtype` is no dtype.
    """
    notes: list[str] = []
    shards: Mapping[str, SafetensorsFile] = {}
    weight_map: Mapping[str, str] = {}
    files: Mapping[str, Header]
    if isinstance(source, Header):
        files = {"": source}
    elif isinstance(source, Checkpoint):
        files, shards, weight_map = source.files, source.shards, source.weight_map
    elif isinstance(source, SafetensorsFile):
        files, shards = {"": source.header}, {"": source}
        weight_map = dict.fromkeys(source.header.tensors, "")
    elif isinstance(source, Mapping):
        files = source
    else:
        checkpoint = read_checkpoint(source, **transport)
        files, shards, weight_map = checkpoint.files, checkpoint.shards, checkpoint.weight_map
        if config is None:
            config = config_of(source, shards, notes, **transport)
    data: dict[str, bytes] = {}
    if read_data:
        data = _quant_states(files, shards, weight_map, notes)
    return describe(
        files,
        config=config,
        context=context,
        batch=batch,
        kv_dtype=kv_dtype,
        data=data,
        notes=notes,
    )


def config_of(
    source: object,
    shards: Mapping[str, SafetensorsFile],
    notes: list[str],
    **transport: Unpack[Transport],
) -> dict[str, Any] | None:
    """The config.json of a model read from `source` (its files opened as `shards`): beside
    a local source as it was named (a directory holds its config.json), else beside its
    first file, as its shards are named; see `config_beside`."""
    beside = source if _local(source) or not shards else next(iter(shards.values()))
    return config_beside(beside, notes, **transport)


def _local(source: object) -> TypeGuard[str | os.PathLike[str]]:
    """Whether `source` is a local path (a file, an index or a directory)."""
    return isinstance(source, (str, os.PathLike)) and "://" not in os.fsdecode(source)


def config_beside(
    source: object, notes: list[str], **transport: Unpack[Transport]
) -> dict[str, Any] | None:
    """The config.json beside a file or index (a path, a URL, an ``hf://`` path, a store's
    path, a file opened already), or in a local directory; None (and a note that says why,
    in `notes`) when there is none to read or it is no JSON object."""
    if _local(source):
        raw = _local_config(os.fsdecode(source), notes)
    else:
        raw = _remote_config(source, notes, transport)
    if raw is None:
        return None
    if len(raw) > _MAX_CONFIG_SIZE:
        notes.append(f"{CONFIG_NAME} beside the weights is over {_MAX_CONFIG_SIZE:,} bytes")
        return None
    try:
        document = json_document(raw)
    except ValueError as error:  # (UnicodeDecodeError too)
        plain = isinstance(error, (json.JSONDecodeError, UnicodeDecodeError))
        why = "is not JSON" if plain else str(error).removeprefix("it ")
        notes.append(f"{CONFIG_NAME} beside the weights {why}: not used")
        return None
    if not isinstance(document, dict):
        notes.append(f"{CONFIG_NAME} beside the weights is not a JSON object: not used")
        return None
    return document


def _local_config(path: str, notes: list[str]) -> bytes | None:
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    where = os.path.join(folder, CONFIG_NAME)
    try:
        descriptor = os.open(where, _CONFIG_FLAGS)
    except FileNotFoundError:
        notes.append(f"no {CONFIG_NAME} beside the weights")
        return None
    except OSError as error:
        notes.append(f"{CONFIG_NAME} beside the weights cannot be read: {error.strerror}")
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            notes.append(f"{CONFIG_NAME} beside the weights is not a regular file: not read")
            return None
        with os.fdopen(descriptor, "rb", closefd=False) as file:
            return file.read(_MAX_CONFIG_SIZE + 1)
    finally:
        os.close(descriptor)


def _remote_config(source: object, notes: list[str], transport: Mapping[str, Any]) -> bytes | None:
    """The config.json beside a remote file: one request (its sibling's URL, as a
    checkpoint's shards are named); a 404 is a note, as a missing local one is."""
    try:
        return read_beside(source, CONFIG_NAME, _MAX_CONFIG_SIZE, **transport)  # type: ignore[arg-type]
    except RemoteError as error:
        if error.status == 404:
            notes.append(f"no {CONFIG_NAME} beside the weights")
        else:
            notes.append(f"{CONFIG_NAME} beside the weights cannot be read: {error}")
    except (OSError, TypeError, ValueError) as error:  # a source with no file beside it
        notes.append(f"{CONFIG_NAME} beside the weights cannot be read: {error}")
    return None


def _quant_states(
    files: Mapping[str, Header],
    shards: Mapping[str, SafetensorsFile],
    weight_map: Mapping[str, str],
    notes: list[str],
) -> dict[str, bytes]:
    """The bytes of every bitsandbytes quant state, by name, read a shard at a time."""
    wanted: dict[str, list[tuple[str, int, int]]] = {}
    for header in files.values():
        for info in header.tensors.values():
            if _QUANT_STATE_SUFFIX in info.name and info.nbytes <= _MAX_STATE_SIZE:
                shard = weight_map.get(info.name)
                if shard is None or shard not in shards:
                    notes.append("the quant states were not read: headers without their files")
                    return {}
                wanted.setdefault(shard, []).append((info.name, info.start, info.nbytes))
    data: dict[str, bytes] = {}
    for shard, states in wanted.items():
        views = shards[shard].read_ranges([(start, length) for _, start, length in states])
        data.update((name, bytes(view)) for (name, _, _), view in zip(states, views, strict=True))
    return data
