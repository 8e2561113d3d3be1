"""A rank's share by the rules of tensor parallelism: right for each architecture, or refused.

Each model is a small random checkpoint with the names and layouts of a published one (the
reference writes it) and its config.json beside it. Every rank at world sizes 2, 4 and 8 loads
its share; each tensor must be whole, or exactly the part that this file's own account of the
architecture names (written here from the models' code, not from the library's rules), and the
ranks' parts joined must give the tensor back.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")
reference = pytest.importorskip("safetensors.numpy")

from safetensors_header import HeaderError, write_file  # noqa: E402
from safetensors_header.numpy import load_plan, load_rank  # noqa: E402
from safetensors_header.plan import Parts, Split, plan_rank, plan_reads, split_tensors  # noqa: E402

WORLDS = (2, 4, 8)
RNG = np.random.default_rng(51)


def _random(shape: tuple[int, ...], dtype: Any = np.float32) -> Any:
    return RNG.standard_normal(shape).astype(dtype)


# --- this file's account of each layout: rank, world -> the rank's part of a tensor -------------


class Layout:
    """A rank's part of each tensor, by the architecture's own code, for checking."""

    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world

    def whole(self, array: Any) -> Any:
        return array

    def split(self, array: Any, axis: int) -> Any:
        return np.array_split(array, self.world, axis)[self.rank]

    def heads(self, array: Any, axis: int, heads: int) -> Any:
        """Whole heads per rank (a head's rows together), or whole where they do not divide."""
        if heads % self.world:
            return array
        size = array.shape[axis]
        per = heads // self.world * (size // heads)
        return np.take(array, range(self.rank * per, (self.rank + 1) * per), axis=axis)

    def fused(self, array: Any, axis: int, parts: list[tuple[int, int]]) -> Any:
        """[q, k, v] one after another: each (size, heads) part split at its heads, joined."""
        pieces, at = [], 0
        for size, heads in parts:
            part = np.take(array, range(at, at + size), axis=axis)
            pieces.append(self.heads(part, axis, heads))
            at += size
        return np.concatenate(pieces, axis=axis)


Expect = Callable[[Layout, str, Any], Any]


def _bert(rank: Layout, name: str, array: Any) -> Any:
    heads = 4
    if "layernorm" in name.lower() or "position" in name or "token_type" in name:
        return rank.whole(array)  # norms, position_ids, the small embeddings
    if name.startswith("pooler."):
        return rank.whole(array)
    if name == "embeddings.word_embeddings.weight":
        return rank.split(array, 0)
    if name.endswith(("query.weight", "key.weight", "value.weight")):
        return rank.heads(array, 0, heads)
    if name.endswith(("query.bias", "key.bias", "value.bias")):
        return rank.heads(array, 0, heads)
    if name.endswith("attention.output.dense.weight"):
        return rank.heads(array, 1, heads)  # row-parallel: its input is the heads' outputs
    if name.endswith(("intermediate.dense.weight", "intermediate.dense.bias")):
        return rank.split(array, 0)
    if name.endswith("output.dense.weight"):
        return rank.split(array, 1)
    if name.endswith("output.dense.bias"):
        return rank.whole(array)  # added after the reduction
    raise AssertionError(name)


def _minilm() -> tuple[dict[str, Any], dict[str, Any]]:
    """sentence-transformers/all-MiniLM-L6-v2's names, scaled down (4 heads of 6)."""
    hidden, inner, vocab, positions = 24, 48, 30, 16
    arrays: dict[str, Any] = {
        "embeddings.word_embeddings.weight": _random((vocab, hidden)),
        "embeddings.position_embeddings.weight": _random((positions, hidden)),
        "embeddings.token_type_embeddings.weight": _random((2, hidden)),
        "embeddings.LayerNorm.weight": _random((hidden,)),
        "embeddings.LayerNorm.bias": _random((hidden,)),
        "embeddings.position_ids": np.arange(positions, dtype=np.int64).reshape(1, positions),
    }
    for layer in range(2):
        at = f"encoder.layer.{layer}."
        for part in ("query", "key", "value"):
            arrays[f"{at}attention.self.{part}.weight"] = _random((hidden, hidden))
            arrays[f"{at}attention.self.{part}.bias"] = _random((hidden,))
        arrays[f"{at}attention.output.dense.weight"] = _random((hidden, hidden))
        arrays[f"{at}attention.output.dense.bias"] = _random((hidden,))
        arrays[f"{at}attention.output.LayerNorm.weight"] = _random((hidden,))
        arrays[f"{at}attention.output.LayerNorm.bias"] = _random((hidden,))
        arrays[f"{at}intermediate.dense.weight"] = _random((inner, hidden))
        arrays[f"{at}intermediate.dense.bias"] = _random((inner,))
        arrays[f"{at}output.dense.weight"] = _random((hidden, inner))
        arrays[f"{at}output.dense.bias"] = _random((hidden,))
        arrays[f"{at}output.LayerNorm.weight"] = _random((hidden,))
        arrays[f"{at}output.LayerNorm.bias"] = _random((hidden,))
    arrays["pooler.dense.weight"] = _random((hidden, hidden))
    arrays["pooler.dense.bias"] = _random((hidden,))
    config = {"model_type": "bert", "hidden_size": hidden, "num_attention_heads": 4}
    return arrays, config


def _roberta(rank: Layout, name: str, array: Any) -> Any:
    if name.startswith("lm_head."):  # RobertaLMHead: dense and layer_norm, then the vocabulary
        if name.startswith(("lm_head.dense.", "lm_head.layer_norm.")):
            return rank.whole(array)
        return rank.split(array, 0)
    return _bert(rank, name.removeprefix("roberta."), array)


def _roberta_mlm() -> tuple[dict[str, Any], dict[str, Any]]:
    arrays, config = _minilm()
    arrays = {f"roberta.{name}": array for name, array in arrays.items()}
    arrays["lm_head.dense.weight"] = _random((24, 24))
    arrays["lm_head.layer_norm.weight"] = _random((24,))
    arrays["lm_head.decoder.weight"] = _random((30, 24))
    arrays["lm_head.bias"] = _random((30,))
    return arrays, {**config, "model_type": "roberta"}


def _distilbert(rank: Layout, name: str, array: Any) -> Any:
    heads = 4
    if "layer_norm" in name or "LayerNorm" in name or "position" in name:
        return rank.whole(array)
    if name.endswith("word_embeddings.weight"):
        return rank.split(array, 0)
    if ".q_lin." in name or ".k_lin." in name or ".v_lin." in name:
        return rank.heads(array, 0, heads)
    if name.endswith("out_lin.weight"):
        return rank.heads(array, 1, heads)
    if ".lin1." in name:
        return rank.split(array, 0)
    if name.endswith("lin2.weight"):
        return rank.split(array, 1)
    if name.endswith(("out_lin.bias", "lin2.bias")):
        return rank.whole(array)
    raise AssertionError(name)


def _distilbert_model() -> tuple[dict[str, Any], dict[str, Any]]:
    hidden, inner = 24, 48
    arrays: dict[str, Any] = {
        "distilbert.embeddings.word_embeddings.weight": _random((30, hidden)),
        "distilbert.embeddings.position_embeddings.weight": _random((16, hidden)),
        "distilbert.embeddings.LayerNorm.weight": _random((hidden,)),
    }
    at = "distilbert.transformer.layer.0."
    for part in ("q_lin", "k_lin", "v_lin", "out_lin"):
        arrays[f"{at}attention.{part}.weight"] = _random((hidden, hidden))
        arrays[f"{at}attention.{part}.bias"] = _random((hidden,))
    arrays[f"{at}sa_layer_norm.weight"] = _random((hidden,))
    arrays[f"{at}ffn.lin1.weight"] = _random((inner, hidden))
    arrays[f"{at}ffn.lin1.bias"] = _random((inner,))
    arrays[f"{at}ffn.lin2.weight"] = _random((hidden, inner))
    arrays[f"{at}ffn.lin2.bias"] = _random((hidden,))
    arrays[f"{at}output_layer_norm.weight"] = _random((hidden,))
    return arrays, {"model_type": "distilbert", "dim": hidden, "n_heads": 4}


def _gpt2(rank: Layout, name: str, array: Any) -> Any:
    heads, hidden = 4, 24
    if ".ln_" in name or name.endswith((".attn.bias", ".attn.masked_bias")) or ".wpe." in name:
        return rank.whole(array)
    if name in ("transformer.wte.weight", "lm_head.weight"):
        return rank.split(array, 0)
    if "c_attn" in name:  # Conv1D [in, 3 * hidden]: q, k and v along the output, axis 1
        axis = array.ndim - 1
        return rank.fused(array, axis, [(hidden, heads)] * 3)
    if name.endswith("attn.c_proj.weight"):
        return rank.heads(array, 0, heads)  # Conv1D [in, out]: the input is axis 0
    if name.endswith("mlp.c_fc.weight"):
        return rank.split(array, 1)
    if name.endswith("mlp.c_fc.bias"):
        return rank.split(array, 0)
    if name.endswith("mlp.c_proj.weight"):
        return rank.split(array, 0)
    if name.endswith("c_proj.bias"):
        return rank.whole(array)
    raise AssertionError(name)


def _gpt2_model() -> tuple[dict[str, Any], dict[str, Any]]:
    hidden, vocab, positions = 24, 30, 16
    arrays: dict[str, Any] = {
        "transformer.wte.weight": _random((vocab, hidden)),
        "transformer.wpe.weight": _random((positions, hidden)),
        "transformer.ln_f.weight": _random((hidden,)),
        "transformer.ln_f.bias": _random((hidden,)),
        "lm_head.weight": _random((vocab, hidden)),
    }
    for layer in range(2):
        at = f"transformer.h.{layer}."
        arrays[f"{at}ln_1.weight"] = _random((hidden,))
        arrays[f"{at}ln_2.bias"] = _random((hidden,))
        arrays[f"{at}attn.bias"] = np.tril(np.ones((1, 1, positions, positions), np.uint8))
        arrays[f"{at}attn.masked_bias"] = np.array(-1e4, np.float32)
        arrays[f"{at}attn.c_attn.weight"] = _random((hidden, 3 * hidden))
        arrays[f"{at}attn.c_attn.bias"] = _random((3 * hidden,))
        arrays[f"{at}attn.c_proj.weight"] = _random((hidden, hidden))
        arrays[f"{at}attn.c_proj.bias"] = _random((hidden,))
        arrays[f"{at}mlp.c_fc.weight"] = _random((hidden, 4 * hidden))
        arrays[f"{at}mlp.c_fc.bias"] = _random((4 * hidden,))
        arrays[f"{at}mlp.c_proj.weight"] = _random((4 * hidden, hidden))
        arrays[f"{at}mlp.c_proj.bias"] = _random((hidden,))
    return arrays, {"model_type": "gpt2", "n_embd": hidden, "n_head": 4}


def _neox(rank: Layout, name: str, array: Any) -> Any:
    heads = 4
    if "layernorm" in name or "layer_norm" in name:
        return rank.whole(array)
    if name.endswith(("attention.bias", "masked_bias", "inv_freq")):
        return rank.whole(array)  # buffers
    if name in ("gpt_neox.embed_in.weight", "embed_out.weight"):
        return rank.split(array, 0)
    if "query_key_value" in name:
        # transformers: qkv.view(..., heads, 3 * head_size): each head's q, k and v together,
        # so a rank's heads are its rows, whole.
        per = heads // rank.world
        if heads % rank.world:
            return array
        grouped = array.reshape(heads, -1, *array.shape[1:])
        return grouped[rank.rank * per : (rank.rank + 1) * per].reshape(-1, *array.shape[1:])
    if name.endswith("attention.dense.weight"):
        return rank.heads(array, 1, heads)
    if name.endswith(("dense_h_to_4h.weight", "dense_h_to_4h.bias")):
        return rank.split(array, 0)
    if name.endswith("dense_4h_to_h.weight"):
        return rank.split(array, 1)
    if name.endswith(("attention.dense.bias", "dense_4h_to_h.bias")):
        return rank.whole(array)
    raise AssertionError(name)


def _neox_model() -> tuple[dict[str, Any], dict[str, Any]]:
    hidden, vocab = 24, 30
    arrays: dict[str, Any] = {
        "gpt_neox.embed_in.weight": _random((vocab, hidden)),
        "gpt_neox.final_layer_norm.weight": _random((hidden,)),
        "embed_out.weight": _random((vocab, hidden)),
    }
    for layer in range(2):
        at = f"gpt_neox.layers.{layer}."
        arrays[f"{at}input_layernorm.weight"] = _random((hidden,))
        arrays[f"{at}post_attention_layernorm.bias"] = _random((hidden,))
        arrays[f"{at}attention.bias"] = np.tril(np.ones((1, 1, 8, 8), bool))
        arrays[f"{at}attention.masked_bias"] = np.array(-1e9, np.float32)
        arrays[f"{at}attention.rotary_emb.inv_freq"] = _random((3,))
        arrays[f"{at}attention.query_key_value.weight"] = _random((3 * hidden, hidden))
        arrays[f"{at}attention.query_key_value.bias"] = _random((3 * hidden,))
        arrays[f"{at}attention.dense.weight"] = _random((hidden, hidden))
        arrays[f"{at}attention.dense.bias"] = _random((hidden,))
        arrays[f"{at}mlp.dense_h_to_4h.weight"] = _random((4 * hidden, hidden))
        arrays[f"{at}mlp.dense_h_to_4h.bias"] = _random((4 * hidden,))
        arrays[f"{at}mlp.dense_4h_to_h.weight"] = _random((hidden, 4 * hidden))
        arrays[f"{at}mlp.dense_4h_to_h.bias"] = _random((hidden,))
    return arrays, {"model_type": "gpt_neox", "hidden_size": hidden, "num_attention_heads": 4}


def _bloom(rank: Layout, name: str, array: Any) -> Any:
    if "layernorm" in name or name.startswith("ln_f."):
        return rank.whole(array)
    if name == "word_embeddings.weight":
        return rank.split(array, 0)
    # BLOOM's fused QKV is laid out as GPT-NeoX's: each head's q, k and v together.
    return _neox(rank, name.replace("self_attention", "attention"), array)


def _bloom_model() -> tuple[dict[str, Any], dict[str, Any]]:
    hidden = 24
    arrays: dict[str, Any] = {
        "word_embeddings.weight": _random((30, hidden)),
        "word_embeddings_layernorm.weight": _random((hidden,)),
        "ln_f.bias": _random((hidden,)),
    }
    at = "h.0."
    arrays[f"{at}input_layernorm.weight"] = _random((hidden,))
    arrays[f"{at}self_attention.query_key_value.weight"] = _random((3 * hidden, hidden))
    arrays[f"{at}self_attention.query_key_value.bias"] = _random((3 * hidden,))
    arrays[f"{at}self_attention.dense.weight"] = _random((hidden, hidden))
    arrays[f"{at}self_attention.dense.bias"] = _random((hidden,))
    arrays[f"{at}post_attention_layernorm.weight"] = _random((hidden,))
    arrays[f"{at}mlp.dense_h_to_4h.weight"] = _random((4 * hidden, hidden))
    arrays[f"{at}mlp.dense_h_to_4h.bias"] = _random((4 * hidden,))
    arrays[f"{at}mlp.dense_4h_to_h.weight"] = _random((hidden, 4 * hidden))
    arrays[f"{at}mlp.dense_4h_to_h.bias"] = _random((hidden,))
    return arrays, {"model_type": "bloom", "hidden_size": hidden, "n_head": 4}


def _llama_like(heads: int, kv: int) -> Expect:
    def expect(rank: Layout, name: str, array: Any) -> Any:
        if "norm" in name or "inv_freq" in name:
            return rank.whole(array)
        if name.endswith(("block_sparse_moe.gate.weight", "mlp.gate.weight", "expert_gate.weight")):
            return rank.whole(array)  # routers
        if name in ("model.embed_tokens.weight", "lm_head.weight"):
            return rank.split(array, 0)
        if ".q_proj." in name:
            return rank.heads(array, 0, heads)
        if ".k_proj." in name or ".v_proj." in name:
            return rank.heads(array, 0, kv)
        if name.endswith("o_proj.weight"):
            return rank.heads(array, 1, heads)
        if name.endswith("gate_up_proj.weight"):
            half = array.shape[0] // 2
            return np.concatenate(
                [rank.split(array[:half], 0), rank.split(array[half:], 0)], axis=0
            )
        if name.endswith(("gate_proj.weight", "up_proj.weight", ".w1.weight", ".w3.weight")):
            return rank.split(array, 0)
        if name.endswith(("down_proj.weight", ".w2.weight")):
            return rank.split(array, 1)
        if name.endswith("qkv_proj.weight"):
            if heads % rank.world:
                return array
            return rank.fused(array, 0, [(heads * 4, heads), (kv * 4, kv), (kv * 4, kv)])
        raise AssertionError(name)

    return expect


def _decoder(
    model_type: str,
    heads: int,
    kv: int,
    head_dim: int,
    *,
    hidden: int = 32,
    bias: bool = False,
    experts: str | None = None,
    fused: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Llama-like decoder (Mistral, Qwen2 with q/k/v biases, Gemma with its own head_dim,
    Mixtral's or Qwen-MoE's experts, Phi-3's fused projections)."""
    inner, vocab = 40, 30
    arrays: dict[str, Any] = {
        "model.embed_tokens.weight": _random((vocab, hidden)),
        "model.norm.weight": _random((hidden,)),
        "lm_head.weight": _random((vocab, hidden)),
    }
    for layer in range(2):
        at = f"model.layers.{layer}."
        arrays[f"{at}input_layernorm.weight"] = _random((hidden,))
        arrays[f"{at}post_attention_layernorm.weight"] = _random((hidden,))
        arrays[f"{at}self_attn.rotary_emb.inv_freq"] = _random((head_dim // 2,))
        if fused:
            rows = (heads + 2 * kv) * head_dim
            arrays[f"{at}self_attn.qkv_proj.weight"] = _random((rows, hidden))
            arrays[f"{at}mlp.gate_up_proj.weight"] = _random((2 * inner, hidden))
            arrays[f"{at}mlp.down_proj.weight"] = _random((hidden, inner))
        else:
            arrays[f"{at}self_attn.q_proj.weight"] = _random((heads * head_dim, hidden))
            arrays[f"{at}self_attn.k_proj.weight"] = _random((kv * head_dim, hidden))
            arrays[f"{at}self_attn.v_proj.weight"] = _random((kv * head_dim, hidden))
        if bias:
            arrays[f"{at}self_attn.q_proj.bias"] = _random((heads * head_dim,))
            arrays[f"{at}self_attn.k_proj.bias"] = _random((kv * head_dim,))
            arrays[f"{at}self_attn.v_proj.bias"] = _random((kv * head_dim,))
        arrays[f"{at}self_attn.o_proj.weight"] = _random((hidden, heads * head_dim))
        if experts == "mixtral":
            arrays[f"{at}block_sparse_moe.gate.weight"] = _random((4, hidden))
            for expert in range(4):
                moe = f"{at}block_sparse_moe.experts.{expert}."
                arrays[f"{moe}w1.weight"] = _random((inner, hidden))
                arrays[f"{moe}w2.weight"] = _random((hidden, inner))
                arrays[f"{moe}w3.weight"] = _random((inner, hidden))
        elif experts == "qwen":
            arrays[f"{at}mlp.gate.weight"] = _random((4, hidden))
            arrays[f"{at}mlp.shared_expert_gate.weight"] = _random((1, hidden))
            for expert in ("experts.0", "experts.1", "experts.2", "shared_expert"):
                moe = f"{at}mlp.{expert}."
                arrays[f"{moe}gate_proj.weight"] = _random((inner, hidden))
                arrays[f"{moe}up_proj.weight"] = _random((inner, hidden))
                arrays[f"{moe}down_proj.weight"] = _random((hidden, inner))
        elif not fused:
            arrays[f"{at}mlp.gate_proj.weight"] = _random((inner, hidden))
            arrays[f"{at}mlp.up_proj.weight"] = _random((inner, hidden))
            arrays[f"{at}mlp.down_proj.weight"] = _random((hidden, inner))
    config = {
        "model_type": model_type,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": head_dim,
    }
    return arrays, config


def _t5(rank: Layout, name: str, array: Any) -> Any:
    heads = 4
    if "layer_norm" in name:
        return rank.whole(array)
    if name in ("shared.weight", "encoder.embed_tokens.weight", "lm_head.weight"):
        return rank.split(array, 0)
    if name.endswith("relative_attention_bias.weight"):
        return rank.heads(array, 1, heads)  # [buckets, heads]
    if name.endswith((".q.weight", ".k.weight", ".v.weight")):
        return rank.heads(array, 0, heads)
    if name.endswith(".o.weight"):
        return rank.heads(array, 1, heads)
    if name.endswith("wi.weight"):
        return rank.split(array, 0)
    if name.endswith("wo.weight"):
        return rank.split(array, 1)
    raise AssertionError(name)


def _t5_model() -> tuple[dict[str, Any], dict[str, Any]]:
    hidden, heads, d_kv, d_ff, vocab = 16, 4, 4, 32, 30
    inner = heads * d_kv
    arrays: dict[str, Any] = {
        "shared.weight": _random((vocab, hidden)),
        "encoder.embed_tokens.weight": _random((vocab, hidden)),
        "encoder.final_layer_norm.weight": _random((hidden,)),
        "decoder.final_layer_norm.weight": _random((hidden,)),
        "lm_head.weight": _random((vocab, hidden)),
    }
    for stack, blocks in (
        ("encoder", ["SelfAttention"]),
        ("decoder", ["SelfAttention", "EncDecAttention"]),
    ):
        at = f"{stack}.block.0.layer."
        for index, block in enumerate(blocks):
            for part in "qkv":
                arrays[f"{at}{index}.{block}.{part}.weight"] = _random((inner, hidden))
            arrays[f"{at}{index}.{block}.o.weight"] = _random((hidden, inner))
            arrays[f"{at}{index}.layer_norm.weight"] = _random((hidden,))
        arrays[f"{at}0.SelfAttention.relative_attention_bias.weight"] = _random((8, heads))
        ff = len(blocks)
        arrays[f"{at}{ff}.DenseReluDense.wi.weight"] = _random((d_ff, hidden))
        arrays[f"{at}{ff}.DenseReluDense.wo.weight"] = _random((hidden, d_ff))
        arrays[f"{at}{ff}.layer_norm.weight"] = _random((hidden,))
    config = {"model_type": "t5", "d_model": hidden, "num_heads": heads, "d_kv": d_kv}
    return arrays, config


def _lora(rank: Layout, name: str, array: Any) -> Any:
    heads, kv = 8, 2
    if "lora_embedding_A" in name:
        return rank.split(array, 1)  # [r, vocab]: the vocabulary is split
    if "q_proj.lora_B" in name:
        return rank.heads(array, 0, heads)  # [out, r], out split as q is
    if "k_proj.lora_B" in name or "v_proj.lora_B" in name:
        return rank.heads(array, 0, kv)
    if "o_proj.lora_A" in name:
        return rank.heads(array, 1, heads)  # [r, in], in split as o's input is
    if "up_proj.lora_B" in name:
        return rank.split(array, 0)
    if "down_proj.lora_A" in name:
        return rank.split(array, 1)
    return rank.whole(array)  # the other factor of each pair


def _lora_adapter() -> tuple[dict[str, Any], dict[str, Any]]:
    """A PEFT adapter of the GQA Llama (r=4), with its base model's config."""
    hidden, inner, vocab, r = 32, 40, 30, 4
    at = "base_model.model.model.layers.0."
    outs = {"self_attn.q_proj": 32, "self_attn.k_proj": 8, "self_attn.v_proj": 8}
    outs |= {"self_attn.o_proj": hidden, "mlp.up_proj": inner, "mlp.down_proj": hidden}
    ins = {"mlp.down_proj": inner}
    arrays: dict[str, Any] = {}
    for module, out in outs.items():
        arrays[f"{at}{module}.lora_A.weight"] = _random((r, ins.get(module, hidden)))
        arrays[f"{at}{module}.lora_B.weight"] = _random((out, r))
    arrays["base_model.model.model.embed_tokens.lora_embedding_A"] = _random((r, vocab))
    arrays["base_model.model.model.embed_tokens.lora_embedding_B"] = _random((hidden, r))
    _, config = _decoder("llama", 8, 2, 4)
    return arrays, config


MODELS: dict[str, tuple[Callable[[], tuple[dict[str, Any], dict[str, Any]]], Expect]] = {
    "minilm-bert": (_minilm, _bert),
    "roberta-mlm": (_roberta_mlm, _roberta),
    "distilbert": (_distilbert_model, _distilbert),
    "gpt2": (_gpt2_model, _gpt2),
    "gpt-neox": (_neox_model, _neox),
    "bloom": (_bloom_model, _bloom),
    "llama-gqa": (lambda: _decoder("llama", 8, 2, 4), _llama_like(8, 2)),
    "mistral": (lambda: _decoder("mistral", 4, 1, 8), _llama_like(4, 1)),
    "qwen2-bias": (lambda: _decoder("qwen2", 4, 2, 8, bias=True), _llama_like(4, 2)),
    "gemma-head-dim": (lambda: _decoder("gemma", 6, 1, 4), _llama_like(6, 1)),
    "mixtral": (lambda: _decoder("mixtral", 4, 2, 8, experts="mixtral"), _llama_like(4, 2)),
    "qwen2-moe": (lambda: _decoder("qwen2_moe", 4, 4, 8, experts="qwen"), _llama_like(4, 4)),
    "phi3-fused": (lambda: _decoder("phi3", 4, 2, 4, hidden=16, fused=True), _llama_like(4, 2)),
    "t5": (_t5_model, _t5),
    "lora-adapter": (_lora_adapter, _lora),
}


def _write(folder: Path, arrays: dict[str, Any], config: dict[str, Any] | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    reference.save_file(arrays, str(folder / "model.safetensors"))
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def _joined(shares: list[Any], selection: object, whole: Any) -> Any:
    """The ranks' parts put back together, as their selection says they were cut."""
    if selection is None:
        assert all(np.array_equal(share, whole) for share in shares)
        return shares[0]
    if isinstance(selection, Split):
        return np.concatenate(shares, axis=selection.axis)
    assert isinstance(selection, Parts)
    axis, parts, rebuilt = selection.axis, [], []
    for rank, share in enumerate(shares):
        pieces = Parts(rank, selection.world, axis, selection.parts).pieces()
        bounds = np.cumsum([stop - start for start, stop in pieces])[:-1]
        parts.append(np.split(share, bounds, axis=axis))
    for index, (_, split) in enumerate(selection.parts):
        if split:
            rebuilt.append(np.concatenate([pieces[index] for pieces in parts], axis=axis))
        else:
            rebuilt.append(parts[0][index])
    return np.concatenate(rebuilt, axis=axis)


@pytest.mark.parametrize("model", list(MODELS))
def test_every_rank_holds_its_part_and_the_parts_make_the_tensor(
    tmp_path: Path, model: str
) -> None:
    build, expect = MODELS[model]
    arrays, config = build()
    folder = _write(tmp_path / model, arrays, None if model == "lora-adapter" else config)
    given = config if model == "lora-adapter" else None  # an adapter's config is its base's
    for world in WORLDS:
        shares: dict[str, list[Any]] = {name: [] for name in arrays}
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # every tensor has a rule: no warning
            plans = [plan_rank(folder, rank, world, config=given) for rank in range(world)]
        for rank, plan in enumerate(plans):
            got = load_plan(plan)
            assert got.keys() == arrays.keys()
            layout = Layout(rank, world)
            for name, array in arrays.items():
                want = expect(layout, name, array)
                assert got[name].shape == want.shape, (model, world, rank, name)
                assert np.array_equal(got[name], want), (model, world, rank, name)
                shares[name].append(got[name])
        for tensor in plans[0].tensors:
            whole = _joined(shares[tensor.name], tensor.selection, arrays[tensor.name])
            assert np.array_equal(whole, arrays[tensor.name]), (model, world, tensor.name)


def test_minilm_as_the_issue_found_it(tmp_path: Path) -> None:
    """The tensors the issue named, and what the plan says of them before anything is read."""
    arrays, config = _minilm()
    folder = _write(tmp_path, arrays, config)
    plan = plan_rank(folder, 1, 2)
    by_name = {tensor.name: tensor for tensor in plan.tensors}
    norm = by_name["embeddings.LayerNorm.weight"]
    assert (norm.shape, norm.axis, norm.selection) == ((24,), None, None)
    assert norm.rule == "norm: whole"
    output = by_name["encoder.layer.0.attention.output.dense.weight"]
    assert (output.shape, output.axis) == ((24, 12), 1)
    assert output.rule is not None
    assert output.rule.startswith("row-parallel")
    bias = by_name["encoder.layer.0.attention.output.dense.bias"]
    assert (bias.shape, bias.axis) == ((24,), None)
    assert bias.rule is not None
    assert "row-parallel bias" in bias.rule
    assert by_name["encoder.layer.0.output.dense.weight"].axis == 1
    assert by_name["encoder.layer.0.output.dense.bias"].axis is None
    ids = by_name["embeddings.position_ids"]
    assert (ids.shape, ids.axis, ids.rule) == ((1, 16), None, "buffer: whole")
    summary = plan.summary()
    assert "split along axis 0" in summary
    assert "whole on every rank" in summary
    share = load_rank(folder, 1, 2)
    assert np.array_equal(share["embeddings.position_ids"], arrays["embeddings.position_ids"])


def test_without_a_config_names_decide_case_insensitively(tmp_path: Path) -> None:
    arrays, _ = _minilm()
    folder = _write(tmp_path, arrays, None)
    with pytest.warns(UserWarning, match=r"^14 tensors no tensor-parallel rule decides") as caught:
        share = load_rank(folder, 1, 2)
    # The warning points at this file, the caller's, and counts what each rank reads whole.
    assert Path(caught[0].filename).name == "test_parallel.py"
    message = str(caught[0].message)
    # q, k, v (weights and biases) and the attention's output, in each of 2 layers.
    assert f"{2 * (4 * 24 * 24 * 4 + 3 * 24 * 4):,} bytes a rank" in message
    assert "query.weight (column-parallel q: whole (no config gives its heads))" in message
    assert "names only (no config)" in message
    assert share["embeddings.LayerNorm.weight"].shape == (24,)
    assert share["encoder.layer.0.output.dense.weight"].shape == (24, 24)  # axis 1 of 48
    assert share["encoder.layer.0.output.dense.bias"].shape == (24,)
    assert share["embeddings.position_ids"].shape == (1, 16)
    # q, k, v and the attention's output: their heads are the config's, so without one they
    # are whole (and said to be).
    assert share["encoder.layer.0.attention.self.query.weight"].shape == (24, 24)
    assert share["encoder.layer.0.attention.output.dense.weight"].shape == (24, 24)
    # config={} reads no config.json, even where there is one.
    (folder / "config.json").write_text(json.dumps(_minilm()[1]))
    with pytest.warns(UserWarning, match="14 tensors"):
        plan_rank(folder, 0, 2, config={})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan_rank(folder, 0, 2)


UNKNOWN = {
    "encoder.frobnicator.weight": (6, 4),
    "Mixer.Blend": (8,),
    "model.layers.0.mlp.up_proj.weight": (6, 4),
    "model.layers.0.Input_LayerNorm.Weight": (4,),
}


@pytest.mark.parametrize("config", [None, {"model_type": "llama", "num_attention_heads": 2}])
def test_unknown_names_are_whole_with_a_warning_or_refused(
    tmp_path: Path, config: dict[str, Any] | None
) -> None:
    arrays = {name: _random(shape) for name, shape in UNKNOWN.items()}
    folder = _write(tmp_path, arrays, config)
    with pytest.warns(UserWarning, match="no tensor-parallel rule decides") as caught:
        share = load_rank(folder, 1, 2)
    (warning,) = caught
    assert str(warning.message).startswith("2 tensors no tensor-parallel rule decides")
    assert f"{(6 * 4 + 8) * 4:,} bytes a rank" in str(warning.message)
    assert "encoder.frobnicator.weight" in str(warning.message)
    assert "Mixer.Blend" in str(warning.message)
    assert np.array_equal(share["encoder.frobnicator.weight"], arrays["encoder.frobnicator.weight"])
    assert np.array_equal(share["Mixer.Blend"], arrays["Mixer.Blend"])
    assert share["model.layers.0.mlp.up_proj.weight"].shape == (3, 4)
    assert share["model.layers.0.Input_LayerNorm.Weight"].shape == (4,)
    with pytest.raises(HeaderError, match=r"2 tensors with no tensor-parallel rule") as error:
        load_rank(folder, 0, 2, strict=True)
    assert error.value.kind == "NoSplitRule"
    assert error.value.tensor in ("encoder.frobnicator.weight", "Mixer.Blend")
    assert "Mixer.Blend" in str(error.value)
    assert "encoder.frobnicator.weight" in str(error.value)
    # The caller's own rules decide them: no warning, and strict is satisfied.
    axes = {"encoder.*": 1, "Mixer.*": None}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        share = load_rank(folder, 1, 2, axes=axes, strict=True)
    assert share["encoder.frobnicator.weight"].shape == (6, 2)


def test_heads_that_do_not_divide_leave_q_k_v_whole(tmp_path: Path) -> None:
    """Llama with 2 KV heads on 4 ranks: k and v whole (not cut inside a head), q split."""
    arrays, config = _decoder("llama", 8, 2, 4)
    folder = _write(tmp_path, arrays, config)
    plan = plan_rank(folder, 3, 4)
    by_name = {tensor.name: tensor for tensor in plan.tensors}
    k = by_name["model.layers.0.self_attn.k_proj.weight"]
    assert (k.shape, k.axis) == ((8, 32), None)
    assert k.rule == "column-parallel k/v: whole (2 heads do not divide by 4)"
    assert by_name["model.layers.0.self_attn.q_proj.weight"].shape == (8, 32)
    assert by_name["model.layers.0.self_attn.o_proj.weight"].shape == (32, 8)


def test_a_config_that_does_not_fit_the_shapes_is_no_rule(tmp_path: Path) -> None:
    arrays, config = _decoder("llama", 8, 2, 4)
    folder = _write(tmp_path, arrays, {**config, "num_attention_heads": 5})
    with pytest.warns(UserWarning, match="is not 5 heads"):
        plan_rank(folder, 0, 2)
    with pytest.raises(HeaderError, match="q_proj"):
        plan_rank(folder, 0, 2, strict=True)


def test_fused_qkv_of_an_unknown_layout_is_no_rule(tmp_path: Path) -> None:
    """Falcon's query_key_value groups its heads otherwise than GPT-NeoX's: no guess."""
    arrays = {"transformer.h.0.self_attention.query_key_value.weight": _random((12, 4))}
    folder = _write(tmp_path, arrays, {"model_type": "falcon", "num_attention_heads": 2})
    with pytest.raises(HeaderError, match="query_key_value") as error:
        plan_rank(folder, 0, 2, strict=True)
    assert "model_type 'falcon' has no rules of its own" in str(error.value)


def test_split_tensors_is_the_same_rules_for_plan_reads(tmp_path: Path) -> None:
    arrays, config = _gpt2_model()
    folder = _write(tmp_path, arrays, config)
    ours = plan_reads(folder, split_tensors(1, 4, config=config))
    assert [t.selection for t in ours.tensors] == [
        t.selection for t in plan_rank(folder, 1, 4).tensors
    ]
    attn = next(t for t in ours.tensors if t.name.endswith("0.attn.c_attn.weight"))
    assert attn.selection == Parts(1, 4, 1, ((24, True), (24, True), (24, True)))
    assert attn.shape == (24, 18)
    with pytest.raises(ValueError, match=r"rank must be in 0\.\.world-1"):
        split_tensors(4, 4)
    with pytest.raises(ValueError, match="parts must be"):
        Parts(0, 2, 0, ())


def test_a_ranks_share_over_http_reads_the_config_beside_it(tmp_path: Path, site: Any) -> None:
    arrays, config = _decoder("llama", 8, 2, 4)
    folder = _write(tmp_path, arrays, config)
    site.files["model.safetensors"] = (folder / "model.safetensors").read_bytes()
    site.files["config.json"] = (folder / "config.json").read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        share = load_rank(site.url("model.safetensors"), 1, 4, timeout=30)
    local = load_rank(folder, 1, 4)
    assert share.keys() == local.keys()
    assert all(np.array_equal(share[name], local[name]) for name in local)


def test_gpt2_names_without_a_config_go_by_the_shapes_of_conv1d(tmp_path: Path) -> None:
    """Without a config, c_fc and c_proj are GPT-2's Conv1D only where shaped [in, out]; a
    Linear of those names (StarCoder's) is no rule, not split along its wrong axis."""
    arrays, _ = _gpt2_model()
    folder = _write(tmp_path / "gpt2", arrays, None)
    with pytest.warns(UserWarning, match="c_attn") as caught:
        plan = plan_rank(folder, 1, 2)
    by_name = {tensor.name: tensor for tensor in plan.tensors}
    assert by_name["transformer.h.0.mlp.c_fc.weight"].axis == 1
    assert by_name["transformer.h.0.mlp.c_proj.weight"].axis == 0
    assert by_name["transformer.h.0.attn.c_attn.weight"].axis is None  # its heads: no config
    assert "c_fc" not in str(caught[0].message)
    linear = {
        "transformer.h.0.mlp.c_fc.weight": _random((96, 24)),
        "transformer.h.0.mlp.c_proj.weight": _random((24, 96)),
    }
    folder = _write(tmp_path / "bigcode", linear, None)
    with pytest.warns(UserWarning, match="2 tensors") as caught:
        plan = plan_rank(folder, 1, 2)
    assert all(tensor.axis is None for tensor in plan.tensors)
    assert "a Linear's shape, not GPT-2's Conv1D" in str(caught[0].message)
    # With a config of another model, GPT-2's names are no rule at all.
    folder = _write(tmp_path / "other", linear, {"model_type": "gpt_bigcode", "n_head": 4})
    with pytest.raises(HeaderError, match="gpt_bigcode"):
        plan_rank(folder, 0, 2, strict=True)


def test_a_multimodal_configs_heads_are_its_text_models(tmp_path: Path) -> None:
    text = {"model_type": "llama", "num_attention_heads": 8, "num_key_value_heads": 2}
    config = {"model_type": "llava", "text_config": text, "vision_config": {"num_heads": 12}}
    arrays = {
        "language_model.model.layers.0.self_attn.q_proj.weight": _random((32, 32)),
        "language_model.model.layers.0.self_attn.k_proj.weight": _random((8, 32)),
        "language_model.model.layers.0.mlp.up_proj.weight": _random((40, 32)),
        "vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight": _random((48, 48)),
        "vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight": _random((96, 48)),
    }
    folder = _write(tmp_path, arrays, config)
    with pytest.warns(UserWarning, match="1 tensor ") as caught:
        plan = plan_rank(folder, 1, 2)
    assert "vision_tower.vision_model.encoder.layers.0.self_attn.q_proj" in str(caught[0].message)
    axes = {tensor.name: tensor.axis for tensor in plan.tensors}
    assert axes == {
        "language_model.model.layers.0.self_attn.q_proj.weight": 0,
        "language_model.model.layers.0.self_attn.k_proj.weight": 0,
        "language_model.model.layers.0.mlp.up_proj.weight": 0,
        "vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight": None,
        "vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight": 0,
    }


@pytest.mark.parametrize(
    ("model_type", "names"),
    [
        (  # OPT: its own model_type, Llama-like names, learned positions
            "opt",
            {
                "model.decoder.embed_tokens.weight": ((30, 16), 0),
                "model.decoder.embed_positions.weight": ((18, 16), None),
                "model.decoder.layers.0.self_attn.q_proj.weight": ((16, 16), 0),
                "model.decoder.layers.0.self_attn.q_proj.bias": ((16,), 0),
                "model.decoder.layers.0.self_attn.out_proj.weight": ((16, 16), 1),
                "model.decoder.layers.0.self_attn.out_proj.bias": ((16,), None),
                "model.decoder.layers.0.self_attn_layer_norm.weight": ((16,), None),
                "model.decoder.layers.0.fc1.weight": ((40, 16), 0),
                "model.decoder.layers.0.fc2.weight": ((16, 40), 1),
                "model.decoder.layers.0.fc2.bias": ((16,), None),
            },
        ),
        (  # Phi-2: the attention's output is self_attn.dense, the LM head has a bias
            "phi",
            {
                "model.layers.0.self_attn.k_proj.weight": ((16, 16), 0),
                "model.layers.0.self_attn.dense.weight": ((16, 16), 1),
                "model.layers.0.self_attn.dense.bias": ((16,), None),
                "model.final_layernorm.weight": ((16,), None),
                "lm_head.weight": ((30, 16), 0),
                "lm_head.bias": ((30,), 0),
            },
        ),
        (  # DeepSeek-V3's router and its bias
            "deepseek_v3",
            {
                "model.layers.3.mlp.gate.weight": ((8, 16), None),
                "model.layers.3.mlp.gate.e_score_correction_bias": ((8,), None),
                "model.layers.3.mlp.experts.0.down_proj.weight": ((16, 24), 1),
            },
        ),
    ],
)
def test_models_without_rules_of_their_own_go_by_their_names(
    tmp_path: Path, model_type: str, names: dict[str, tuple[tuple[int, ...], int | None]]
) -> None:
    arrays = {name: _random(shape) for name, (shape, _) in names.items()}
    folder = _write(tmp_path, arrays, {"model_type": model_type, "num_attention_heads": 4})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan = plan_rank(folder, 1, 2)
    assert {tensor.name: tensor.axis for tensor in plan.tensors} == {
        name: axis for name, (_, axis) in names.items()
    }


def test_odd_shapes_are_no_rule_and_lora_magnitudes_follow_their_layer(tmp_path: Path) -> None:
    _, config = _decoder("llama", 8, 2, 4)
    arrays = {
        "model.layers.0.mlp.gate_up_proj.weight": _random((41, 32)),  # no two halves
        "model.layers.0.mlp.up_proj.weight": _random((4, 40, 32)),  # a stack: no rule
        "base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector": _random((32,)),
        "base_model.model.model.layers.0.self_attn.o_proj.lora_magnitude_vector": _random((32,)),
    }
    folder = _write(tmp_path, arrays, config)
    with pytest.warns(UserWarning, match="2 tensors") as caught:
        plan = plan_rank(folder, 1, 2)
    message = str(caught[0].message)
    assert "41 is no two parts" in message
    assert "no rule for a 3-d column tensor" in message
    by_name = {tensor.name: tensor for tensor in plan.tensors}
    magnitude = by_name["base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector"]
    assert (magnitude.axis, magnitude.shape) == (0, (16,))
    assert magnitude.rule == "DoRA magnitude of a column-parallel q at head boundaries, axis 0"
    output = by_name["base_model.model.model.layers.0.self_attn.o_proj.lora_magnitude_vector"]
    assert output.axis is None  # a row-parallel layer's output features are whole


def test_parts_that_do_not_fit_their_tensor_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    write_file(
        path,
        {
            "w": _random((5, 4)),
            "packed": ("F4", (4, 3), bytes(6)),  # 12 bits a row: no byte boundary
            "flat": _random((6,)),
        },
    )
    with pytest.raises(ValueError, match=r"parts \[3, 3\] do not add up to its size 5"):
        plan_reads(path, {"w": Parts(0, 2, 0, ((3, True), (3, True)))})
    with pytest.raises(ValueError, match="do not fall on byte boundaries"):
        plan_reads(path, {"packed": Parts(0, 2, 0, ((2, True), (2, True)))})
    flat = plan_reads(path, {"flat": Parts(1, 2, 1, ((3, True), (3, True)))})
    assert flat.tensors[0].shape == (6,)  # no axis 1: whole
    assert flat.tensors[0].axis is None
    assert repr(Parts(1, 2, 0, ((2, True),))) == "Parts(1, 2, axis=0, parts=((2, True),))"


def _rules(config: dict[str, Any] | None, world: int = 2) -> Any:
    from safetensors_header._model.parallel import TensorParallel

    return TensorParallel(world, config)


def test_heads_are_held_to_their_exact_size() -> None:
    """q, k, v and the output are split only where their size is exactly their heads': a
    sub-model with heads of its own, k/v heads the config does not count, and a cross-
    attention's [k, v] are whole (and said to be no rule), never cut inside a head."""
    llama = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8}
    rules = _rules({**llama, "num_key_value_heads": 4}, 4)
    assert rules.share("model.layers.0.self_attn.k_proj.weight", (32, 64)).axis == 0
    # The config does not say the k/v heads (4 of 8): they are taken for 8, which 32 is not.
    share = _rules(llama, 4).share("model.layers.0.self_attn.k_proj.weight", (32, 64))
    assert share.axis is None
    assert not share.known
    assert "is not 8 heads of 8" in share.rule
    # A Q-Former (3 heads of 16) beside a text model of 4 heads of 16.
    blip = {"model_type": "blip-2", "text_config": {**llama, "num_attention_heads": 4}}
    blip["vision_config"] = {"num_attention_heads": 2}
    share = _rules(blip, 4).share(
        "qformer.encoder.layer.0.attention.attention.query.weight", (48, 48)
    )
    assert (share.axis, share.known) == (None, False)
    text = _rules(blip, 4).share("language_model.model.layers.0.self_attn.q_proj.weight", (64, 64))
    assert text.axis == 0
    # A perceiver resampler's k (2 heads of 16 = 32 rows, as the text model's 4 heads of 8).
    idefics = {"model_type": "idefics2", "text_config": {**llama, "num_key_value_heads": 4}}
    idefics["vision_config"] = {"num_attention_heads": 2}
    name = "model.connector.perceiver_resampler.layers.0.self_attn.k_proj.weight"
    assert _rules(idefics, 4).share(name, (32, 64)).axis is None
    # GPT-2's cross-attention c_attn is [k, v], not [q, k, v].
    gpt2 = {"model_type": "gpt2", "n_embd": 96, "n_head": 2, "add_cross_attention": True}
    cross = _rules(gpt2).share("transformer.h.0.crossattention.c_attn.weight", (96, 192))
    assert (cross.axis, cross.known) == (None, False)
    assert _rules(gpt2).share("transformer.h.0.attn.c_attn.weight", (96, 288)).axis == 1


def test_names_whose_meaning_is_the_models() -> None:
    # ChatGLM's dense_h_to_4h is a fused [gate; up]: split part by part.
    glm = _rules({"model_type": "chatglm", "hidden_size": 64, "num_attention_heads": 4})
    share = glm.share("transformer.encoder.layers.0.mlp.dense_h_to_4h.weight", (192, 64))
    assert (share.axis, share.parts) == (0, ((96, True), (96, True)))
    # Qwen (v1)'s w2 is column-parallel, Mixtral's a down projection (row-parallel).
    qwen = _rules({"model_type": "qwen", "hidden_size": 64, "num_attention_heads": 4})
    assert qwen.share("transformer.h.0.mlp.w2.weight", (48, 64)).axis == 0
    mixtral = _rules({"model_type": "mixtral", "hidden_size": 64, "num_attention_heads": 4})
    assert mixtral.share("model.layers.0.block_sparse_moe.experts.0.w2.weight", (64, 48)).axis == 1
    # Elsewhere, and without a config, such a name is no rule: whole, and said.
    for rules in (_rules({"model_type": "something", "hidden_size": 8}), _rules(None)):
        share = rules.share("model.layers.0.mlp.w2.weight", (64, 48))
        assert (share.axis, share.known) == (None, False)
        assert "differs by model" in share.rule


def test_a_quantized_checkpoint_a_tiny_axis_and_a_norm_in_a_modules_name() -> None:
    quantized = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8}
    quantized["quantization_config"] = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    share = _rules(quantized).share("model.layers.0.mlp.down_proj.weight", (4096, 1))
    assert (share.axis, share.known) == (None, False)
    assert "quantized" in share.rule
    # A vocabulary of 5 among 8 ranks: some would hold nothing of it.
    share = _rules({"model_type": "llama"}, 8).share("model.embed_tokens.weight", (5, 16))
    assert (share.axis, share.known) == (None, False)
    # DBRX keeps its attention under "norm_attn_norm.": a norm is a module's last name only.
    dbrx = _rules({"model_type": "dbrx", "d_model": 64, "n_heads": 4})
    assert dbrx.share("transformer.blocks.0.norm_attn_norm.norm_1.weight", (64,)).rule == (
        "norm: whole"
    )
    share = dbrx.share("transformer.blocks.0.norm_attn_norm.attn.Wqkv.weight", (192, 64))
    assert share.rule != "norm: whole"
    assert not share.known
