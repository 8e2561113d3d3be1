"""Tensor-parallel layouts: which part of each tensor a rank of a tensor-parallel job holds.

Layer: core (sans-IO): a tensor's name and shape, the world size and a config.json's object
in; a `Share` out (split along which axis, in which parts, by which rule, and why).

The layout is Megatron-LM's, as vLLM and transformers' ``base_model_tp_plan`` use it:

* a column-parallel layer (q/k/v, the MLP's up and gate projections, a fused QKV) is split
  along its output features, its bias with it; a row-parallel layer (the attention's output,
  the MLP's down projection) along its input features, its bias whole (added once, after the
  ranks' partial sums are reduced);
* q, k and v are split at head boundaries, or are whole when their heads do not divide among
  the ranks (a rank then holds every head of k and v, and picks its own); the attention's
  output follows q. Each is held to exactly its heads' size (the config's heads times its
  head size): anything else (a sub-model with heads of its own, heads the config does not
  count) is no rule;
* a fused QKV is split part by part (each of q, k and v split, the rank's parts joined) where
  its parts lie one after the other (GPT-2's ``c_attn``, Phi-3's ``qkv_proj``), and as one
  where each head holds its own q, k and v (GPT-NeoX's ``query_key_value``);
* vocabulary embeddings and LM heads are split along the vocabulary; norms, position
  embeddings, poolers, classifiers, MoE routers and buffers (``position_ids``, a causal
  mask, ``inv_freq``) are whole;
* the weights of GPT-2's ``Conv1D`` are stored ``[in, out]``: their axes are the other way
  round from ``nn.Linear``'s ``[out, in]``;
* a LoRA adapter's ``lora_B`` (``[out, r]``) follows a column-parallel base layer, its
  ``lora_A`` (``[r, in]``) a row-parallel one; the other of the pair is whole.

Names are matched case-insensitively (BERT's ``LayerNorm``). A name no rule knows, and a
q/k/v whose heads no config gives, is whole and `Share.known` is False: the caller warns or
refuses (`_plan.plan_rank`).
"""

from __future__ import annotations

import re

