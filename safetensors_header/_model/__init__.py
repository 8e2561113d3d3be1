"""What a model is, from its headers: its kind, its quantization, its parameters as a model
card counts them, and the memory it needs.

Layer: core (sans-IO): headers, a config.json's object and, optionally, the bytes of a few
small tensors in; a `ModelInfo` out. `describe_model` (``_describe``) reads them from a source.

Every guess comes with its evidence (`Evidence`): the tensor names, dtypes, shapes, metadata
keys or config entries it rests on. `describe` puts the pieces together:

* `records`: the public records (`ModelInfo`, `Evidence`, `Quantization`...), and `Said`,
  the evidence and notes of one description as they are found;
* `schemes`: each module's quantization scheme (the packings, in its docstring) and what each
  tensor counts for, parameters or constants;
* `kinds`: a model, a LoRA adapter, an embedding model or a diffusers component; tied weights;
* `memory`: the weights' bytes at the usual widths, and hf-mem's inference estimate.
"""

from __future__ import annotations

from .._core.fileformat import DTYPE_BITS
from .kinds import buffers, kind_of, lora_adapter, tied_weights
from .memory import WIDTHS, inference_estimate
from .records import Adapter, DtypeParameters, Evidence, Inference, ModelInfo, Quantization, Said
from .schemes import quantization_config, quantizations, tensor_counts

__all__ = ["Adapter", "DtypeParameters", "Evidence", "Inference", "ModelInfo", "Quantization"]
__all__ += ["describe"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from .._core.header import Header
    from .records import Tensor


def describe(
    files: Mapping[str, Header],
    /,
    *,
    config: Mapping[str, Any] | None = None,
    context: int | None = None,
    batch: int = 1,
    kv_dtype: str | None = None,
    data: Mapping[str, bytes] | None = None,
    notes: Iterable[str] = (),
) -> ModelInfo:
    """What the model of these headers is (file name -> header), as `describe_model` says.

    `data` holds the bytes of bitsandbytes' quant-state tensors, by tensor name, for the exact
    shapes of 4-bit weights; `notes` are the caller's, put first.
    """
    if type(batch) is not int or batch < 1:
        raise ValueError(f"batch must be a positive int, not {batch!r}")
    if context is not None and (type(context) is not int or context < 1):
        raise ValueError(f"context must be a positive int or None, not {context!r}")
    if kv_dtype is not None and kv_dtype not in DTYPE_BITS:
        raise ValueError(
            f"kv_dtype must be a safetensors dtype name (BF16, F8_E4M3...), not {kv_dtype!r}"
        )
    tensors: dict[str, Tensor] = {}
    metadata: dict[str, str] = {}
    for header in files.values():
        for info in header.tensors.values():
            tensors[info.name] = (info.name, info.dtype, info.shape, info.numel, info.nbytes)
        metadata.update(header.metadata or {})
    config = config if config is not None else {}
    said = Said(list(notes))
    quantization = quantization_config(config)
    counts, schemes = tensor_counts(tensors, quantization, data or {}, said)
    adapter = lora_adapter(tensors, metadata, said)
    kind, architecture = kind_of(tensors, files, config, adapter, said)
    quantized = tuple(quantizations(schemes, quantization, said))
    tied = tied_weights(tensors, config, said) if kind == "model" else ()
    state = set(buffers(tensors, said)) if adapter is None else set()
    # Per dtype: tensors, elements, parameters, constants, bytes, buffers.
    by_dtype: dict[str, list[int]] = {}
    for name, dtype, _, numel, nbytes in tensors.values():
        count = counts[name]
        row = by_dtype.setdefault(dtype, [0, 0, 0, 0, 0, 0])
        row[0] += 1
        row[1] += numel
        if count.constant:
            row[3] += count.parameters
        elif name in state:
            row[5] += count.parameters
        else:
            row[2] += count.parameters
        row[4] += nbytes
    parameters = sum(row[2] for row in by_dtype.values())
    constants = sum(row[3] for row in by_dtype.values())
    nbytes = sum(row[4] for row in by_dtype.values())
    memory = {"stored": nbytes}
    memory.update({name: -(-parameters * bits // 8) for name, bits in WIDTHS.items()})
    inference = None
    if kind == "model":
        inference = inference_estimate(
            config,
            tensors,
            weights=nbytes,
            context=context,
            batch=batch,
            kv_dtype=kv_dtype,
            said=said,
        )
    elif config and context is not None:
        said.notes.append(f"no inference estimate for a {kind}")
    return ModelInfo(
        kind,
        architecture,
        tuple(said.evidence),
        quantized,
        adapter,
        parameters,
        constants,
        {dtype: DtypeParameters(*by_dtype[dtype]) for dtype in sorted(by_dtype)},
        tied,
        nbytes,
        memory,
        inference,
        tuple(said.notes),
        sum(row[5] for row in by_dtype.values()),
    )
