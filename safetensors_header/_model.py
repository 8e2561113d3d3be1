"""What a model is, from its headers: its kind, its quantization, its parameters as a model
card counts them, and the memory it needs.

Layer: core (sans-IO): headers, a config.json's object and, optionally, the bytes of a few
small tensors in; a `ModelInfo` out. `describe_model` (``_describe``) reads them from a source.

Every guess comes with its evidence (`Evidence`): the tensor names, dtypes, shapes, metadata
keys or config entries it rests on. The packings, as the libraries that write them lay them out:

=================== =========================================== ============================
scheme              the quantized weight (its module's tensors)  parameters it holds
=================== =========================================== ============================
GPTQ                ``qweight`` I32 ``[in*bits/32, out]``,       ``in * out`` (``in`` from
                    ``qzeros`` ``[in/g, out*bits/32]``,          ``g_idx``), else numel x
                    ``scales`` F16 ``[in/g, out]``, ``g_idx``    ``32/bits``
                    I32 ``[in]``
AWQ                 ``qweight`` I32 ``[in, out*bits/32]``,       ``in * out`` (``out`` from
                    ``qzeros``, ``scales`` F16 ``[in/g, out]``   ``scales``)
compressed-tensors  ``weight_packed`` I32 ``[out, in*bits/32]``, numel x ``32/bits``
                    ``weight_scale``, ``weight_zero_point``,
                    ``weight_shape``
bitsandbytes 4-bit  ``weight`` U8 ``[numel/2, 1]``, ``weight.    the ``shape`` of the
                    absmax``, ``weight.quant_map``, ``weight.    quant_state's JSON (its
                    quant_state.bitsandbytes__nf4`` (or          bytes), else numel x 2
                    ``__fp4``): U8 bytes of JSON
bitsandbytes 8-bit  ``weight`` I8 ``[out, in]``, ``SCB`` F32     numel
                    ``[out]``, ``weight_format`` U8
FP8                 ``weight`` F8_E4M3 (or E5M2), ``weight_      numel
                    scale`` or ``weight_scale_inv``,
                    ``input_scale``
NVFP4               ``weight`` (or ``weight_packed``) U8         numel x 2
                    ``[out, in/2]``, ``weight_scale`` F8_E4M3
                    ``[out, in/16]``, ``weight_scale_2`` (or
                    ``weight_global_scale``)
MXFP4               ``*_blocks`` U8 ``[..., n/32, 16]`` and      numel x 2
                    ``*_scales`` U8 ``[..., n/32]`` (gpt-oss)
F4, F6              the dtypes themselves (shapes in elements)   numel
=================== =========================================== ============================

Scales, zero points, group indices and the other tensors a scheme needs besides its weights
are *constants*: counted apart from the parameters, in elements as stored.
"""

from __future__ import annotations

import json
from types import MappingProxyType

from ._format import DTYPE_BITS
from ._record import frozen_record, set_fields

