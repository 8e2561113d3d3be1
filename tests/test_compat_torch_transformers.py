"""transformers saves and loads small BERT, GPT-2 (tied embeddings) and Llama models through
the alias (issue 52), whole and sharded, with the reference's outputs and files; diffusers, a
small UNet and VAE, as well (where it is installed).

Each side runs in a process of its own: one with ``install_as_safetensors()``, one with the
``safetensors`` package. The models are made from configs written here (no network), with
one seed, so that both sides hold the same weights.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import json, sys
if sys.argv[1] == "alias":
    import safetensors_header
    safetensors_header.install_as_safetensors()
import torch, transformers
import safetensors
from transformers import (BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel,
                          LlamaConfig, LlamaForCausalLM)

MODELS = {
    "bert": (BertForMaskedLM, BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2,
             num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)),
    "gpt2": (GPT2LMHeadModel, GPT2Config(vocab_size=99, n_embd=32, n_layer=2, n_head=4,
             n_positions=64)),
    "llama": (LlamaForCausalLM, LlamaConfig(vocab_size=99, hidden_size=32,
              intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64)),
}
folder = sys.argv[2]
found = {"safetensors": safetensors.__name__}
tokens = torch.tensor([[1, 5, 17, 42, 3, 98, 7, 11]])
for name, (kind, config) in MODELS.items():
    torch.manual_seed(52)
    model = kind(config).eval()
    for shard in ("whole", "sharded"):
        target = f"{folder}/{name}-{shard}"
        size = "40KB" if shard == "sharded" else "5GB"
        model.save_pretrained(target, safe_serialization=True, max_shard_size=size)
        loaded = kind.from_pretrained(target).eval()
        with torch.no_grad():
            logits = loaded(tokens).logits
        tied = None
        if name == "gpt2":
            tied = loaded.lm_head.weight.data_ptr() == loaded.transformer.wte.weight.data_ptr()
        found[f"{name}-{shard}"] = {"logits": logits.flatten().tolist(), "tied": tied}
print(json.dumps(found))
"""


DIFFUSERS_SCRIPT = """
import json, sys
if sys.argv[1] == "alias":
    import safetensors_header
    safetensors_header.install_as_safetensors()
import torch, diffusers
import safetensors
from diffusers import AutoencoderKL, UNet2DModel

MODELS = {
    "unet": (UNet2DModel, dict(sample_size=8, in_channels=3, out_channels=3,
             layers_per_block=1, block_out_channels=(8, 16), norm_num_groups=4,
             down_block_types=("DownBlock2D", "AttnDownBlock2D"),
             up_block_types=("AttnUpBlock2D", "UpBlock2D"))),
    "vae": (AutoencoderKL, dict(in_channels=3, out_channels=3, latent_channels=4,
            block_out_channels=(8, 16), norm_num_groups=4, layers_per_block=1,
            down_block_types=("DownEncoderBlock2D",) * 2,
            up_block_types=("UpDecoderBlock2D",) * 2)),
}
folder = sys.argv[2]
found = {"safetensors": safetensors.__name__}
torch.manual_seed(52)
sample = torch.randn(1, 3, 8, 8)
for name, (kind, config) in MODELS.items():
    torch.manual_seed(52)
    model = kind(**config).eval()
    for shard in ("whole", "sharded"):
        target = f"{folder}/{name}-{shard}"
        size = "20KB" if shard == "sharded" else "5GB"
        model.save_pretrained(target, safe_serialization=True, max_shard_size=size)
        loaded = kind.from_pretrained(target, torch_dtype=torch.bfloat16).float().eval()
        with torch.no_grad():
            out = loaded(sample, 1).sample if name == "unet" else loaded(sample).sample
        found[f"{name}-{shard}"] = out.flatten().tolist()
print(json.dumps(found))
"""


def _run(side: str, folder: Path, script: str = SCRIPT) -> dict[str, Any]:
    environment = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TRANSFORMERS_VERBOSITY": "error",
    }
    done = subprocess.run(
        [sys.executable, "-c", script, side, str(folder)],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _files(folder: Path) -> dict[str, str]:
    """Each file's sha256, by its path in `folder`."""
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.suffix in (".safetensors", ".json") and "config" not in path.name
    }


@pytest.mark.slow
def test_transformers_saves_and_loads_through_the_alias_as_through_the_reference(
    tmp_path: Path,
) -> None:
    ours, theirs = tmp_path / "alias", tmp_path / "reference"
    found, expected = _run("alias", ours), _run("reference", theirs)
    assert found.pop("safetensors") == "safetensors_header._compat"
    assert expected.pop("safetensors") == "safetensors"
    assert found == expected
    assert found["gpt2-whole"]["tied"] is True  # tied embeddings stay tied
    files = _files(ours)
    assert any("index" in name for name in files)  # sharded: an index and several files
    assert len([name for name in files if name.startswith("llama-sharded/")]) > 2
    assert files == _files(theirs)  # the same files, byte for byte


@pytest.mark.slow
def test_diffusers_saves_and_loads_through_the_alias_as_through_the_reference(
    tmp_path: Path,
) -> None:
    pytest.importorskip("diffusers")
    ours, theirs = tmp_path / "alias", tmp_path / "reference"
    found = _run("alias", ours, DIFFUSERS_SCRIPT)
    expected = _run("reference", theirs, DIFFUSERS_SCRIPT)
    assert found.pop("safetensors") == "safetensors_header._compat"
    assert expected.pop("safetensors") == "safetensors"
    assert found == expected
    files = _files(ours)
    assert len([name for name in files if name.startswith("unet-sharded/")]) > 2
    assert files == _files(theirs)
