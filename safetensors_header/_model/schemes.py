"""The quantization schemes of a model's modules, and what each tensor counts for: the
parameters it holds, unpacked, or the constants of a scheme.

Layer: core (sans-IO).

The packings, as the libraries that write them lay them out:

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

from .._core.fileformat import DTYPE_BITS, DTYPES
from .._documents import json_document
from .records import Quantization

__all__ = ["positive", "quantization_config", "quantizations", "tensor_counts"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Final, TypeGuard

    from .records import Said, Tensor

# The 8-bit floats a weight is stored in (E8M0, exponents only, is a scale's type): the
# format's table names them.
_FP8: Final = frozenset(name for name in DTYPES if name.startswith("F8_") and name != "F8_E8M0")
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


def quantization_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
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
        if positive(quantization.get(key)):
            bits: int = quantization[key]
            return bits
    groups = quantization.get("config_groups")
    if isinstance(groups, dict):
        for group in groups.values():
            weights = group.get("weights") if isinstance(group, dict) else None
            if isinstance(weights, dict) and positive(weights.get("num_bits")):
                found: int = weights["num_bits"]
                return found
    return None


def positive(value: object) -> TypeGuard[int]:
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


def tensor_counts(
    tensors: dict[str, Tensor],
    quantization: Mapping[str, Any],
    data: Mapping[str, bytes],
    said: Said,
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
        state = json_document(bytes(raw))
    except ValueError:  # (UnicodeDecodeError too)
        return None
    shape = state.get("shape") if isinstance(state, dict) else None
    if not isinstance(shape, list) or not all(positive(size) or size == 0 for size in shape):
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


def quantizations(
    schemes: dict[str, _Scheme], quantization: Mapping[str, Any], said: Said
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
