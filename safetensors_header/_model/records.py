"""The records of a model's description: `ModelInfo` and what it holds (`Evidence`,
`Quantization`, `DtypeParameters`, `Adapter`, `Inference`), and `Said`, which gathers the
evidence and the notes of one description as they are found.

Layer: core (sans-IO).
"""

from __future__ import annotations

from types import MappingProxyType

from .._core.records import frozen_record, set_fields
from .._records import record

__all__ = ["Adapter", "DtypeParameters", "Evidence", "Inference", "ModelInfo", "Quantization"]
__all__ += ["Said"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TypeAlias

    #: A tensor as this package reads it: name, dtype, shape, elements, bytes.
    Tensor: TypeAlias = tuple[str, str, tuple[int, ...], int, int]


@record(module="safetensors_header.model")
class Evidence:
    """What a guess of `describe_model` rests on.

    Attributes:
        claim: What it supports: a kind (``"LoRA adapter"``), a scheme (``"GPTQ"``), a
            width (``"4 bits"``), ``"tied"``...
        basis: What kind of fact it is: ``"tensor names"``, ``"dtypes"``, ``"shapes"``,
            ``"metadata"``, ``"config"``, ``"file names"``, ``"data"`` (bytes of a tensor
            read), or ``"assumption"`` (a library's default, where nothing tells).
        detail: The facts, for people: names, counts, an example.
    """

    __slots__ = ("claim", "basis", "detail")  # noqa: RUF023 - the fields, in order

    claim: str
    basis: str
    detail: str

    def __repr__(self) -> str:
        return f"<Evidence {self.claim} ({self.basis}): {self.detail}>"


@record(module="safetensors_header.model")
class Quantization:
    """One quantization scheme of a model's weights.

    Attributes:
        scheme: ``"GPTQ"``, ``"AWQ"``, ``"compressed-tensors"``, ``"bitsandbytes nf4"``,
            ``"bitsandbytes fp4"``, ``"bitsandbytes int8"``, ``"FP8"``, ``"NVFP4"``,
            ``"MXFP4"``, ``"F4"`` or ``"F6"``.
        bits: The bits of a quantized value.
        group_size: Parameters per scale (the most common, over the weights): 128 for
            GPTQ's usual groups, 64 for bitsandbytes' blocks, 16 for NVFP4, 32 for MXFP4, a
            row's length for one scale a row; ``None`` where the weights have no scales.
        tensors: The quantized weights (one a module).
        parameters: Their parameters, unpacked.
        constants: The elements of their scales, zero points, indices and states, as stored.
        nbytes: The bytes of the weights and constants as stored.
    """

    __slots__ = ("scheme", "bits", "group_size", "tensors", "parameters", "constants", "nbytes")  # noqa: RUF023

    scheme: str
    bits: int
    group_size: int | None
    tensors: int
    parameters: int
    constants: int
    nbytes: int

    def __repr__(self) -> str:
        counts = f"parameters={self.parameters:,}, constants={self.constants:,}"
        return f"<Quantization {self.scheme} {self.bits}-bit, {self.tensors:,} tensors, {counts}>"


@frozen_record(module="safetensors_header.model")
class DtypeParameters:
    """The tensors stored in one dtype, counted as a model card counts them.

    Attributes:
        tensors: How many.
        numel: Their elements as stored (what a raw count says: an I32 of GPTQ holds 8).
        parameters: The parameters they hold, unpacked (constants and buffers left out).
        constants: The elements of quantization constants among them.
        nbytes: Their bytes.
        buffers: The elements of buffers among them (`ModelInfo.buffers`).
    """

    __slots__ = ("tensors", "numel", "parameters", "constants", "nbytes", "buffers")  # noqa: RUF023

    tensors: int
    numel: int
    parameters: int
    constants: int
    nbytes: int
    buffers: int

    def __init__(  # noqa: PLR0917 - the fields, in order
        self,
        tensors: int,
        numel: int,
        parameters: int,
        constants: int,
        nbytes: int,
        buffers: int = 0,
    ) -> None:
        fields = (tensors, numel, parameters, constants, nbytes, buffers)
        set_fields(self, DtypeParameters, fields)

    def __repr__(self) -> str:
        counts = ", ".join(
            f"{name}={getattr(self, name):,}" for name in ("parameters", "constants", "buffers")
        )
        return f"<DtypeParameters {self.tensors:,} tensors, {counts}, nbytes={self.nbytes:,}>"


@record(module="safetensors_header.model")
class Adapter:
    """A LoRA (or DoRA) adapter's shape.

    Attributes:
        method: ``"LoRA"``, or ``"DoRA"`` when it has magnitude vectors.
        ranks: The ranks of its pairs (``lora_A``'s rows), each once, in order.
        targets: The modules it adapts, by their last name (``q_proj``), in order.
        pairs: How many modules it adapts.
    """

    __slots__ = ("method", "ranks", "targets", "pairs")  # noqa: RUF023 - the fields, in order

    method: str
    ranks: tuple[int, ...]
    targets: tuple[str, ...]
    pairs: int


@record(module="safetensors_header.model")
class Inference:
    """The memory to run a model for `context` tokens and `batch` sequences, as hf-mem
    estimates it: the weights as stored, and the KV cache.

    ``kv_cache = 2 * tokens * kv_heads * head_dim * bytes(kv_dtype) * batch``, where
    ``tokens = layers * context + sliding_layers * window`` (``window`` is
    ``min(sliding_window, context)`` in a model of sliding layers alone, and `context` in one
    that mixes them with full attention, whose engines reserve as much for both).

    Attributes:
        context: Tokens a sequence (the argument, else the config's
            ``max_position_embeddings``, ``n_positions`` or ``max_seq_len``).
        batch: Sequences at once.
        layers: Layers of full attention.
        sliding_layers: Layers of sliding-window attention (``sliding_window_pattern`` or
            ``layer_types`` of the config).
        sliding_window: The window, or ``None``.
        kv_heads: ``num_key_value_heads`` (``num_attention_heads`` without it).
        head_dim: ``head_dim``, else ``hidden_size // num_attention_heads``.
        kv_dtype: The KV cache's dtype (a key of ``DTYPES``).
        kv_dtype_from: Where that dtype comes from (``"torch_dtype"``, ``"quantization_config"``,
            ``"argument"``, ``"default"``...).
        kv_cache: The KV cache's bytes.
        weights: The weights' bytes as stored.
        total: ``weights + kv_cache``.
    """

    __slots__ = (  # noqa: RUF023 - the fields, in order
        "context",
        "batch",
        "layers",
        "sliding_layers",
        "sliding_window",
        "kv_heads",
        "head_dim",
        "kv_dtype",
        "kv_dtype_from",
        "kv_cache",
        "weights",
        "total",
    )

    context: int
    batch: int
    layers: int
    sliding_layers: int
    sliding_window: int | None
    kv_heads: int
    head_dim: int
    kv_dtype: str
    kv_dtype_from: str
    kv_cache: int
    weights: int
    total: int

    def __repr__(self) -> str:
        return (
            f"<Inference {self.context:,} tokens x {self.batch}: kv_cache={self.kv_cache:,} "
            f"({self.kv_dtype}), total={self.total:,}>"
        )


@frozen_record(module="safetensors_header.model")
class ModelInfo:
    """What a model is and what it needs, from its headers (and its config.json).

    Attributes:
        kind: ``"model"``, ``"LoRA adapter"``, ``"embedding model"`` or
            ``"diffusers component"``. A quantized model is a ``"model"`` with
            `quantization`.
        architecture: The config's ``architectures[0]`` (or the class a diffusers config
            names), else what the names say (``"UNet"``, ``"VAE"``, ``"transformer"`` for
            diffusers), or ``None``.
        evidence: What each guess rests on (the kind, each scheme, its bits, tied weights).
        quantization: The schemes of its weights, the most parameters first; ``()`` when
            none is.
        adapter: A LoRA adapter's ranks and targets, else ``None``.
        parameters: The parameters as a model card counts them (``model.parameters()``):
            every tensor's elements, a packed weight's unpacked (so a quantized model counts
            what it had before), quantization constants and buffers left out, tied weights
            once.
        constants: The elements of the quantization constants (scales, zero points, group
            indices, quant states), counted apart.
        by_dtype: Stored dtype -> its tensors' counts, in order of the dtypes' names.
        tied: Tensors a model uses but does not store, because they are tied to a stored
            one (``lm_head.weight`` to the token embeddings): not counted.
        nbytes: The bytes of all tensors, as stored.
        memory: Bytes to hold the weights: ``"stored"`` (= `nbytes`), and the parameters as
            ``"BF16"``, ``"F16"``, ``"F8"`` and ``"4-bit"`` (``ceil(parameters * bits / 8)``,
            constants left out).
        inference: The estimate for a context and batch, when a config gives the layers and
            heads; else ``None`` (`notes` says why).
        notes: What could not be told, and why.
        buffers: The elements of the buffers saved beside the weights: state a module
            registers, not parameters (``position_ids``, ``token_type_ids``, rotary
            ``inv_freq``, GPT-2's causal mask ``attn.bias`` and ``attn.masked_bias``,
            BatchNorm's ``running_mean``, ``running_var`` and ``num_batches_tracked``),
            counted apart, as ``model.parameters()`` leaves them out.
    """

    __slots__ = (  # noqa: RUF023 - the fields, in order
        "kind",
        "architecture",
        "evidence",
        "quantization",
        "adapter",
        "parameters",
        "constants",
        "by_dtype",
        "tied",
        "nbytes",
        "memory",
        "inference",
        "notes",
        "buffers",
    )

    kind: str
    architecture: str | None
    evidence: tuple[Evidence, ...]
    quantization: tuple[Quantization, ...]
    adapter: Adapter | None
    parameters: int
    constants: int
    by_dtype: Mapping[str, DtypeParameters]
    tied: tuple[str, ...]
    nbytes: int
    memory: Mapping[str, int]
    inference: Inference | None
    notes: tuple[str, ...]
    buffers: int

    def __init__(  # noqa: PLR0917 - the fields, in order
        self,
        kind: str,
        architecture: str | None,
        evidence: tuple[Evidence, ...],
        quantization: tuple[Quantization, ...],
        adapter: Adapter | None,
        parameters: int,
        constants: int,
        by_dtype: Mapping[str, DtypeParameters],
        tied: tuple[str, ...],
        nbytes: int,
        memory: Mapping[str, int],
        inference: Inference | None,
        notes: tuple[str, ...],
        buffers: int = 0,
    ) -> None:
        fields = (
            kind,
            architecture,
            evidence,
            quantization,
            adapter,
            parameters,
            constants,
            MappingProxyType(dict(by_dtype)),
            tied,
            nbytes,
            MappingProxyType(dict(memory)),
            inference,
            notes,
            buffers,
        )
        set_fields(self, ModelInfo, fields)

    def __repr__(self) -> str:
        schemes = ", ".join(f"{q.scheme} {q.bits}-bit" for q in self.quantization)
        return (
            f"<ModelInfo {self.kind}{f' ({schemes})' if schemes else ''}, "
            f"parameters={self.parameters:,}, nbytes={self.nbytes:,}>"
        )

    def __reduce__(self) -> tuple[object, ...]:
        # Mapping proxies cannot be pickled; rebuild them from plain dicts.
        values = [getattr(self, name) for name in ModelInfo.__slots__]
        values[7], values[10] = dict(self.by_dtype), dict(self.memory)
        return (ModelInfo, tuple(values))


class Said:
    """The evidence and the notes of one description, as they are found."""

    __slots__ = ("evidence", "notes")

    def __init__(self, notes: list[str]) -> None:
        self.evidence: list[Evidence] = []
        self.notes = notes

    def __call__(self, claim: str, basis: str, detail: str) -> None:
        self.evidence.append(Evidence(claim, basis, detail))
