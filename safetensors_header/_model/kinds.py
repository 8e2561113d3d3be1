"""What kind of model the headers are: a model, a LoRA adapter (its ranks and targets), an
embedding model or a diffusers component; its architecture; its tied weights.

Layer: core (sans-IO).
"""

from __future__ import annotations

from .records import Adapter

__all__ = ["buffers", "kind_of", "lora_adapter", "tied_weights"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Final

    from .._core.header import Header
    from .records import Said, Tensor

_SHOWN: Final = 3  # tensor names an evidence's text gives as examples
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


# The last part of the name of a buffer that transformers' and torch's modules register and
# save (`register_buffer`, persistent): state, not a parameter, so that `model.parameters()`,
# which model cards count, leaves it out. (GPT-2's `attn.bias`, its causal mask, is told from
# a bias by its shape: `_is_causal_mask`.)
_BUFFERS: Final = frozenset(
    {
        "position_ids",  # BERT's, RoBERTa's, CLIP's embeddings
        "token_type_ids",
        "inv_freq",  # rotary embeddings
        "masked_bias",  # GPT-2's
        "running_mean",  # BatchNorm's
        "running_var",
        "num_batches_tracked",
        "relative_position_index",  # Swin's, BEiT's
    }
)


def buffers(tensors: dict[str, Tensor], said: Said) -> list[str]:
    """The tensors that are buffers a module saved, not parameters (`_BUFFERS`)."""
    found = [
        name
        for name, (_, _, shape, _, _) in tensors.items()
        if name.rsplit(".", 1)[-1] in _BUFFERS or _is_causal_mask(name, shape)
    ]
    if found:
        said("buffers", "tensor names", f"{len(found):,}, not parameters: {_examples(found)}")
    return found


def _is_causal_mask(name: str, shape: tuple[int, ...]) -> bool:
    """GPT-2's ``attn.bias``: a lower-triangular mask ``[1, 1, n, n]``, not an attention
    layer's bias (a vector)."""
    return (
        name.endswith("attn.bias")
        and len(shape) == 4
        and shape[:2] == (1, 1)
        and shape[2] == shape[3]
    )


def _examples(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" (and {len(names) - _SHOWN:,} more)" if len(names) > _SHOWN else "")


def lora_adapter(
    tensors: dict[str, Tensor], metadata: dict[str, str], said: Said
) -> Adapter | None:
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


def kind_of(
    tensors: dict[str, Tensor],
    files: Mapping[str, Header],
    config: Mapping[str, Any],
    adapter: Adapter | None,
    said: Said,
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


def tied_weights(
    tensors: dict[str, Tensor], config: Mapping[str, Any], said: Said
) -> tuple[str, ...]:
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