__all__ = ["Adapter", "DtypeParameters", "Evidence", "Inference", "ModelInfo", "Quantization"]
__all__ += ["describe"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any, Final, TypeAlias, TypeGuard

    from ._header import Header

    #: A tensor as this module reads it: name, dtype, shape, elements, bytes.
    Tensor: TypeAlias = tuple[str, str, tuple[int, ...], int, int]

#: The widths the memory is given in, besides as stored: bits per parameter.
WIDTHS: Final = {"BF16": 16, "F16": 16, "F8": 8, "4-bit": 4}
_SHOWN: Final = 3  # tensor names an evidence's text gives as examples
_FP8: Final = frozenset({"F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"})
# bitsandbytes' 4-bit quant state, as QuantState.as_dict(packed=True) names it below `weight.`.
_BNB4: Final = ("absmax", "quant_map", "nested_absmax", "nested_quant_map")
_QUANT_STATE: Final = "quant_state.bitsandbytes__"
# The scales of FP8, NVFP4, MXFP4 and compressed-tensors, beside a module's weight.
_SCALES: Final = frozenset(
    {
        "weight_scale",
        "weight_scale_inv",
        "weight_scale_2",
        "input_scale",
        "weight_global_scale",
        "input_global_scale",
        "weight_zero_point",
        "weight_shape",
        "weight_g_idx",
    }
)
# Attention's quantization scales (compressed-tensors, modelopt, vLLM): constants of a module.
_ATTENTION_SCALES: Final = frozenset(
    {"k_scale", "v_scale", "q_scale", "kv_scale", "prob_scale", "output_scale"}
)
_LORA: Final = frozenset(
    {
        "lora_A",
        "lora_B",
        "lora_embedding_A",
        "lora_embedding_B",
        "lora_down",
        "lora_up",
        "lora_magnitude_vector",
    }
)
_LORA_DOWN: Final = frozenset({"lora_A", "lora_embedding_A", "lora_down"})
# The first part of a name that is a model's head (a language model's, a classifier's...).
_HEADS: Final = frozenset({"lm_head", "cls", "classifier", "score", "qa_outputs", "head"})
# The first parts of the names of diffusers' UNets, transformers and VAEs.
_DIFFUSERS: Final = frozenset(
    {
        "down_blocks",
        "up_blocks",
        "mid_block",
        "transformer_blocks",
        "single_transformer_blocks",
        "time_embedding",
        "time_text_embed",
        "x_embedder",
        "context_embedder",
        "conv_in",
        "quant_conv",
        "post_quant_conv",
    }
)
# An encoder's word embeddings, at the top level (a base model saved without a head).
_TOP_EMBEDDINGS: Final = ("embeddings.word_embeddings.weight", "embed_tokens.weight", "wte.weight")
# The config keys of the context length, in hf-mem's order.
_CONTEXT_KEYS: Final = ("max_position_embeddings", "n_positions", "max_seq_len")
# torch dtype names (config.json's torch_dtype or dtype) -> the KV cache's safetensors dtype;
# any other name is F16, as hf-mem takes it.
_TORCH_DTYPES: Final = {
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "float8_e4m3": "F8_E4M3",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
    "int8": "I8",
}
# The ends of the names of the scales a group size is read from (parameters per element).
_SCALE_NAMES: Final = (
    ".scales",
    ".weight.absmax",
    ".weight_scale",
    ".weight_scale_inv",
    ".SCB",
    "_scales",
)
# How a scheme's parameters were told -> the basis of that evidence.
_BASES: Final = {
    "shapes": "shapes",
    "packing": "dtypes",
    "config": "config",
    "assumption": "assumption",
    "data": "data",
}
_FULL_ATTENTION: Final = frozenset({"attention", "full_attention", "global_attention"})


@frozen_record()
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

    def __init__(self, claim: str, basis: str, detail: str) -> None:
        set_fields(self, Evidence, (claim, basis, detail))

    def __repr__(self) -> str:
        return f"<Evidence {self.claim} ({self.basis}): {self.detail}>"


@frozen_record()
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

    def __init__(  # noqa: PLR0917 - the fields, in order
        self,
        scheme: str,
        bits: int,
        group_size: int | None,
        tensors: int,
        parameters: int,
        constants: int,
        nbytes: int,
    ) -> None:
        fields = (scheme, bits, group_size, tensors, parameters, constants, nbytes)
        set_fields(self, Quantization, fields)

    def __repr__(self) -> str:
        return (
            f"<Quantization {self.scheme} {self.bits}-bit, {self.tensors:,} tensors, "
            f"parameters={self.parameters:,}, constants={self.constants:,}>"
        )


@frozen_record()
class DtypeParameters:
    """The tensors stored in one dtype, counted as a model card counts them.

    Attributes:
        tensors: How many.
        numel: Their elements as stored (what a raw count says: an I32 of GPTQ holds 8).
        parameters: The parameters they hold, unpacked (constants left out).
        constants: The elements of quantization constants among them.
        nbytes: Their bytes.
    """

    __slots__ = ("tensors", "numel", "parameters", "constants", "nbytes")  # noqa: RUF023

    tensors: int
    numel: int
    parameters: int
    constants: int
    nbytes: int

    def __init__(
        self, tensors: int, numel: int, parameters: int, constants: int, nbytes: int
    ) -> None:
        set_fields(self, DtypeParameters, (tensors, numel, parameters, constants, nbytes))

    def __repr__(self) -> str:
        return (
            f"<DtypeParameters {self.tensors:,} tensors, parameters={self.parameters:,}, "
            f"constants={self.constants:,}, nbytes={self.nbytes:,}>"
        )


@frozen_record()
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

    def __init__(
        self, method: str, ranks: tuple[int, ...], targets: tuple[str, ...], pairs: int
    ) -> None:
        set_fields(self, Adapter, (method, ranks, targets, pairs))


@frozen_record()
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

    def __init__(  # noqa: PLR0917 - the fields, in order
        self,
        context: int,
        batch: int,
        layers: int,
        sliding_layers: int,
        sliding_window: int | None,
        kv_heads: int,
        head_dim: int,
        kv_dtype: str,
        kv_dtype_from: str,
        kv_cache: int,
        weights: int,
        total: int,
    ) -> None:
        fields = (
            context,
            batch,
            layers,
            sliding_layers,
            sliding_window,
            kv_heads,
            head_dim,
            kv_dtype,
            kv_dtype_from,
            kv_cache,
            weights,
            total,
        )
        set_fields(self, Inference, fields)

    def __repr__(self) -> str:
        return (
            f"<Inference {self.context:,} tokens x {self.batch}: kv_cache={self.kv_cache:,} "
            f"({self.kv_dtype}), total={self.total:,}>"
        )


@frozen_record()
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
        parameters: The parameters as a model card counts them: every tensor's elements,
            a packed weight's unpacked (so a quantized model counts what it had before),
            quantization constants left out, tied weights once.
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


class _Count:
    """What one tensor counts for: parameters, or constants of a scheme."""

    __slots__ = ("constant", "parameters", "scheme")

    def __init__(
        self, parameters: int, *, scheme: str | None = None, constant: bool = False
    ) -> None:
        self.parameters, self.scheme, self.constant = parameters, scheme, constant


class _Scheme:
    """A scheme's modules as they are found: for `Quantization` and the evidence."""

    __slots__ = (
        "bits",
        "constants",
        "example",
        "groups",
        "hows",
        "layout",
        "nbytes",
        "parameters",
        "tensors",
    )

    def __init__(self) -> None:
        self.bits: dict[int, int] = {}  # bits -> modules
        self.groups: dict[int, int] = {}  # group size -> modules
        self.hows: dict[str, int] = {}  # how the parameters were told -> modules
        self.tensors = self.parameters = self.constants = self.nbytes = 0
        self.example = self.layout = ""


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
    said = _Said(list(notes))
    quantization = _quantization(config)
    counts, schemes = _counts(tensors, quantization, data or {}, said)
    adapter = _adapter(tensors, metadata, said)
    kind, architecture = _kind(tensors, files, config, adapter, said)
    quantized = tuple(_schemes(schemes, quantization, said))
    tied = _tied(tensors, config, said) if kind == "model" else ()
    by_dtype: dict[str, list[int]] = {}
    for name, dtype, _, numel, nbytes in tensors.values():
        count = counts[name]
        row = by_dtype.setdefault(dtype, [0, 0, 0, 0, 0])
        row[0] += 1
        row[1] += numel
        row[2 if not count.constant else 3] += count.parameters
        row[4] += nbytes
    parameters = sum(row[2] for row in by_dtype.values())
    constants = sum(row[3] for row in by_dtype.values())
    nbytes = sum(row[4] for row in by_dtype.values())
    memory = {"stored": nbytes}
    memory.update({name: -(-parameters * bits // 8) for name, bits in WIDTHS.items()})
    inference = None
    if kind == "model":
        inference = _inference(
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
    )


class _Said:
    """The evidence and the notes of one description, as they are found."""

    __slots__ = ("evidence", "notes")

    def __init__(self, notes: list[str]) -> None:
        self.evidence: list[Evidence] = []
        self.notes = notes

    def __call__(self, claim: str, basis: str, detail: str) -> None:
        self.evidence.append(Evidence(claim, basis, detail))


def _quantization(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """config.json's quantization_config (a text model's, in a multimodal config), or {}."""
    for where in (config, config.get("text_config")):
        if isinstance(where, dict) and isinstance(where.get("quantization_config"), dict):
            found: Mapping[str, Any] = where["quantization_config"]
            return found
    return {}


def _configured_bits(quantization: Mapping[str, Any]) -> int | None:
    """The weights' bits the quantization_config gives: GPTQ's and AWQ's ``bits`` (AutoAWQ's
    ``w_bit``), compressed-tensors' ``config_groups.*.weights.num_bits``."""
    for key in ("bits", "w_bit"):
        if _positive(quantization.get(key)):
            bits: int = quantization[key]
            return bits
    groups = quantization.get("config_groups")
    if isinstance(groups, dict):
        for group in groups.values():
            weights = group.get("weights") if isinstance(group, dict) else None
            if isinstance(weights, dict) and _positive(weights.get("num_bits")):
                found: int = weights["num_bits"]
                return found
    return None


def _positive(value: object) -> TypeGuard[int]:
    """A positive int (not a bool), as a config's counts must be."""
    return type(value) is int and value > 0


def _module_of(name: str) -> tuple[str, str]:
    """A tensor's module and its key there: ``("m.q_proj", "qweight")``, bitsandbytes'
    ``("m.q_proj", "weight.absmax")``, gpt-oss's ``("m.experts.down_proj", "blocks")``."""
    at = name.find(".weight." + _QUANT_STATE)
    if at < 0:
        at = next(
            (name.find(f".weight.{key}") for key in _BNB4 if name.endswith(f".weight.{key}")), -1
        )
    if at >= 0:
        return name[:at], name[at + 1 :]
    module, _, key = name.rpartition(".")
    if key.endswith(("_blocks", "_scales")):  # gpt-oss: the weight's name, then the part
        return f"{module}.{key[:-7]}", key[-6:]
    return module, key


def _counts(
    tensors: dict[str, Tensor],
    quantization: Mapping[str, Any],
    data: Mapping[str, bytes],
    said: _Said,
) -> tuple[dict[str, _Count], dict[str, _Scheme]]:
    """What every tensor counts for, and the schemes found, module by module."""
    modules: dict[str, dict[str, Tensor]] = {}
    for name, tensor in tensors.items():
        module, key = _module_of(name)
        modules.setdefault(module, {})[key] = tensor
    counts: dict[str, _Count] = {}
    schemes: dict[str, _Scheme] = {}
    configured = _configured_bits(quantization)
    method = quantization.get("quant_method")
    for module, keys in modules.items():
        found = _module_scheme(module, keys, configured, method, data)
        if found is None:
            continue
        scheme, bits, weight, parameters, constants, how = found
        entry = schemes.setdefault(scheme, _Scheme())
        entry.bits[bits] = entry.bits.get(bits, 0) + 1
        entry.hows[how] = entry.hows.get(how, 0) + 1
        entry.tensors += 1
        entry.parameters += parameters
        entry.nbytes += weight[4]
        counts[weight[0]] = _Count(parameters, scheme=scheme)
        scale = next((t for t in constants if t[0].endswith(_SCALE_NAMES)), None)
        if scale is not None and scale[3] > 1 and parameters % scale[3] == 0:
            group = parameters // scale[3]
            entry.groups[group] = entry.groups.get(group, 0) + 1
        for tensor in constants:
            counts[tensor[0]] = _Count(tensor[3], scheme=scheme, constant=True)
            entry.constants += tensor[3]
            entry.nbytes += tensor[4]
        if not entry.example:
            entry.example = f"{weight[0]} with {', '.join(sorted(keys))}"
            entry.layout = _layout(scheme, weight, parameters, bits, how)
    for name, tensor in tensors.items():
        if name in counts:
            continue
        key = _module_of(name)[1]
        if key in _ATTENTION_SCALES or (key in _SCALES and schemes):
            counts[name] = _Count(tensor[3], constant=True)  # of no one weight: a module's
        else:
            counts[name] = _Count(tensor[3])
    return counts, schemes


def _module_scheme(
    module: str,
    keys: dict[str, Tensor],
    configured: int | None,
    method: object,
    data: Mapping[str, bytes],
) -> tuple[str, int, Tensor, int, list[Tensor], str] | None:
    """A module's scheme: (scheme, bits, its weight, the weight's parameters, its constants,
    how the parameters were told: "shapes", "packing", "config", "assumption" or "data"), or
    None for a module that is not quantized."""
    qweight = keys.get("qweight")
    if qweight is not None:
        return _gptq_or_awq(keys, qweight, configured, method)
    packed = keys.get("weight_packed")
    if packed is not None:
        others = [keys[k] for k in sorted(keys) if k in _SCALES]
        scale = keys.get("weight_scale")
        if packed[1] == "U8":
            nv = scale is not None and scale[1] in _FP8
            return ("NVFP4" if nv else "MXFP4", 4, packed, packed[3] * 2, others, "packing")
        bits = configured or 4
        how = "config" if configured else "assumption"
        return (
            "compressed-tensors",
            bits,
            packed,
            packed[3] * DTYPE_BITS[packed[1]] // bits,
            others,
            how,
        )
    weight = keys.get("weight")
    if weight is not None:
        return _weight_scheme(module, keys, weight, data)
    blocks, scales = keys.get("blocks"), keys.get("scales")
    if blocks is not None and scales is not None and blocks[1] == "U8":
        return ("MXFP4", 4, blocks, blocks[3] * 2, [scales], "packing")
    return None


def _gptq_or_awq(
    keys: dict[str, Tensor], qweight: Tensor, configured: int | None, method: object
) -> tuple[str, int, Tensor, int, list[Tensor], str]:
    """GPTQ packs along the input (``qweight [in*bits/32, out]``, ``g_idx [in]``); AWQ along
    the output (``qweight [in, out*bits/32]``, ``scales [in/g, out]``)."""
    constants = [keys[k] for k in ("qzeros", "scales", "g_idx") if k in keys]
    shape, word = qweight[2], DTYPE_BITS[qweight[1]]
    g_idx, scales = keys.get("g_idx"), keys.get("scales")
    if len(shape) == 2 and g_idx is not None and len(g_idx[2]) == 1 and g_idx[2][0]:
        inputs = g_idx[2][0]
        if (shape[0] * word) % inputs == 0:
            return (
                "GPTQ",
                shape[0] * word // inputs,
                qweight,
                inputs * shape[1],
                constants,
                "shapes",
            )
    if len(shape) == 2 and scales is not None and len(scales[2]) == 2 and shape[1]:
        outputs = scales[2][1]
        if outputs == shape[1]:  # packed along the input, without g_idx
            scheme = "GPTQ"
        elif outputs % shape[1] == 0 and word % (outputs // shape[1]) == 0:
            bits = word // (outputs // shape[1])
            return ("AWQ", bits, qweight, shape[0] * outputs, constants, "shapes")
        else:
            scheme = "AWQ" if method == "awq" else "GPTQ"
    else:
        scheme = "AWQ" if method == "awq" else "GPTQ"
    bits = configured or 4
    return (
        scheme,
        bits,
        qweight,
        qweight[3] * word // bits,
        constants,
        "config" if configured else "assumption",
    )


def _weight_scheme(
    module: str, keys: dict[str, Tensor], weight: Tensor, data: Mapping[str, bytes]
) -> tuple[str, int, Tensor, int, list[Tensor], str] | None:
    """The scheme of a module whose quantized values are its ``weight``."""
    dtype = weight[1]
    bnb4 = [keys[k] for k in sorted(keys) if k.startswith("weight.")]
    if bnb4:
        state = next((k for k in keys if k.startswith("weight." + _QUANT_STATE)), None)
        kind = "4-bit" if state is None else state.rpartition("__")[2]
        parameters = weight[3] * DTYPE_BITS[dtype] // 4
        how = "packing"
        raw = data.get(f"{module}.{state}") if state is not None else None
        exact = _state_shape(raw) if raw is not None else None
        if exact is not None:
            parameters, how = exact, "data"
        return (f"bitsandbytes {kind}", 4, weight, parameters, bnb4, how)
    if dtype == "I8" and "SCB" in keys:
        constants = [keys[k] for k in ("SCB", "weight_format") if k in keys]
        return ("bitsandbytes int8", 8, weight, weight[3], constants, "packing")
    scales = [keys[k] for k in sorted(keys) if k in _SCALES]
    if dtype in _FP8:
        return ("FP8", 8, weight, weight[3], scales, "packing")
    if dtype in ("F4", "F6_E2M3", "F6_E3M2"):
        return (dtype[:2], DTYPE_BITS[dtype], weight, weight[3], scales, "packing")
    scale = keys.get("weight_scale")
    if dtype == "U8" and scale is not None:
        nv = scale[1] in _FP8 or "weight_scale_2" in keys
        return ("NVFP4" if nv else "MXFP4", 4, weight, weight[3] * 2, scales, "packing")
    return None


def _state_shape(raw: bytes) -> int | None:
    """The elements of the ``shape`` in a bitsandbytes quant state's JSON, or None."""
    try:
        state = json.loads(bytes(raw))
    except (ValueError, UnicodeDecodeError):
        return None
    shape = state.get("shape") if isinstance(state, dict) else None
    if not isinstance(shape, list) or not all(_positive(size) or size == 0 for size in shape):
        return None
    elements = 1
    for size in shape:
        elements *= size
    return elements


def _layout(scheme: str, weight: Tensor, parameters: int, bits: int, how: str) -> str:
    """One quantized weight's packing, said: the evidence of its bits."""
    said = f"{weight[0]}: {weight[1]} {list(weight[2])} holds {parameters:,} values of {bits} bits"
    if how == "assumption":
        return f"{said} (no g_idx, shapes or quantization_config to tell: the default)"
    if how == "config":
        return f"{said} (the bits of quantization_config)"
    if how == "data":
        return f"{said} (the shape in its quant_state's JSON)"
    if how == "shapes" and scheme == "GPTQ":
        return f"{said} (packed along the input: g_idx gives the inputs, GPTQ's layout)"
    if how == "shapes":
        return f"{said} (packed along the output: scales give the outputs, AWQ's layout)"
    return said


def _schemes(
    schemes: dict[str, _Scheme], quantization: Mapping[str, Any], said: _Said
) -> list[Quantization]:
    found = []
    if schemes and quantization:
        shown = {k: v for k, v in quantization.items() if isinstance(v, (str, int, float, bool))}
        said("quantized", "config", f"quantization_config: {json.dumps(shown)}")
    for scheme, entry in sorted(schemes.items(), key=lambda item: -item[1].parameters):
        bits = max(entry.bits, key=entry.bits.__getitem__)
        group = max(entry.groups, key=entry.groups.__getitem__) if entry.groups else None
        weights = f"{entry.tensors:,} quantized weight{'' if entry.tensors == 1 else 's'}"
        said(scheme, "tensor names", f"{weights}, e.g. {entry.example}")
        how = max(entry.hows, key=entry.hows.__getitem__)
        said(f"{bits} bits", _BASES[how], entry.layout)
        found.append(
            Quantization(
                scheme, bits, group, entry.tensors, entry.parameters, entry.constants, entry.nbytes
            )
        )
    return found


def _examples(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" (and {len(names) - _SHOWN:,} more)" if len(names) > _SHOWN else "")


def _adapter(tensors: dict[str, Tensor], metadata: dict[str, str], said: _Said) -> Adapter | None:
    """A LoRA adapter: most of its tensors are lora_A/lora_B (or kohya's lora_down/lora_up)."""
    lora = [name for name in tensors if _LORA.intersection(name.split("."))]
    if not lora or len(lora) * 2 < len(tensors):
        return None
    said("LoRA adapter", "tensor names", f"{len(lora):,} of {len(tensors):,}: {_examples(lora)}")
    if all(name.startswith("base_model.model.") for name in lora):
        said("LoRA adapter", "tensor names", "every name under base_model.model. (PEFT's prefix)")
    keys = sorted(key for key in metadata if key.startswith("ss_") or "lora" in key.lower())
    if keys:
        said("LoRA adapter", "metadata", _examples(keys))
    ranks: dict[int, None] = {}
    targets: dict[str, None] = {}
    pairs = 0
    for name in lora:
        parts = name.split(".")
        down = next((i for i, part in enumerate(parts) if part in _LORA_DOWN), None)
        if down is None:
            continue
        pairs += 1
        shape = tensors[name][2]
        if shape:
            ranks[shape[0]] = None
        if down:
            targets[parts[down - 1]] = None
    method = "DoRA" if any("lora_magnitude_vector" in name for name in lora) else "LoRA"
    return Adapter(method, tuple(sorted(ranks)), tuple(targets), pairs)


def _kind(
    tensors: dict[str, Tensor],
    files: Mapping[str, Header],
    config: Mapping[str, Any],
    adapter: Adapter | None,
    said: _Said,
) -> tuple[str, str | None]:
    architectures = config.get("architectures")
    architecture = None
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        architecture = architectures[0]
    if adapter is not None:
        return "LoRA adapter", None
    diffusers = [name for name in tensors if _diffusers_name(name)]
    class_name = config.get("_class_name")
    if (diffusers and len(diffusers) * 2 >= len(tensors)) or isinstance(class_name, str):
        if diffusers:
            said(
                "diffusers component", "tensor names", f"{len(diffusers):,}: {_examples(diffusers)}"
            )
        named = [name for name in files if "diffusion_pytorch_model" in name]
        if named:
            said("diffusers component", "file names", _examples(named))
        if isinstance(class_name, str):
            said("diffusers component", "config", f"_class_name: {class_name}")
            return "diffusers component", class_name
        return "diffusers component", _diffusers_part(diffusers)
    heads = sorted(name for name in tensors if name.split(".", 1)[0] in _HEADS)
    top = [name for name in _TOP_EMBEDDINGS if name in tensors]
    base = architecture is not None and architecture.endswith("Model") and "For" not in architecture
    if not heads and (top or base):
        if top:
            said(
                "embedding model",
                "tensor names",
                f"{top[0]} at the top level and no head (lm_head, cls, classifier, score): a "
                "base model, as embedding models are saved",
            )
        if base:
            said("embedding model", "config", f"architectures: {architecture} (no head)")
        return "embedding model", architecture
    if architecture is not None:
        said("model", "config", f"architectures: {architecture}")
    if heads:
        said("model", "tensor names", f"a head: {_examples(heads)}")
    elif architecture is None:
        said(
            "model",
            "tensor names",
            "none of the tensors is an adapter's, a diffusers component's or a head's",
        )
    return "model", architecture


def _diffusers_name(name: str) -> bool:
    first, _, rest = name.partition(".")
    if first in _DIFFUSERS:
        return True
    return first in ("encoder", "decoder") and rest.partition(".")[0] in (
        "down_blocks",
        "up_blocks",
        "mid_block",
    )


def _diffusers_part(names: list[str]) -> str:
    firsts = {name.partition(".")[0] for name in names}
    if "encoder" in firsts or "decoder" in firsts:
        return "VAE"
    if firsts & {"transformer_blocks", "single_transformer_blocks"}:
        return "transformer"
    return "UNet"


def _tied(tensors: dict[str, Tensor], config: Mapping[str, Any], said: _Said) -> tuple[str, ...]:
    """``lm_head.weight`` left out because it is the token embeddings (a CausalLM saves a tied
    head so), said by the names (embeddings under a prefix, no head) or by the config."""
    embeddings = next((name for name in tensors if name.endswith(".embed_tokens.weight")), None)
    if embeddings is None or "lm_head.weight" in tensors:
        if config.get("tie_word_embeddings") is True and embeddings and "lm_head.weight" in tensors:
            said("tied", "config", "tie_word_embeddings, though lm_head.weight is stored too")
        return ()
    if config.get("tie_word_embeddings") is False:
        return ()
    said("tied", "tensor names", f"{embeddings} and no lm_head.weight: the head is the embeddings")
    if config.get("tie_word_embeddings") is True:
        said("tied", "config", "tie_word_embeddings: true")
    return ("lm_head.weight",)


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The config the KV cache is read from: a multimodal model's text_config (with the
    top level's dtype and quantization), as hf-mem reads it, else the config itself."""
    text = config.get("text_config")
    if "num_hidden_layers" in config or not isinstance(text, dict):
        return config
    merged = dict(text)
    for key in ("dtype", "torch_dtype", "quantization_config"):
        if key in config and key not in merged:
            merged[key] = config[key]
    return merged


def _inference(
    config: Mapping[str, Any],
    tensors: dict[str, Tensor],
    *,
    weights: int,
    context: int | None,
    batch: int,
    kv_dtype: str | None,
    said: _Said,
) -> Inference | None:
    """hf-mem's estimate: the weights as stored and the KV cache."""
    if not config:
        said.notes.append("no config.json: no inference estimate (layers and heads unknown)")
        return None
    config = _text_config(config)
    needed = ("num_hidden_layers", "num_attention_heads", "hidden_size")
    missing = [key for key in needed if not _positive(config.get(key))]
    if missing:
        said.notes.append(
            f"no inference estimate: the config has no positive int {', '.join(missing)}"
        )
        return None
    layers, heads, hidden = (config[key] for key in needed)
    kv_heads: int = (
        config["num_key_value_heads"] if _positive(config.get("num_key_value_heads")) else heads
    )
    head_dim: int = config["head_dim"] if _positive(config.get("head_dim")) else hidden // heads
    if context is None:
        context = next((config[key] for key in _CONTEXT_KEYS if _positive(config.get(key))), None)
        if context is None:
            said.notes.append(
                "no inference estimate: no context given, and none in the config "
                f"({', '.join(_CONTEXT_KEYS)})"
            )
            return None
    full, sliding = _attention_layers(config, layers)
    window: int | None = (
        config["sliding_window"] if _positive(config.get("sliding_window")) else None
    )
    if full and sliding:  # a hybrid: its engines reserve the whole context for every layer
        tokens = (full + sliding) * context
    else:
        tokens = full * context + sliding * min(window or context, context)
    if kv_dtype is not None:
        dtype, source = kv_dtype, "argument"
    else:
        dtype, source = _kv_dtype(config, tensors)
    cache = 2 * tokens * kv_heads * head_dim * DTYPE_BITS[dtype] // 8 * batch
    return Inference(
        context,
        batch,
        full,
        sliding,
        window,
        kv_heads,
        head_dim,
        dtype,
        source,
        cache,
        weights,
        weights + cache,
    )


def _attention_layers(config: Mapping[str, Any], layers: int) -> tuple[int, int]:
    """(full attention layers, sliding-window layers), as hf-mem counts them."""
    pattern = config.get("sliding_window_pattern")
    if _positive(pattern):
        full = layers // pattern
        return full, layers - full
    types = config.get("layer_types")
    if isinstance(types, list):
        full = sum(1 for kind in types if kind in _FULL_ATTENTION)
        return full, layers - full
    return layers, 0


def _kv_dtype(config: Mapping[str, Any], tensors: dict[str, Tensor]) -> tuple[str, str]:
    """The KV cache's dtype and where it comes from: an FP8 quantization's format (hf-mem's
    rule), else the config's torch_dtype (or dtype), else F16."""
    quantization = _quantization(config)
    if quantization.get("quant_method") in ("fp8", "modelopt"):
        fmt = quantization.get("fmt", quantization.get("format"))
        if isinstance(fmt, str):
            named = _TORCH_DTYPES.get(fmt if fmt.startswith("float8_") else f"float8_{fmt}")
            if named is not None:
                return named, "quantization_config"
        scheme = quantization.get("kv_cache_scheme")
        if (
            isinstance(scheme, dict)
            and scheme.get("num_bits") == 8
            and scheme.get("type") == "float"
        ):
            return "F8_E4M3", "quantization_config"
        fp8 = [tensor[1] for tensor in tensors.values() if tensor[1] in ("F8_E4M3", "F8_E5M2")]
        if fp8:
            return max(set(fp8), key=fp8.count), "the weights' FP8 dtype"
    for key in ("torch_dtype", "dtype"):
        name = config.get(key)
        if isinstance(name, str):
            return _TORCH_DTYPES.get(name.removeprefix("torch."), "F16"), key
    return "F16", "default"
