"""describe_model: the kind, the quantization and its evidence, the parameters as a model card
counts them, and the memory, on headers shaped like published models (Meta-Llama-3-8B and its
GPTQ, AWQ, bitsandbytes, FP8 and F4 versions, a LoRA adapter of it, gpt-oss's MXFP4 experts).

The headers are built without data (`encode_header`, `parse_header`); the expected numbers are
worked out by hand below, from the shapes.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from safetensors_header import (
    Checkpoint,
    Header,
    encode_header,
    open_file,
    parse_header,
    read_checkpoint,
    write_file,
)
from safetensors_header.model import ModelInfo, describe_model

Layout = dict[str, tuple[str, list[int]]]
Linear = Callable[[str, int, int], Layout]

HIDDEN, VOCAB, LAYERS = 4096, 128256, 32
#: Meta-Llama-3-8B's linear layers: name -> (out, in).
LINEARS = {
    "self_attn.q_proj": (4096, 4096),
    "self_attn.k_proj": (1024, 4096),
    "self_attn.v_proj": (1024, 4096),
    "self_attn.o_proj": (4096, 4096),
    "mlp.gate_proj": (14336, 4096),
    "mlp.up_proj": (14336, 4096),
    "mlp.down_proj": (4096, 14336),
}
# The numbers of Meta-Llama-3-8B, by hand:
LINEAR = 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096)  # 224 weights
REST = 2 * VOCAB * HIDDEN + 65 * HIDDEN  # embed_tokens, lm_head, 65 norms
PARAMETERS = 8_030_261_248  # its model card's "8.03B params"
INPUTS = 32 * (6 * 4096 + 14336)  # the linear layers' inputs: GPTQ's g_idx elements
CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def plain(module: str, out: int, inputs: int) -> Layout:
    return {f"{module}.weight": ("BF16", [out, inputs])}


def gptq(module: str, out: int, inputs: int, bits: int = 4, group: int = 128) -> Layout:
    """AutoGPTQ's QuantLinear: packed along the input, 32 / bits values an int32."""
    return {
        f"{module}.qweight": ("I32", [inputs * bits // 32, out]),
        f"{module}.qzeros": ("I32", [inputs // group, out * bits // 32]),
        f"{module}.scales": ("F16", [inputs // group, out]),
        f"{module}.g_idx": ("I32", [inputs]),
    }


def awq(module: str, out: int, inputs: int, bits: int = 4, group: int = 128) -> Layout:
    """AutoAWQ's WQLinear_GEMM: packed along the output."""
    return {
        f"{module}.qweight": ("I32", [inputs, out * bits // 32]),
        f"{module}.qzeros": ("I32", [inputs // group, out * bits // 32]),
        f"{module}.scales": ("F16", [inputs // group, out]),
    }


def quant_state(out: int, inputs: int) -> bytes:
    """bitsandbytes' QuantState.as_dict(packed=True): its non-tensor entries as JSON bytes."""
    state = {
        "quant_type": "nf4",
        "blocksize": 64,
        "dtype": "bfloat16",
        "shape": [out, inputs],
        "nested_blocksize": 256,
        "nested_dtype": "float32",
        "nested_offset": 0.0,
    }
    return json.dumps(state).encode()


def nf4(module: str, out: int, inputs: int) -> Layout:
    """bitsandbytes 4-bit, double quantization: two values a byte, flattened to [n/2, 1]."""
    n = out * inputs
    w = f"{module}.weight"
    return {
        w: ("U8", [n // 2, 1]),
        f"{w}.absmax": ("U8", [n // 64]),
        f"{w}.nested_absmax": ("F32", [n // 64 // 256]),
        f"{w}.nested_quant_map": ("F32", [256]),
        f"{w}.quant_map": ("F32", [16]),
        f"{w}.quant_state.bitsandbytes__nf4": ("U8", [len(quant_state(out, inputs))]),
    }


def int8(module: str, out: int, inputs: int) -> Layout:
    """bitsandbytes 8-bit: Linear8bitLt's weight, SCB and weight_format."""
    return {
        f"{module}.weight": ("I8", [out, inputs]),
        f"{module}.SCB": ("F32", [out]),
        f"{module}.weight_format": ("U8", []),
    }


def fp8(module: str, out: int, inputs: int) -> Layout:
    """FP8 with a scale a tensor (as neuralmagic's Meta-Llama-3-8B-Instruct-FP8)."""
    return {
        f"{module}.weight": ("F8_E4M3", [out, inputs]),
        f"{module}.weight_scale": ("F32", []),
        f"{module}.input_scale": ("F32", []),
    }


def f4(module: str, out: int, inputs: int) -> Layout:
    """The F4 dtype, one E8M0 scale a block of 32 (MX)."""
    return {
        f"{module}.weight": ("F4", [out, inputs]),
        f"{module}.weight_scale": ("F8_E8M0", [out, inputs // 32]),
    }


def nvfp4(module: str, out: int, inputs: int) -> Layout:
    """NVIDIA ModelOpt's NVFP4: two values a byte, an F8_E4M3 scale a block of 16."""
    return {
        f"{module}.weight": ("U8", [out, inputs // 2]),
        f"{module}.weight_scale": ("F8_E4M3", [out, inputs // 16]),
        f"{module}.weight_scale_2": ("F32", []),
        f"{module}.input_scale": ("F32", []),
    }


def packed(module: str, out: int, inputs: int) -> Layout:
    """compressed-tensors' pack-quantized int4, groups of 128."""
    return {
        f"{module}.weight_packed": ("I32", [out, inputs // 8]),
        f"{module}.weight_scale": ("BF16", [out, inputs // 128]),
        f"{module}.weight_shape": ("I64", [2]),
    }


def llama(linear: Linear = plain, dtype: str = "BF16", *, head: bool = True) -> Layout:
    """Meta-Llama-3-8B's 291 tensors, with its linear layers as `linear` makes them."""
    tensors: Layout = {"model.embed_tokens.weight": (dtype, [VOCAB, HIDDEN])}
    for layer in range(LAYERS):
        prefix = f"model.layers.{layer}."
        tensors[prefix + "input_layernorm.weight"] = (dtype, [HIDDEN])
        tensors[prefix + "post_attention_layernorm.weight"] = (dtype, [HIDDEN])
        for module, (out, inputs) in LINEARS.items():
            tensors |= linear(prefix + module, out, inputs)
    tensors["model.norm.weight"] = (dtype, [HIDDEN])
    if head:
        tensors["lm_head.weight"] = (dtype, [VOCAB, HIDDEN])
    return tensors


def lora(rank: int = 16) -> Layout:
    """A PEFT LoRA adapter of it: rank 16 on q_proj and v_proj."""
    tensors: Layout = {}
    for layer in range(LAYERS):
        for module in ("q_proj", "v_proj"):
            out = LINEARS[f"self_attn.{module}"][0]
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            tensors[f"{prefix}.lora_A.weight"] = ("F32", [rank, HIDDEN])
            tensors[f"{prefix}.lora_B.weight"] = ("F32", [out, rank])
    return tensors


def header(tensors: Layout, metadata: dict[str, str] | None = None) -> Header:
    return parse_header(encode_header(tensors, metadata=metadata))


def describe(tensors: Layout, **options: Any) -> ModelInfo:
    return describe_model(header(tensors), **options)


def claims(info: ModelInfo) -> dict[str, set[str]]:
    """Each claim of the evidence -> the bases it rests on."""
    found: dict[str, set[str]] = {}
    for evidence in info.evidence:
        found.setdefault(evidence.claim, set()).add(evidence.basis)
    return found


def test_llama_3_8b_counts_as_its_model_card() -> None:
    tensors = llama()
    assert len(tensors) == 291
    info = describe(tensors)
    assert (info.kind, info.quantization, info.adapter, info.tied) == ("model", (), None, ())
    assert LINEAR + REST == PARAMETERS
    assert info.parameters == PARAMETERS  # and so what a raw count (the Hub's) says
    assert info.constants == 0
    assert info.nbytes == 2 * PARAMETERS == 16_060_522_496
    [bf16] = info.by_dtype.values()
    assert (bf16.tensors, bf16.numel, bf16.parameters, bf16.nbytes) == (
        291,
        PARAMETERS,
        PARAMETERS,
        2 * PARAMETERS,
    )
    assert dict(info.memory) == {
        "stored": 16_060_522_496,
        "BF16": 16_060_522_496,
        "F16": 16_060_522_496,
        "F8": 8_030_261_248,
        "4-bit": 4_015_130_624,
    }
    assert claims(info) == {"model": {"tensor names"}}
    assert "lm_head.weight" in info.evidence[0].detail
    assert info.inference is None
    assert info.notes == ("no config.json: no inference estimate (layers and heads unknown)",)


@pytest.mark.parametrize("bits", [4, 8])
def test_gptq_counts_the_unquantized_parameters(bits: int) -> None:
    info = describe(llama(lambda m, o, i: gptq(m, o, i, bits), "F16"))
    [scheme] = info.quantization
    assert (scheme.scheme, scheme.bits, scheme.group_size, scheme.tensors) == (
        "GPTQ",
        bits,
        128,
        224,
    )
    assert info.parameters == PARAMETERS
    assert scheme.parameters == LINEAR
    # Apart: scales (F16, one an input group and output), zeros (packed as the weights) and
    # g_idx (one an input).
    scales, zeros = LINEAR // 128, LINEAR // 128 * bits // 32
    assert info.constants == scheme.constants == scales + zeros + INPUTS
    assert info.by_dtype["F16"].constants == scales
    assert info.by_dtype["I32"].numel == LINEAR * bits // 32 + zeros + INPUTS
    assert info.by_dtype["I32"].parameters == LINEAR
    assert info.nbytes == LINEAR * bits // 8 + 4 * zeros + 2 * scales + 4 * INPUTS + 2 * REST
    assert claims(info) == {
        "model": {"tensor names"},
        "GPTQ": {"tensor names"},
        f"{bits} bits": {"shapes"},
    }
    layout = next(e.detail for e in info.evidence if e.claim == f"{bits} bits")
    assert "g_idx gives the inputs" in layout


def test_gptq_4_bit_in_numbers() -> None:
    info = describe(llama(gptq, "F16"))
    assert info.constants == 62_586_880  # 54,525,952 scales + 6,815,744 zeros + 1,245,184 g_idx
    assert info.constants / info.parameters == pytest.approx(0.00779, abs=1e-5)
    assert info.nbytes == 5_732_835_328
    assert info.memory["stored"] == 5_732_835_328
    assert info.memory["BF16"] == 2 * PARAMETERS  # as the model it was made from


@pytest.mark.parametrize("bits", [4, 8])
def test_awq_counts_the_unquantized_parameters(bits: int) -> None:
    info = describe(llama(lambda m, o, i: awq(m, o, i, bits), "F16"))
    [scheme] = info.quantization
    assert (scheme.scheme, scheme.bits, scheme.group_size) == ("AWQ", bits, 128)
    assert info.parameters == PARAMETERS
    scales, zeros = LINEAR // 128, LINEAR // 128 * bits // 32
    assert info.constants == scales + zeros
    assert info.nbytes == LINEAR * bits // 8 + 4 * zeros + 2 * scales + 2 * REST
    layout = next(e for e in info.evidence if e.claim == f"{bits} bits")
    assert layout.basis == "shapes"
    assert "packed along the output" in layout.detail


def test_awq_4_bit_in_numbers() -> None:
    info = describe(llama(awq, "F16"))
    assert info.constants == 61_341_696  # 54,525,952 scales + 6,815,744 zeros
    assert info.nbytes == 5_727_854_592


def test_gptq_bits_without_g_idx_come_from_the_config_or_are_assumed() -> None:
    def bare(module: str, out: int, inputs: int) -> Layout:
        layout = gptq(module, out, inputs, bits=8)
        del layout[f"{module}.g_idx"]
        return layout

    tensors = llama(bare, "F16")
    config = CONFIG | {"quantization_config": {"quant_method": "gptq", "bits": 8}}
    told = describe(tensors, config=config)
    assert (told.quantization[0].scheme, told.quantization[0].bits) == ("GPTQ", 8)
    assert told.parameters == PARAMETERS
    assert claims(told)["8 bits"] == {"config"}
    assert claims(told)["quantized"] == {"config"}
    assumed = describe(tensors)  # 4 bits, GPTQ's default: twice the values an int32
    assert assumed.quantization[0].bits == 4
    assert assumed.parameters == REST + 2 * LINEAR
    assert claims(assumed)["4 bits"] == {"assumption"}


def test_bitsandbytes_nf4() -> None:
    info = describe(llama(nf4))
    [scheme] = info.quantization
    assert (scheme.scheme, scheme.bits, scheme.group_size) == ("bitsandbytes nf4", 4, 64)
    assert info.parameters == PARAMETERS
    states = 32 * sum(len(quant_state(o, i)) for o, i in LINEARS.values())
    assert states == 35_040
    # absmax (U8, one a block of 64), nested_absmax (one a 256 absmax), the two maps, the
    # states' JSON.
    assert info.constants == LINEAR // 64 + LINEAR // 64 // 256 + 224 * (256 + 16) + states
    assert info.constants == 109_573_856
    assert (
        info.nbytes
        == LINEAR // 2 + LINEAR // 64 + 4 * (LINEAR // 16384 + 224 * 272) + states + 2 * REST
    )
    assert claims(info)["4 bits"] == {"dtypes"}


def test_bitsandbytes_shapes_from_the_quant_state(tmp_path: Path) -> None:
    """An odd weight (3 x 5 = 15 values in 8 bytes): its packing says 16, its state 15."""
    state = quant_state(3, 5)
    tensors = {
        "m.weight": ("U8", [8, 1], bytes(8)),
        "m.weight.absmax": ("F32", [1], bytes(4)),
        "m.weight.quant_map": ("F32", [16], bytes(64)),
        "m.weight.quant_state.bitsandbytes__nf4": ("U8", [len(state)], state),
        "m.bias": ("F32", [3], bytes(12)),
    }
    path = tmp_path / "model.safetensors"
    write_file(path, tensors)
    assert describe_model(path).parameters == 16 + 3
    exact = describe_model(path, read_data=True)
    assert exact.parameters == 15 + 3
    assert claims(exact)["4 bits"] == {"data"}
    assert describe_model(open_file(path), read_data=True).parameters == 15 + 3
    assert describe_model(read_checkpoint(tmp_path), read_data=True).parameters == 15 + 3
    headers = describe_model(parse_header(path.read_bytes()), read_data=True)
    assert headers.parameters == 16 + 3
    assert "the quant states were not read: headers without their files" in headers.notes


def test_bitsandbytes_a_quant_state_that_is_not_json_leaves_the_packing(tmp_path: Path) -> None:
    for junk in (b"not json", b"[1, 2]", b'{"shape": "3x5"}'):
        tensors = {
            "m.weight": ("U8", [8, 1], bytes(8)),
            "m.weight.quant_state.bitsandbytes__fp4": ("U8", [len(junk)], junk),
        }
        write_file(tmp_path / "model.safetensors", tensors)
        info = describe_model(tmp_path / "model.safetensors", read_data=True)
        assert (info.quantization[0].scheme, info.parameters) == ("bitsandbytes fp4", 16)


def test_bitsandbytes_int8() -> None:
    info = describe(llama(int8))
    [scheme] = info.quantization
    assert (scheme.scheme, scheme.bits) == ("bitsandbytes int8", 8)
    assert info.parameters == PARAMETERS
    outputs = 32 * sum(out for out, _ in LINEARS.values())
    assert info.constants == outputs + 224  # SCB (one an output row), weight_format
    assert scheme.group_size == 4096  # one scale a row of the most common 4096 inputs


def test_fp8_with_scales() -> None:
    info = describe(llama(fp8), config=CONFIG)
    [scheme] = info.quantization
    assert (scheme.scheme, scheme.bits, scheme.group_size) == ("FP8", 8, None)
    assert info.parameters == PARAMETERS
    assert info.constants == 224 * 2  # a weight_scale and an input_scale a layer
    assert info.nbytes == LINEAR + 4 * 448 + 2 * REST == 9_081_202_432
    assert claims(info) == {
        "model": {"config", "tensor names"},
        "FP8": {"tensor names"},
        "8 bits": {"dtypes"},
    }


def test_f4_counts_elements() -> None:
    info = describe(llama(f4))
    [scheme] = info.quantization
    assert (scheme.scheme, scheme.bits, scheme.group_size) == ("F4", 4, 32)
    assert info.parameters == PARAMETERS
    assert info.constants == LINEAR // 32
    assert info.nbytes == LINEAR // 2 + LINEAR // 32 + 2 * REST == 5_809_643_520


def test_nvfp4_and_compressed_tensors() -> None:
    nv = describe(llama(nvfp4))
    assert [(q.scheme, q.bits, q.group_size) for q in nv.quantization] == [("NVFP4", 4, 16)]
    assert nv.parameters == PARAMETERS
    assert nv.constants == LINEAR // 16 + 224 * 2
    config = {"quantization_config": {"config_groups": {"g": {"weights": {"num_bits": 4}}}}}
    ct = describe(llama(packed), config=config)
    assert [(q.scheme, q.bits, q.group_size) for q in ct.quantization] == [
        ("compressed-tensors", 4, 128)
    ]
    assert ct.parameters == PARAMETERS
    assert ct.constants == LINEAR // 128 + 224 * 2
    assert claims(describe(llama(packed)))["4 bits"] == {"assumption"}


def test_mxfp4_blocks_of_gpt_oss() -> None:
    """gpt-oss-20b's experts: 32 of them, 2880 wide, blocks of 32 values in 16 bytes."""
    experts, width, blocks = 32, 2880, 2880 // 32
    p = "model.layers.0.mlp.experts."
    tensors = {
        p + "gate_up_proj_blocks": ("U8", [experts, 2 * width, blocks, 16]),
        p + "gate_up_proj_scales": ("U8", [experts, 2 * width, blocks]),
        p + "gate_up_proj_bias": ("BF16", [experts, 2 * width]),
        p + "down_proj_blocks": ("U8", [experts, width, blocks, 16]),
        p + "down_proj_scales": ("U8", [experts, width, blocks]),
        p + "down_proj_bias": ("BF16", [experts, width]),
    }
    info = describe(tensors)
    [scheme] = info.quantization
    assert (scheme.scheme, scheme.bits, scheme.group_size, scheme.tensors) == ("MXFP4", 4, 32, 2)
    weights = experts * 3 * width * width
    assert scheme.parameters == weights
    assert info.parameters == weights + experts * 3 * width
    assert info.constants == weights // 32


def test_a_lora_adapter() -> None:
    info = describe(lora(), metadata={"format": "pt"}, config=CONFIG)
    assert info.kind == "LoRA adapter"
    assert info.adapter is not None
    assert (info.adapter.method, info.adapter.ranks, info.adapter.targets) == (
        "LoRA",
        (16,),
        ("q_proj", "v_proj"),
    )
    assert info.adapter.pairs == 64
    assert info.parameters == 6_815_744  # PEFT's "trainable params: 6,815,744"
    assert info.nbytes == 4 * 6_815_744
    assert claims(info) == {"LoRA adapter": {"tensor names"}}
    assert any("base_model.model." in e.detail for e in info.evidence)
    assert (info.quantization, info.tied, info.inference) == ((), (), None)


def test_a_kohya_lora_says_its_metadata() -> None:
    tensors: Layout = {
        "lora_unet_down_blocks_0_attn.lora_down.weight": ("F16", [8, 320]),
        "lora_unet_down_blocks_0_attn.lora_up.weight": ("F16", [320, 8]),
        "lora_unet_down_blocks_0_attn.alpha": ("F16", []),
    }
    info = describe_model(header(tensors, {"ss_network_dim": "8", "ss_network_alpha": "4"}))
    assert info.kind == "LoRA adapter"
    assert claims(info) == {"LoRA adapter": {"tensor names", "metadata"}}
    assert info.adapter is not None
    assert info.adapter.ranks == (8,)


def test_tied_embeddings_are_noted_and_counted_once() -> None:
    info = describe(llama(head=False))
    assert info.tied == ("lm_head.weight",)
    assert info.parameters == PARAMETERS - VOCAB * HIDDEN
    assert claims(info)["tied"] == {"tensor names"}
    told = describe(llama(head=False), config=CONFIG | {"tie_word_embeddings": True})
    assert claims(told)["tied"] == {"tensor names", "config"}
    assert describe(llama(head=False), config=CONFIG).tied == ()  # the config says untied
    both = describe(llama(), config=CONFIG | {"tie_word_embeddings": True})
    assert both.tied == ()
    assert claims(both)["tied"] == {"config"}


def test_an_embedding_model() -> None:
    tensors: Layout = {
        "embeddings.word_embeddings.weight": ("F32", [30522, 384]),
        "embeddings.position_ids": ("I64", [1, 512]),
        "encoder.layer.0.attention.self.query.weight": ("F32", [384, 384]),
        "pooler.dense.weight": ("F32", [384, 384]),
    }
    info = describe(tensors)
    assert (info.kind, info.architecture) == ("embedding model", None)
    assert claims(info) == {"embedding model": {"tensor names"}, "buffers": {"tensor names"}}
    told = describe(tensors, config={"architectures": ["BertModel"], "num_hidden_layers": 6})
    assert (told.kind, told.architecture) == ("embedding model", "BertModel")
    assert claims(told) == {
        "embedding model": {"tensor names", "config"},
        "buffers": {"tensor names"},
    }
    assert told.inference is None


def test_minilm_counts_its_parameters_not_its_position_ids() -> None:
    # all-MiniLM-L6-v2: 22,713,728 elements stored, of which embeddings.position_ids' 512
    # are a buffer; its model card (model.parameters()) counts 22,713,216.
    from test_cli_diff import minilm

    tensors: Layout = {**minilm(), "embeddings.position_ids": ("I64", [1, 512])}
    info = describe(tensors)
    assert sum(info.by_dtype[d].numel for d in info.by_dtype) == 22_713_728
    assert (info.parameters, info.buffers, info.constants) == (22_713_216, 512, 0)
    assert info.by_dtype["I64"].buffers == 512
    assert info.by_dtype["I64"].parameters == 0
    assert info.by_dtype["F32"].parameters == 22_713_216
    buffers = [e for e in info.evidence if e.claim == "buffers"]
    assert [e.detail for e in buffers] == ["1, not parameters: embeddings.position_ids"]
    assert info.memory["BF16"] == 2 * 22_713_216  # the weights, buffers apart


@pytest.mark.parametrize(
    ("name", "shape", "buffer"),
    [
        ("h.0.attn.bias", [1, 1, 1024, 1024], True),  # GPT-2's causal mask
        ("h.0.attn.masked_bias", [], True),
        ("h.0.attn.c_attn.bias", [2304], False),  # a layer's bias
        ("encoder.attn.bias", [768], False),  # a bias named attn.bias, a vector
        ("model.layers.0.self_attn.rotary_emb.inv_freq", [64], True),
        ("bn1.running_mean", [64], True),
        ("bn1.running_var", [64], True),
        ("bn1.num_batches_tracked", [], True),
        ("embeddings.token_type_ids", [1, 512], True),
        ("layers.0.blocks.0.attn.relative_position_index", [49, 49], True),
        ("embeddings.position_embeddings.weight", [512, 384], False),
    ],
    ids=lambda value: str(value) if not isinstance(value, list) else "x".join(map(str, value)),
)
def test_buffers_are_counted_apart(name: str, shape: list[int], buffer: bool) -> None:
    tensors: Layout = {"lm_head.weight": ("F32", [8, 4]), name: ("F32", shape)}
    info = describe(tensors)
    elements = math.prod(shape)
    assert info.buffers == (elements if buffer else 0)
    assert info.parameters == 32 + (0 if buffer else elements)


def test_the_tree_shows_buffers_apart(tmp_path: Path) -> None:
    from test_cli import run

    from safetensors_header import write_file

    path = tmp_path / "model.safetensors"
    write_file(
        str(path),
        {
            "embeddings.word_embeddings.weight": ("F32", [4, 2], bytes(32)),
            "embeddings.position_ids": ("I64", [1, 4], bytes(32)),
        },
    )
    result = run("inspect", "--tree", "--exact", str(path))
    assert "  parameters: 8; buffers apart: 4" in result.stdout.splitlines()
    document = json.loads(run("inspect", "--tree", "--json", str(path)).stdout)
    assert (document["model"]["parameters"], document["model"]["buffers"]) == (8, 4)


def test_a_diffusers_component() -> None:
    unet: Layout = {
        "conv_in.weight": ("F16", [320, 4, 3, 3]),
        "down_blocks.0.resnets.0.conv1.weight": ("F16", [320, 320, 3, 3]),
        "mid_block.attentions.0.proj_in.weight": ("F16", [1280, 1280]),
        "time_embedding.linear_1.weight": ("F16", [1280, 320]),
    }
    info = describe(unet)
    assert (info.kind, info.architecture) == ("diffusers component", "UNet")
    vae = describe({"encoder.down_blocks.0.resnets.0.conv1.weight": ("F32", [128, 128, 3, 3])})
    assert vae.architecture == "VAE"
    flux = describe({"transformer_blocks.0.attn.to_q.weight": ("BF16", [3072, 3072])})
    assert flux.architecture == "transformer"
    checkpoint = Checkpoint({"diffusion_pytorch_model.safetensors": header(unet)}, {}, None, {}, ())
    named = describe_model(checkpoint, config={"_class_name": "UNet2DConditionModel"})
    assert named.architecture == "UNet2DConditionModel"
    assert claims(named) == {"diffusers component": {"tensor names", "file names", "config"}}


def test_a_model_without_a_head_or_config_says_so() -> None:
    info = describe({"model.layers.0.mlp.weight": ("F32", [4, 4])})
    assert info.kind == "model"
    assert claims(info) == {"model": {"tensor names"}}
    assert "none of the tensors" in info.evidence[0].detail


# The KV cache: 2 (K and V) x tokens x kv_heads x head_dim x bytes x batch.
KV_8K = 2 * 32 * 8192 * 8 * 128 * 2  # Llama-3-8B, 8192 tokens, BF16: 1 GiB


def test_the_inference_estimate_as_hf_mem_makes_it() -> None:
    info = describe(llama(), config=CONFIG)
    estimate = info.inference
    assert estimate is not None
    assert KV_8K == 2**30
    assert (estimate.context, estimate.batch, estimate.layers, estimate.sliding_layers) == (
        8192,
        1,
        32,
        0,
    )
    assert (estimate.kv_heads, estimate.head_dim, estimate.kv_dtype) == (8, 128, "BF16")
    assert estimate.kv_dtype_from == "torch_dtype"
    assert estimate.kv_cache == KV_8K
    assert estimate.total == estimate.weights + KV_8K == 2 * PARAMETERS + KV_8K
    other = describe(llama(), config=CONFIG, context=2048, batch=4, kv_dtype="F8_E4M3")
    assert other.inference is not None
    assert other.inference.kv_cache == 2 * 32 * 2048 * 8 * 128 * 1 * 4
    assert other.inference.kv_dtype_from == "argument"


@pytest.mark.parametrize(
    ("extra", "tokens"),
    [
        ({"sliding_window": 4096, "layer_types": ["sliding_attention"] * 32}, 32 * 4096),
        ({"sliding_window": 4096, "sliding_window_pattern": 4}, 32 * 8192),  # a hybrid
        ({"layer_types": ["full_attention", "sliding_attention"] * 16}, 32 * 8192),
        ({"num_key_value_heads": None, "head_dim": 64}, None),
    ],
)
def test_sliding_windows_and_heads(extra: dict[str, Any], tokens: int | None) -> None:
    estimate = describe(llama(), config=CONFIG | extra).inference
    assert estimate is not None
    if tokens is None:  # multi-head attention: 32 KV heads of 64
        assert estimate.kv_cache == 2 * 32 * 8192 * 32 * 64 * 2
    else:
        assert estimate.kv_cache == 2 * tokens * 8 * 128 * 2


@pytest.mark.parametrize(
    ("quantization", "dtype", "where"),
    [
        ({"quant_method": "fp8", "fmt": "e4m3"}, "F8_E4M3", "quantization_config"),
        (
            {"quant_method": "modelopt", "kv_cache_scheme": {"num_bits": 8, "type": "float"}},
            "F8_E4M3",
            "quantization_config",
        ),
        ({"quant_method": "fp8"}, "F8_E4M3", "the weights' FP8 dtype"),
        ({"quant_method": "gptq"}, "BF16", "torch_dtype"),
    ],
)
def test_the_kv_cache_dtype(quantization: dict[str, Any], dtype: str, where: str) -> None:
    estimate = describe(llama(fp8), config=CONFIG | {"quantization_config": quantization}).inference
    assert estimate is not None
    assert (estimate.kv_dtype, estimate.kv_dtype_from) == (dtype, where)


def test_the_kv_cache_dtype_without_one_in_the_config() -> None:
    config = {k: v for k, v in CONFIG.items() if k != "torch_dtype"}
    estimate = describe(llama(), config=config | {"dtype": "float32"}).inference
    assert estimate is not None
    assert (estimate.kv_dtype, estimate.kv_dtype_from) == ("F32", "dtype")
    estimate = describe(llama(), config=config).inference
    assert estimate is not None
    assert (estimate.kv_dtype, estimate.kv_dtype_from) == (
        "F16",
        "default",
    )


def test_a_multimodal_config_is_read_from_its_text_config() -> None:
    text = {k: v for k, v in CONFIG.items() if k not in ("architectures", "torch_dtype")}
    config = {
        "architectures": ["LlavaForConditionalGeneration"],
        "text_config": text,
        "torch_dtype": "float16",
    }
    estimate = describe(llama(), config=config).inference
    assert estimate is not None
    assert (estimate.kv_cache, estimate.kv_dtype) == (KV_8K, "F16")


@pytest.mark.parametrize(
    ("config", "context", "note"),
    [
        (
            {"hidden_size": 4096},
            None,
            "the config has no positive int num_hidden_layers, num_attention_heads",
        ),
        ({**CONFIG, "num_hidden_layers": True}, None, "no positive int num_hidden_layers"),
        (
            {k: v for k, v in CONFIG.items() if k != "max_position_embeddings"},
            None,
            "no context given",
        ),
    ],
)
def test_no_estimate_says_why(config: dict[str, Any], context: int | None, note: str) -> None:
    info = describe(llama(), config=config, context=context)
    assert info.inference is None
    assert any(note in n for n in info.notes), info.notes


@pytest.mark.parametrize(
    "options",
    [{"batch": 0}, {"batch": 1.5}, {"context": 0}, {"context": "8k"}, {"kv_dtype": "fp8"}],
)
def test_bad_arguments(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        describe(llama(), **options)


def test_the_record_is_frozen_and_pickles() -> None:
    info = describe(llama(gptq, "F16"), config=CONFIG)
    assert pickle.loads(pickle.dumps(info)) == info
    assert "GPTQ 4-bit" in repr(info)
    assert "GPTQ" in repr(info.quantization[0])
    assert "BF16" in repr(info.inference)
    assert "parameters=" in repr(info.by_dtype["F16"])
    assert "(shapes)" in repr(info.evidence[-1])
    with pytest.raises(AttributeError):
        info.kind = "adapter"  # type: ignore[misc]
    with pytest.raises(TypeError):
        info.memory["stored"] = 0  # type: ignore[index]


# The config.json beside the weights.


def sparse(path: Path, tensors: Layout) -> None:
    """A file of these tensors whose data is a hole of the right size."""
    encoded = encode_header(tensors)
    size = parse_header(encoded).data_size
    with open(path, "wb") as file:
        file.write(encoded)
        file.truncate(len(encoded) + size)


def test_the_config_beside_a_file_an_index_or_in_a_directory(tmp_path: Path) -> None:
    sparse(tmp_path / "model.safetensors", llama(gptq, "F16"))
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    for source in (tmp_path, tmp_path / "model.safetensors", str(tmp_path)):
        info = describe_model(source)
        assert info.inference is not None
        assert info.inference.kv_cache == KV_8K
        assert info.parameters == PARAMETERS
    assert describe_model(tmp_path, config={}).inference is None


@pytest.mark.parametrize(
    ("content", "note"),
    [
        (None, "no config.json beside the weights"),
        (b"{not json", "is not JSON"),
        (b"\xff\xfe", "is not JSON"),
        (b"[1, 2]", "is not a JSON object"),
        (b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nests deeper than 127 arrays"),
        (b'{"a": ' + b'{"b": ' * 128 + b"1" + b"}" * 129, "nests deeper than 127 arrays"),
        ("dir", "is not a regular file"),
        ("fifo", "is not a regular file"),
    ],
)
def test_a_config_that_cannot_be_used_is_a_note(tmp_path: Path, content: object, note: str) -> None:
    sparse(tmp_path / "model.safetensors", {"lm_head.weight": ("F32", [4, 4])})
    config = tmp_path / "config.json"
    if content == "dir":
        config.mkdir()
    elif content == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs here")
        os.mkfifo(config)
    elif isinstance(content, bytes):
        config.write_bytes(content)
    info = describe_model(tmp_path)
    assert any(note in n for n in info.notes), info.notes
    assert info.inference is None


def test_a_deeply_nested_config_is_a_note_from_any_depth_of_the_stack(tmp_path: Path) -> None:
    """describe_model and inspect --tree beside a config.json of 100,000 nested arrays: a
    note, no RecursionError, also when called from deep in the caller's stack."""
    sparse(tmp_path / "model.safetensors", {"lm_head.weight": ("F32", [4, 4])})
    (tmp_path / "config.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)

    def deep(levels: int) -> Any:
        return describe_model(tmp_path) if levels == 0 else deep(levels - 1)

    info = deep(sys.getrecursionlimit() - 100)
    assert any("nests deeper than 127" in note for note in info.notes), info.notes
    result = subprocess.run(
        [sys.executable, "-m", "safetensors_header", "inspect", "--tree", str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "config.json beside the weights nests deeper than 127" in result.stdout


def test_a_config_too_large_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import safetensors_header._describe as describing

    monkeypatch.setattr(describing, "_MAX_CONFIG_SIZE", 10)
    sparse(tmp_path / "model.safetensors", {"lm_head.weight": ("F32", [4, 4])})
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    assert any("is over 10 bytes" in note for note in describe_model(tmp_path).notes)


def _small_file() -> bytes:
    encoded = encode_header({"lm_head.weight": ("F32", [4, 4])})
    return encoded + bytes(parse_header(encoded).data_size)


def test_the_config_beside_a_url_a_hub_repository_and_a_store(
    site: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One request beside the weights, named as a checkpoint's shards are."""
    site.files["m/model.safetensors"] = _small_file()
    site.files["m/config.json"] = json.dumps(CONFIG).encode()
    info = describe_model(site.url("m/model.safetensors"))
    assert info.inference is not None
    assert info.inference.kv_cache == KV_8K
    assert [hit.path for hit in site.done(2)] == ["/m/model.safetensors", "/m/config.json"]
    # The Hub (HF_ENDPOINT), a repository named without a file: its first file's config.
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_ENDPOINT", site.url("").rstrip("/"))
    site.files["org/repo/resolve/main/model.safetensors"] = _small_file()
    site.files["org/repo/resolve/main/config.json"] = json.dumps(CONFIG).encode()
    hub = describe_model("hf://org/repo")
    assert hub.inference is not None
    assert hub.inference.kv_cache == KV_8K
    # None there: a note, as beside a local file.
    del site.files["m/config.json"]
    info = describe_model(site.url("m/model.safetensors"))
    assert info.inference is None
    assert "no config.json beside the weights" in info.notes
    # An object store's.
    memory = pytest.importorskip("obstore.store").MemoryStore()
    memory.put("a/model.safetensors", _small_file())
    memory.put("a/config.json", json.dumps(CONFIG).encode())
    stored = describe_model((memory, "a/model.safetensors"))
    assert stored.inference is not None
    assert stored.inference.kv_cache == KV_8K


def test_nothing_beside_bytes_is_a_note() -> None:
    from safetensors_header._describe import config_beside

    notes: list[str] = []
    assert config_beside(_small_file(), notes) is None
    assert notes[0].startswith("config.json beside the weights cannot be read"), notes


# The command line: inspect --tree has a "model" section, --json every figure.


@pytest.fixture(scope="module")
def gptq_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("gptq")
    sparse(folder / "model.safetensors", llama(gptq, "F16"))
    config = CONFIG | {
        "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}
    }
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "safetensors_header", *args],
        capture_output=True,
        input=stdin,
        timeout=60,
        check=False,
    )


def test_inspect_tree_has_a_model_section(gptq_dir: Path) -> None:
    result = run("inspect", "--tree", str(gptq_dir))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[1] == "model: a model (LlamaForCausalLM), quantized: GPTQ, 4 bits, groups of 128"
    assert lines[2] == (
        "  parameters: 8,030,261,248 (6,979,321,856 of them quantized), constants apart: 62,586,880"
    )
    assert lines[3] == (
        "  memory: 5,732,835,328 bytes as stored; 16,060,522,496 bytes as BF16 or F16, "
        "8,030,261,248 bytes as F8, 4,015,130,624 bytes as 4-bit"
    )
    assert lines[4] == (
        "  inference: 8,192 tokens x 1: KV cache 1,073,741,824 bytes (BF16), 6,806,577,152 "
        "bytes with the weights"
    )
    assert "  evidence: GPTQ (tensor names): 224 quantized weights, e.g. " in "\n".join(lines)
    assert lines[
        lines.index("  evidence: model (tensor names): a head: lm_head.weight") + 4
    ].startswith("module ")


def test_inspect_tree_json_has_every_figure(gptq_dir: Path) -> None:
    result = run("inspect", "--tree", "--json", str(gptq_dir))
    assert result.returncode == 0, result.stderr
    model = json.loads(result.stdout)["model"]
    assert model["kind"] == "model"
    assert model["architecture"] == "LlamaForCausalLM"
    assert model["parameters"] == PARAMETERS
    assert model["constants"] == 62_586_880
    assert model["quantization"] == [
        {
            "scheme": "GPTQ",
            "bits": 4,
            "group_size": 128,
            "tensors": 224,
            "parameters": LINEAR,
            "constants": 62_586_880,
            "nbytes": 5_732_835_328 - 2 * REST,  # all but the F16 embeddings, head and norms
        }
    ]
    assert model["memory"] == {
        "stored": 5_732_835_328,
        "BF16": 2 * PARAMETERS,
        "F16": 2 * PARAMETERS,
        "F8": PARAMETERS,
        "4-bit": PARAMETERS // 2,
    }
    assert model["inference"]["kv_cache"] == KV_8K
    assert model["by_dtype"]["F16"]["constants"] == LINEAR // 128
    assert {"claim": "GPTQ", "basis": "tensor names"}.items() <= model["evidence"][3].items()
    assert model["tied"] == []
    assert model["adapter"] is None
    assert model["notes"] == []


def test_inspect_tree_of_an_adapter_and_of_standard_input(tmp_path: Path) -> None:
    sparse(tmp_path / "adapter_model.safetensors", lora())
    result = run("inspect", "--tree", "--exact", str(tmp_path / "adapter_model.safetensors"))
    lines = result.stdout.decode().splitlines()
    assert lines[1] == "model: a LoRA adapter"
    assert lines[2] == "  LoRA: rank 16, 64 modules (q_proj, v_proj)"
    assert "  note: no config.json beside the weights" in lines
    encoded = encode_header({"model.embed_tokens.weight": ("F32", [2, 2])})
    piped = run("inspect", "--tree", "-", stdin=encoded + bytes(16))
    text = piped.stdout.decode()
    assert "  parameters: 4; tied, not stored: lm_head.weight" in text
    assert "  note: standard input has no config.json beside it" in text


@pytest.mark.parametrize(
    ("tensors", "config", "expected"),
    [
        # Attention's KV scales are constants of their module.
        (
            {"m.self_attn.k_scale": ("F32", []), "m.w.weight": ("F8_E4M3", [4, 4])},
            {},
            (16, 1, "FP8"),
        ),
        # compressed-tensors' NVFP4 and MXFP4: U8 weight_packed, by their scales' dtype.
        (
            {
                "m.weight_packed": ("U8", [4, 8]),
                "m.weight_scale": ("F8_E4M3", [4, 1]),
                "m.weight_global_scale": ("F32", [1]),
            },
            {"quantization_config": {"config_groups": {"x": 1, "g": {"weights": None}}}},
            (64, 5, "NVFP4"),
        ),
        (
            {"m.weight_packed": ("U8", [4, 16]), "m.weight_scale": ("U8", [4, 1])},
            {},
            (128, 4, "MXFP4"),
        ),
        ({"m.weight": ("U8", [4, 16]), "m.weight_scale": ("U8", [4, 1])}, {}, (128, 4, "MXFP4")),
        # A g_idx that does not divide the packing, scales that match neither layout, no scales.
        ({"m.qweight": ("I32", [3, 8]), "m.g_idx": ("I32", [5])}, {}, (192, 5, "GPTQ")),
        (
            {"m.qweight": ("I32", [4, 3]), "m.scales": ("F16", [1, 4])},
            {"quantization_config": {"quant_method": "awq"}},
            (96, 4, "AWQ"),
        ),
        (
            {"m.qweight": ("I32", [4, 2])},
            {"text_config": {"quantization_config": {"quant_method": "awq", "w_bit": 8}}},
            (32, 0, "AWQ"),
        ),
    ],
)
def test_the_schemes_edges(
    tensors: Layout, config: dict[str, Any], expected: tuple[int, int, str]
) -> None:
    info = describe(tensors, config=config)
    assert (info.parameters, info.constants, info.quantization[0].scheme) == expected


def test_the_kinds_edges() -> None:
    adapter = describe(lora(), config=CONFIG, context=4096)
    assert "no inference estimate for a LoRA adapter" in adapter.notes
    bare = describe({"lora_A": ("F32", []), "lora_B": ("F32", [])})
    assert bare.adapter is not None
    assert (bare.adapter.ranks, bare.adapter.targets) == ((), ())
    vae = describe({"m.weight": ("F32", [2])}, config={"_class_name": "AutoencoderKL"})
    assert (vae.kind, vae.architecture) == ("diffusers component", "AutoencoderKL")
    assert claims(vae) == {"diffusers component": {"config"}}
    bert = describe(
        {"bert.embeddings.word_embeddings.weight": ("F32", [8, 2])},
        config={"architectures": ["BertModel"]},
    )
    assert bert.kind == "embedding model"
    assert claims(bert) == {"embedding model": {"config"}}


@pytest.mark.parametrize(
    ("quantization", "where"),
    [
        ({"quant_method": "fp8", "fmt": "e9m9"}, "torch_dtype"),
        ({"quant_method": "fp8", "fmt": 3}, "torch_dtype"),
    ],
)
def test_the_kv_cache_dtype_of_an_fp8_config_without_fp8_weights(
    quantization: dict[str, Any], where: str
) -> None:
    estimate = describe(llama(), config=CONFIG | {"quantization_config": quantization}).inference
    assert estimate is not None
    assert (estimate.kv_dtype, estimate.kv_dtype_from) == ("BF16", where)


def test_headers_by_file_name(tmp_path: Path) -> None:
    files = {
        "model-1.safetensors": header(llama(gptq, "F16")),
        "extra.safetensors": header({"x": ("F32", [3])}),
    }
    assert describe_model(files).parameters == PARAMETERS + 3


def test_a_config_that_cannot_be_opened_is_a_note(tmp_path: Path) -> None:
    sparse(tmp_path / "model.safetensors", {"lm_head.weight": ("F32", [4, 4])})
    (tmp_path / "config.json").symlink_to(tmp_path / "config.json")  # a loop: ELOOP
    notes = describe_model(tmp_path / "model.safetensors").notes
    assert any("cannot be read" in note for note in notes)


def test_inspect_tree_in_process(gptq_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from safetensors_header._cli import main

    assert main(["inspect", "--tree", str(gptq_dir)]) == 0
    text = capsys.readouterr().out
    assert "model: a model (LlamaForCausalLM), quantized: GPTQ, 4 bits, groups of 128" in text
    assert main(["inspect", "--tree", "--json", str(gptq_dir / "model.safetensors")]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["model"]["parameters"] == PARAMETERS
    assert document["model"]["inference"]["kv_cache"] == KV_8K


def test_inspect_tree_on_a_terminal_fits_and_rounds(gptq_dir: Path) -> None:
    pytest.importorskip("pty")
    from test_cli_output import on_terminal

    text = on_terminal("inspect", "--tree", str(gptq_dir), columns=60)
    lines = text.splitlines()
    section = lines[2 : next(i for i, line in enumerate(lines) if line.startswith("module"))]
    assert len(section) > 8
    assert max(map(len, section)) <= 60  # (the tree's table has its own narrowest width)
    assert "  parameters: 8.03 B (6.98 B of them quantized), constants" in text
    assert "  memory: 5.34 GiB as stored; 15.0 GiB as BF16 or F16, 7.48" in text
    assert "    model.layers.0.mlp.down_proj.qweight with g_idx," in lines


def test_the_estimate_for_a_context_and_a_batch(gptq_dir: Path) -> None:
    """inspect --tree --context --batch: the estimate as describe_model gives it."""
    result = run("inspect", "--tree", "--json", "--context", "4096", "--batch", "2", str(gptq_dir))
    assert result.returncode == 0, result.stderr
    inference = json.loads(result.stdout)["model"]["inference"]
    assert (inference["context"], inference["batch"]) == (4096, 2)
    want = describe_model(gptq_dir, context=4096, batch=2).inference
    assert want is not None
    assert inference["kv_cache"] == want.kv_cache == KV_8K  # half the tokens, twice the batch
    for wrong in ("0", "x", "-3"):
        refused = run("inspect", "--tree", "--context", wrong, str(gptq_dir))
        assert refused.returncode == 2
        assert b"--context" in refused.stderr
