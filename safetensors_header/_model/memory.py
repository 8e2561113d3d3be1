"""The memory a model needs: its weights at the usual widths (`WIDTHS`), and hf-mem's
estimate of the memory to run it, the weights and the KV cache (`Inference`).

Layer: core (sans-IO).
"""

from __future__ import annotations

from .._core.fileformat import DTYPE_BITS
from .records import Inference
from .schemes import positive, quantization_config

__all__ = ["WIDTHS", "inference_estimate"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Final

    from .records import Said, Tensor

#: The widths the memory is given in, besides as stored: bits per parameter.
WIDTHS: Final = {"BF16": 16, "F16": 16, "F8": 8, "4-bit": 4}
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
_FULL_ATTENTION: Final = frozenset({"attention", "full_attention", "global_attention"})


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


def inference_estimate(
    config: Mapping[str, Any],
    tensors: dict[str, Tensor],
    *,
    weights: int,
    context: int | None,
    batch: int,
    kv_dtype: str | None,
    said: Said,
) -> Inference | None:
    """hf-mem's estimate: the weights as stored and the KV cache."""
    if not config:
        said.notes.append("no config.json: no inference estimate (layers and heads unknown)")
        return None
    config = _text_config(config)
    needed = ("num_hidden_layers", "num_attention_heads", "hidden_size")
    missing = [key for key in needed if not positive(config.get(key))]
    if missing:
        said.notes.append(
            f"no inference estimate: the config has no positive int {', '.join(missing)}"
        )
        return None
    layers, heads, hidden = (config[key] for key in needed)
    kv_heads: int = (
        config["num_key_value_heads"] if positive(config.get("num_key_value_heads")) else heads
    )
    head_dim: int = config["head_dim"] if positive(config.get("head_dim")) else hidden // heads
    if context is None:
        context = next((config[key] for key in _CONTEXT_KEYS if positive(config.get(key))), None)
        if context is None:
            said.notes.append(
                "no inference estimate: no context given, and none in the config "
                f"({', '.join(_CONTEXT_KEYS)})"
            )
            return None
    full, sliding = _attention_layers(config, layers)
    window: int | None = (
        config["sliding_window"] if positive(config.get("sliding_window")) else None
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
    if positive(pattern):
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
    quantization = quantization_config(config)
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
