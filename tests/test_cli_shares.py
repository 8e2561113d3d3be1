"""``inspect --world N --rank R``: what a rank of a tensor-parallel job holds, before it starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

from safetensors_header import write_file  # noqa: E402


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "safetensors_header", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        input=None if stdin is None else stdin.decode("latin-1"),
    )


@pytest.fixture
def minilm(tmp_path: Path) -> Path:
    """A MiniLM-shaped file (4 heads) with its config.json, and a name no rule knows."""
    rng = np.random.default_rng(1)
    arrays = {
        "embeddings.LayerNorm.weight": rng.standard_normal(24).astype(np.float32),
        "embeddings.position_ids": np.arange(16, dtype=np.int64).reshape(1, 16),
        "encoder.layer.0.attention.self.query.weight": rng.standard_normal((24, 24)),
        "encoder.layer.0.attention.output.dense.weight": rng.standard_normal((24, 24)),
        "encoder.layer.0.attention.output.dense.bias": rng.standard_normal(24),
        "extra.scale": rng.standard_normal(5).astype(np.float32),
    }
    write_file(tmp_path / "model.safetensors", arrays)
    config = {"model_type": "bert", "num_attention_heads": 4}
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_a_ranks_share_as_a_table(minilm: Path) -> None:
    result = run("inspect", str(minilm / "model.safetensors"), "--world", "2", "--rank", "1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{minilm / 'model.safetensors'}: rank 1 of 2: ")
    assert lines[1].split()[:4] == ["name", "rank's", "shape", "split"]
    rows = {line.split()[0]: line for line in lines[2:-1]}

    def cells(name: str) -> list[str]:  # shape, split, rule
        return [cell.strip() for cell in rows[name].split("  ") if cell.strip()][1:]

    output = cells("encoder.layer.0.attention.output.dense.weight")
    assert output[:2] == ["[24, 12]", "axis 1"]
    assert output[2].startswith("row-parallel attention output at head boundaries")
    bias = cells("encoder.layer.0.attention.output.dense.bias")
    assert bias[:2] == ["[24]", "whole"]
    assert bias[2].startswith("row-parallel bias: whole")
    assert "[1, 16]" in rows["embeddings.position_ids"]
    assert "norm: whole" in rows["embeddings.LayerNorm.weight"]
    assert "no rule: whole" in rows["extra.scale"]
    assert (
        lines[-1]
        == "a rank's share: 1 split along axis 0, 1 split along axis 1, 4 whole on every rank"
    )
    # The tensor no rule knows is said on stderr, with what it costs each rank.
    assert "1 tensor no tensor-parallel rule decides (BERT)" in result.stderr
    assert "20 bytes a rank (extra.scale)" in result.stderr


def test_a_ranks_share_as_json(minilm: Path) -> None:
    result = run("inspect", str(minilm), "--world", "8", "--json", "--filter", "*.dense.*")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["rank"], document["world"]) == (0, 8)
    by_name = {tensor["name"]: tensor for tensor in document["tensors"]}
    assert set(by_name) == {
        "encoder.layer.0.attention.output.dense.weight",
        "encoder.layer.0.attention.output.dense.bias",
    }
    # 4 heads do not divide among 8 ranks: the attention's output is whole, and says why.
    weight = by_name["encoder.layer.0.attention.output.dense.weight"]
    assert (weight["shape"], weight["axis"]) == ([24, 24], None)
    assert weight["rule"] == "row-parallel attention output: whole (4 heads do not divide by 8)"


def test_a_rank_outside_the_world_and_a_stream_are_refused(minilm: Path) -> None:
    result = run("inspect", str(minilm), "--world", "2", "--rank", "2")
    assert result.returncode == 2
    assert "--rank 2 is not a rank of --world 2" in result.stderr
    result = run("inspect", "-", "--world", "2", stdin=(minilm / "model.safetensors").read_bytes())
    assert result.returncode == 1
    assert "--world needs a file, not a stream" in result.stderr