__all__ = ["Share", "TensorParallel"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Final

# What a rule says of a tensor (the base layer's, for a LoRA pair): whole (with the reason),
# or a layer split along its output ("out") or its input ("in") features.
_WHOLE: Final = "whole"
# Kinds of layer, and the side of the layer they split.
_SIDES: Final[Mapping[str, str]] = {
    "vocab": "in",  # an embedding [vocab, hidden]: rows are the vocabulary, looked up
    "head": "out",  # an LM head [vocab, hidden] (nn.Linear): the vocabulary is its output
    "column": "out",
    "row": "in",
    "q": "out",
    "kv": "out",
    "o": "in",
    "qkv": "out",  # q, k and v one after the other along the output
    "qkv_heads": "out",  # per head: q, k and v of head 0, then of head 1... (GPT-NeoX)
    "gate_up": "out",  # gate and up one after the other along the output
    "heads_last": "in",  # T5's relative attention bias [buckets, heads]
}

# (pattern, kind, reason for a whole tensor), first match wins, on the lowercased name with a
# LoRA part taken out. ``(^|\.)`` anchors a pattern at a part of the dotted name.
_P: Final = r"(?:^|\.)"
_RULES: Final = tuple(
    (re.compile(pattern), kind, reason)
    for pattern, kind, reason in (
        # Buffers: saved by some writers, never parameters.
        (_P + r"(position_ids|token_type_ids|inv_freq|masked_bias)$", _WHOLE, "buffer"),
        (_P + r"(attn|attention)\.bias$", _WHOLE, "buffer (a causal mask)"),
        (_P + r"rotary_emb\.", _WHOLE, "buffer"),
        # Norms: LayerNorm, RMSNorm, ln_1, q_norm... (per feature: every rank needs all).
        (_P + r"([^.]*norm[^.]*|ln(_[^.]*)?)\.[^.]+$", _WHOLE, "norm"),
        # MoE routers: every rank routes every token.
        (_P + r"block_sparse_moe\.gate\.weight$", _WHOLE, "MoE router"),
        (_P + r"mlp\.gate\.[^.]+$", _WHOLE, "MoE router"),
        (_P + r"shared_expert_gate\.weight$", _WHOLE, "MoE shared expert's gate"),
        (_P + r"router\.", _WHOLE, "MoE router"),
        # Small layers Megatron keeps whole on every rank.
        (
            _P + r"(position_embeddings|token_type_embeddings|wpe|embed_positions)\.weight$",
            _WHOLE,
            "replicated",
        ),
        (_P + r"pooler\.", _WHOLE, "replicated (pooler)"),
        (_P + r"cls\.(predictions\.transform|seq_relationship)\.", _WHOLE, "replicated (head)"),
        (_P + r"lm_head\.dense\.", _WHOLE, "replicated (head)"),
        (_P + r"(classifier|score|qa_outputs)\.", _WHOLE, "replicated (classifier)"),
        # Vocabulary.
        (_P + r"(embed_tokens|word_embeddings|wte|embed_in|shared)\.weight$", "vocab", ""),
        (_P + r"(lm_head|embed_out)\.(decoder\.)?(weight|bias)$", "head", ""),
        (_P + r"cls\.predictions\.(decoder\.)?(weight|bias)$", "head", ""),
        (_P + r"relative_attention_bias\.weight$", "heads_last", ""),
        # Fused projections.
        (_P + r"(c_attn|qkv_proj)\.(weight|bias)$", "qkv", ""),
        (_P + r"query_key_value\.(weight|bias)$", "qkv_heads", ""),
        (_P + r"gate_up_proj\.(weight|bias)$", "gate_up", ""),
        # Attention.
        (_P + r"(q_proj|query|q|q_lin)\.(weight|bias)$", "q", ""),
        (_P + r"(k_proj|v_proj|key|value|k|v|k_lin|v_lin)\.(weight|bias)$", "kv", ""),
        (_P + r"(o_proj|o|out_lin|out_proj)\.(weight|bias)$", "o", ""),
        (_P + r"attention\.output\.dense\.(weight|bias)$", "o", ""),
        (_P + r"(self_)?(attention|attn)\.dense\.(weight|bias)$", "o", ""),
        (_P + r"attn\.c_proj\.(weight|bias)$", "o", ""),
        # MLP (and each expert's).
        (_P + r"(down_proj|dense_4h_to_h|fc2|w2|wo|lin2)\.(weight|bias)$", "row", ""),
        (_P + r"mlp\.c_proj\.(weight|bias)$", "row", ""),
        (_P + r"output\.dense\.(weight|bias)$", "row", ""),
        (
            _P + r"(gate_proj|up_proj|dense_h_to_4h|fc1|w1|w3|wi|wi_0|wi_1|lin1)\.(weight|bias)$",
            "column",
            "",
        ),
        (_P + r"c_fc\.(weight|bias)$", "column", ""),
        (_P + r"intermediate\.dense\.(weight|bias)$", "column", ""),
    )
)
# Names that mean one layer in some models and another in others: a rule holds only for the
# model_types named (ChatGLM's dense_h_to_4h is a fused [gate; up], GPT-NeoX's an up
# projection; Qwen (v1)'s w2 is column-parallel, Mixtral's a down projection); elsewhere,
# and without a config, no rule.
_AMBIGUOUS: Final = re.compile(_P + r"(w1|w2|w3|dense_h_to_4h)\.(weight|bias)$")
_MEANINGS: Final[Mapping[str, Mapping[str, str]]] = {
    "mixtral": {"w1": "column", "w3": "column", "w2": "row"},
    "qwen2_moe": {"w1": "column", "w3": "column", "w2": "row"},
    "qwen3_moe": {"w1": "column", "w3": "column", "w2": "row"},
    "gpt_neox": {"dense_h_to_4h": "column"},
    "bloom": {"dense_h_to_4h": "column"},
    "chatglm": {"dense_h_to_4h": "gate_up"},
    "qwen": {"w1": "column", "w2": "column"},
}
# GPT-2's Conv1D layers ([in, out]); only GPT-2 (or a model named so, without a config).
_CONV1D: Final = re.compile(_P + r"(c_attn|c_proj|c_fc)\.")
_CONV1D_TYPES: Final = frozenset({"gpt2"})
# A number between dots: a layer's or an expert's index (never part of a rule's name).
_INDEXES: Final = re.compile(r"\.\d+(?=\.)")
# The kinds cut at head boundaries, and the towers (a vision or audio encoder beside a text
# model) whose heads a multimodal config's top-level counts are not.
_HEADED: Final = frozenset({"q", "kv", "o", "qkv", "qkv_heads", "heads_last"})
_TOWER: Final = re.compile(r"(?:^|\.)(vision|visual|image|audio|speech)[^.]*\.")
_TOWER_CONFIGS: Final = ("vision_config", "audio_config", "text_config")
# Where a multimodal model keeps its text model, whose heads the config counts: anything else
# with heads (a Q-Former, a perceiver resampler, a projector) has heads of its own.
_TEXT_MODEL: Final = re.compile(r"(?:^|\.)(language_model|text_model|model\.layers)\.")
# A LoRA adapter's part of a name: PEFT's (lora_A.weight, lora_embedding_A...), kohya's.
_LORA_PART: Final = re.compile(
    r"\.(lora_a|lora_b|lora_down|lora_up|lora_embedding_a|lora_embedding_b|"
    r"lora_magnitude_vector)(\.[^.]+)?$"
)
_LORA_ROLES: Final[Mapping[str, str]] = {
    "lora_a": "a",
    "lora_down": "a",
    "lora_b": "b",
    "lora_up": "b",
    "lora_embedding_a": "embedding_a",
    "lora_embedding_b": "embedding_b",
    "lora_magnitude_vector": "magnitude",
}
# The model_types whose fused QKV each layout is known for: [q, k, v] along the output (q of
# `heads` heads, k and v of `kv_heads`: GPT-2's c_attn, Phi-3's qkv_proj), or q, k and v
# of each head together (GPT-NeoX's and BLOOM's query_key_value). Other models lay their
# fused QKV out otherwise (Falcon and ChatGLM by groups of heads): no rule.
_FUSED: Final[Mapping[str, frozenset[str]]] = {
    "qkv": frozenset({"gpt2", "phi3"}),
    "qkv_heads": frozenset({"gpt_neox", "bloom"}),
}
_ARCHITECTURES: Final = {
    "bert": "BERT",
    "roberta": "RoBERTa",
    "xlm-roberta": "XLM-RoBERTa",
    "camembert": "CamemBERT",
    "electra": "ELECTRA",
    "distilbert": "DistilBERT",
    "gpt2": "GPT-2",
    "gpt_neox": "GPT-NeoX",
    "bloom": "BLOOM",
    "llama": "Llama",
    "mistral": "Mistral",
    "qwen2": "Qwen2",
    "qwen3": "Qwen3",
    "gemma": "Gemma",
    "gemma2": "Gemma 2",
    "gemma3_text": "Gemma 3",
    "phi3": "Phi-3",
    "mixtral": "Mixtral",
    "qwen2_moe": "Qwen2-MoE",
    "qwen3_moe": "Qwen3-MoE",
    "t5": "T5",
    "mt5": "mT5",
    "chatglm": "ChatGLM",
    "qwen": "Qwen",
}


class Share:
    """How one tensor is shared among the ranks of a tensor-parallel job (immutable; the
    rules' answer, private: a plan says it as `PlannedTensor.selection` and ``rule``).

    Attributes:
        axis: The axis it is split along; ``None``: whole on every rank.
        parts: For a fused tensor split part by part, the parts along `axis`:
            ``(size, split)`` pairs, in order (a part not split is whole on every rank);
            ``()`` for a tensor split as one.
        rule: What the rule is, for people: ``"column-parallel, axis 0"``, ``"row-parallel
            bias: whole ..."``, ``"norm: whole"``, ``"no rule: whole"``...
        known: False when no rule decided (an unknown name, or heads no config gives):
            the tensor is whole, and a caller warns or refuses.
    """

    __slots__ = ("axis", "known", "parts", "rule")

    axis: int | None
    parts: tuple[tuple[int, bool], ...]
    rule: str
    known: bool

    def __init__(
        self,
        axis: int | None,
        parts: tuple[tuple[int, bool], ...] = (),
        rule: str = "",
        known: bool = True,
    ) -> None:
        for field, value in (("axis", axis), ("parts", parts), ("rule", rule), ("known", known)):
            object.__setattr__(self, field, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Share is immutable: cannot assign to {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Share):
            return NotImplemented
        return (self.axis, self.parts, self.rule, self.known) == (
            other.axis,
            other.parts,
            other.rule,
            other.known,
        )

    def __hash__(self) -> int:
        return hash((self.axis, self.parts, self.rule, self.known))

    def __repr__(self) -> str:
        where = "whole" if self.axis is None else f"axis {self.axis}"
        return f"<Share {where}: {self.rule}>"


class TensorParallel:
    """The rules for one model at one world size: `share` of any tensor by name and shape.

    Args:
        world: The ranks.
        config: The model's config.json as a dict (``model_type``, the head counts), or
            ``None``: names alone decide, and q/k/v, whose heads are unknown, are whole.
    """

    __slots__ = (
        "_found",
        "architecture",
        "configured",
        "conv1d",
        "head_dim",
        "heads",
        "kv_heads",
        "model_type",
        "quantized",
        "towers",
        "world",
    )

    def __init__(self, world: int, config: Mapping[str, Any] | None = None) -> None:
        self.world = world
        self._found: dict[tuple[str, tuple[int, ...]], Share] = {}
        text = config or {}
        nested = text.get("text_config")
        if isinstance(nested, dict) and not _count(text, "num_attention_heads", "n_head"):
            text = {**nested, "model_type": text.get("model_type")}
        model_type = text.get("model_type")
        self.model_type: str | None = model_type if isinstance(model_type, str) else None
        known = _ARCHITECTURES.get(self.model_type or "")
        self.architecture = (
            known
            if known is not None
            else "names only (no config)"
            if config is None or not config
            else f"names only (model_type {self.model_type!r} has no rules of its own)"
        )
        self.heads = _count(text, "num_attention_heads", "n_head", "n_heads", "num_heads")
        kv = _count(text, "num_key_value_heads", "n_head_kv", "num_kv_heads")
        self.kv_heads = kv if kv else self.heads
        # A head's size: said, or the hidden size over the heads. q, k, v and the output are
        # held to exactly their heads' size (a sub-model with heads of its own, a Q-Former or
        # a resampler, or k/v heads the config does not count, fit no rule).
        hidden = _count(text, "hidden_size", "n_embd", "d_model", "dim")
        said = _count(text, "head_dim", "d_kv", "kv_channels", "attention_head_size")
        self.head_dim = said or (hidden // self.heads if self.heads and hidden else 0)
        # A quantized checkpoint's weights are packed (bitsandbytes' [out * in / 2, 1]...):
        # their shapes are no layer's, so no rule splits them.
        self.quantized = isinstance((config or {}).get("quantization_config"), dict) or (
            isinstance(text.get("quantization_config"), dict)
        )
        # Conv1D layers: GPT-2's, or (without a config) names that only GPT-2 uses, where
        # the shape says [in, out] (`_conv1d_shaped`: a Linear's would be [out, in]).
        self.configured = bool(config)
        self.conv1d = self.model_type in _CONV1D_TYPES or not config
        # A multimodal config's head counts are its text model's, not its towers'.
        self.towers = any(isinstance((config or {}).get(key), dict) for key in _TOWER_CONFIGS)

    def share(self, name: str, shape: tuple[int, ...]) -> Share:
        """How the tensor `name` of `shape` is shared: see the module's docstring."""
        # Layers and experts differ only in their numbers: one rule each, found once.
        key = (_INDEXES.sub(".#", name), shape)
        share = self._found.get(key)
        if share is None:
            share = self._found[key] = self._share(name, shape)
        return share

    def _share(self, name: str, shape: tuple[int, ...]) -> Share:
        lowered = name.lower()
        role = None
        lora = _LORA_PART.search(lowered)
        if lora is not None:
            role = _LORA_ROLES[lora.group(1)]
            lowered = lowered[: lora.start()] + (lora.group(2) or ".weight")
        found = next(((kind, why) for rule, kind, why in _RULES if rule.search(lowered)), None)
        if found is None:
            return Share(None, (), "no rule: whole", known=False)
        kind, reason = found
        if kind == _WHOLE:
            return Share(None, (), f"{reason}: whole")
        ambiguous = _AMBIGUOUS.search(lowered)
        if ambiguous is not None:
            meant = _MEANINGS.get(self.model_type or "", {}).get(ambiguous.group(1))
            if meant is None:
                said = f"{self.architecture}" if self.configured else "a model without a config"
                return Share(
                    None, (), f"no rule: what it is differs by model ({said}): whole", False
                )
            kind = meant
        if self.quantized:
            return Share(None, (), "no rule: a quantized checkpoint's packed weights: whole", False)
        conv1d = _CONV1D.search(lowered) is not None
        fused = _FUSED.get(kind)
        if (conv1d and not self.conv1d) or (
            fused is not None and self.model_type is not None and self.model_type not in fused
        ):
            return Share(None, (), f"no rule for {self.architecture}: whole", known=False)
        if kind in _HEADED and self.towers and _TOWER.search(lowered):
            return Share(None, (), "no rule: a tower's heads are not the config's: whole", False)
        if kind in _HEADED and self.towers and not _TEXT_MODEL.search(lowered):
            why = "no rule: a sub-model's heads are not the text model's: whole"
            return Share(None, (), why, False)
        side = _SIDES[kind]
        bias = lowered.endswith(".bias")
        if role is not None:
            return self._lora(kind, side, role, bias, shape)
        if len(shape) == 1 and bias:
            if side == "in":
                return Share(None, (), "row-parallel bias: whole (added after the reduction)")
            return self._split(kind, 0, shape)
        if len(shape) != 2:  # a layer's weight is a matrix
            return Share(None, (), f"no rule for a {len(shape)}-d {kind} tensor: whole", False)
        if kind == "vocab":
            return self._split(kind, 0, shape)
        if kind == "heads_last":
            return self._split(kind, 1, shape)
        if conv1d and not self.configured and not _conv1d_shaped(lowered, shape):
            return Share(None, (), "no rule: a Linear's shape, not GPT-2's Conv1D: whole", False)
        out, into = (1, 0) if conv1d else (0, 1)
        return self._split(kind, out if side == "out" else into, shape)

    def _lora(self, kind: str, side: str, role: str, bias: bool, shape: tuple[int, ...]) -> Share:
        """A LoRA tensor: lora_B ([out, r]) follows an output split, lora_A ([r, in]) an
        input split, lora_embedding_A ([r, vocab]) a vocabulary split; the rest is whole."""
        if role == "b" and side == "out" and kind not in ("vocab", "heads_last"):
            return self._split(kind, 0, shape, "lora_B of a ")
        if role == "magnitude" and side == "out" and kind != "vocab":
            return self._split(kind, 0, shape, "DoRA magnitude of a ")
        if role == "a" and side == "in" and kind in ("row", "o") and not bias:
            return self._split(kind, 1, shape, "lora_A of a ")
        if role == "embedding_a" and kind == "vocab":
            return self._split(kind, 1, shape, "lora_embedding_A of a ")
        if role in ("a", "b", "embedding_a", "embedding_b", "magnitude"):
            return Share(None, (), "LoRA factor beside the split axis: whole")
        return Share(None, (), "no rule: whole", known=False)  # pragma: no cover

    def _split(self, kind: str, axis: int, shape: tuple[int, ...], of: str = "") -> Share:
        """`kind`'s split of a tensor along `axis`, or whole where its heads do not divide."""
        if axis >= len(shape):
            return Share(None, (), f"{of}{_LABELS[kind]}: whole (no axis {axis})")
        size, world = shape[axis], self.world
        label = of + _LABELS[kind]
        if kind in ("q", "o", "heads_last", "qkv_heads", "kv"):
            heads = self.kv_heads if kind == "kv" else self.heads
            if not heads:
                return Share(None, (), f"{label}: whole (no config gives its heads)", False)
            unit = 3 if kind == "qkv_heads" else 1  # q, k, v of a head lie together
            if kind == "heads_last":
                fits = size == heads
            elif self.head_dim:
                fits = size == heads * unit * self.head_dim
            else:  # (a config without a hidden size: the heads must at least divide it)
                fits = size % (heads * unit) == 0
            if not fits:
                head = f" of {self.head_dim}" if self.head_dim and kind != "heads_last" else ""
                return Share(
                    None,
                    (),
                    f"{label}: whole ({size:,} along axis {axis} is not {heads} heads{head})",
                    False,
                )
            if heads % world:
                return Share(None, (), f"{label}: whole ({heads} heads do not divide by {world})")
            return Share(axis, (), f"{label} at head boundaries, axis {axis}")
        if size < world:  # some ranks would hold nothing of it
            return Share(None, (), f"{label}: whole ({size:,} along axis {axis} < {world})", False)
        if kind == "qkv":
            return self._parts(label, axis, size)
        if kind == "gate_up":
            if size % 2:
                return Share(None, (), f"{label}: whole ({size:,} is no two parts)", False)
            return Share(axis, ((size // 2, True), (size // 2, True)), f"{label}, axis {axis}")
        return Share(axis, (), f"{label}, axis {axis}")

    def _parts(self, label: str, axis: int, size: int) -> Share:
        """A fused [q, k, v]: each part split at its heads' boundaries, or whole."""
        heads, kv = self.heads, self.kv_heads
        if not heads:
            return Share(None, (), f"{label}: whole (no config gives its heads)", False)
        # q has `heads` heads and k and v `kv` each, of one head size.
        head = self.head_dim or (size // (heads + 2 * kv) if size % (heads + 2 * kv) == 0 else 0)
        if not head or size != (heads + 2 * kv) * head:
            return Share(
                None,
                (),
                f"{label}: whole ({size:,} is not {heads}+{kv}+{kv} heads of {head})",
                False,
            )
        if heads % self.world:
            return Share(None, (), f"{label}: whole ({heads} heads do not divide by {self.world})")
        split_kv = kv % self.world == 0
        parts = ((heads * head, True), (kv * head, split_kv), (kv * head, split_kv))
        said = "" if split_kv else f", k and v whole ({kv} heads do not divide by {self.world})"
        return Share(axis, parts, f"{label} split per part at head boundaries, axis {axis}{said}")


_LABELS: Final[Mapping[str, str]] = {
    "vocab": "vocabulary-parallel embedding",
    "head": "vocabulary-parallel head",
    "column": "column-parallel",
    "row": "row-parallel",
    "q": "column-parallel q",
    "kv": "column-parallel k/v",
    "o": "row-parallel attention output",
    "qkv": "column-parallel fused qkv",
    "qkv_heads": "column-parallel fused qkv (per head)",
    "gate_up": "column-parallel fused gate/up, split per part",
    "heads_last": "relative attention bias by heads",
}


def _conv1d_shaped(name: str, shape: tuple[int, ...]) -> bool:
    """Whether a GPT-2-named weight is shaped as GPT-2's Conv1D stores it, ``[in, out]``:
    its MLP's c_fc and its fused c_attn widen (out > in), its MLP's c_proj narrows; a square
    attention c_proj cannot tell."""
    if ".c_fc." in name or name.startswith("c_fc.") or "c_attn." in name:
        return shape[1] > shape[0]
    if "mlp.c_proj." in name:
        return shape[0] > shape[1]
    return False


def _count(config: Mapping[str, Any], *keys: str) -> int:
    """The first of `keys` that is a positive int in `config`, else 0."""
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0
