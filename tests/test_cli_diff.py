"""``safetensors-header diff A B`` on real-shaped checkpoints, in a subprocess (issue 18).

The files have the header of all-MiniLM-L6-v2 (the 90 MB sentence-transformers model: BERT,
6 layers, hidden size 384, 103 tensors) and a data buffer of the right size that is a hole in
a sparse file, so that they cost no disk and no time to write.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from loopback import Site
from test_cli import TINY, run
from test_cli_output import on_terminal

from safetensors_header import encode_header, parse_header

Tensors = dict[str, tuple[str, list[int]]]


def minilm(dtype: str = "F32") -> Tensors:
    """The tensors of all-MiniLM-L6-v2's model.safetensors, in its order."""
    hidden, inner = 384, 1536
    tensors: Tensors = {
        "embeddings.word_embeddings.weight": (dtype, [30522, hidden]),
        "embeddings.position_embeddings.weight": (dtype, [512, hidden]),
        "embeddings.token_type_embeddings.weight": (dtype, [2, hidden]),
        "embeddings.LayerNorm.weight": (dtype, [hidden]),
        "embeddings.LayerNorm.bias": (dtype, [hidden]),
    }
    for layer in range(6):
        at = f"encoder.layer.{layer}."
        for part in ("self.query", "self.key", "self.value", "output.dense"):
            tensors[f"{at}attention.{part}.weight"] = (dtype, [hidden, hidden])
            tensors[f"{at}attention.{part}.bias"] = (dtype, [hidden])
        tensors[f"{at}attention.output.LayerNorm.weight"] = (dtype, [hidden])
        tensors[f"{at}attention.output.LayerNorm.bias"] = (dtype, [hidden])
        tensors[f"{at}intermediate.dense.weight"] = (dtype, [inner, hidden])
        tensors[f"{at}intermediate.dense.bias"] = (dtype, [inner])
        tensors[f"{at}output.dense.weight"] = (dtype, [hidden, inner])
        tensors[f"{at}output.dense.bias"] = (dtype, [hidden])
        tensors[f"{at}output.LayerNorm.weight"] = (dtype, [hidden])
        tensors[f"{at}output.LayerNorm.bias"] = (dtype, [hidden])
    tensors["pooler.dense.weight"] = (dtype, [hidden, hidden])
    tensors["pooler.dense.bias"] = (dtype, [hidden])
    return tensors


def write_model(path: Path, tensors: Tensors, metadata: dict[str, str] | None = None) -> int:
    """A safetensors file of these tensors, its data a hole; returns its data's size."""
    head = encode_header(tensors, metadata={"format": "pt"} if metadata is None else metadata)
    size = parse_header(head).data_size
    with path.open("wb") as file:
        file.write(head)
        file.truncate(len(head) + size)
    return size


def write_sharded(folder: Path, tensors: Tensors, shards: int = 2) -> Path:
    """`tensors` split in order over `shards` files, with their index, as transformers saves."""
    folder.mkdir(exist_ok=True)
    names = list(tensors)
    per_shard = -(-len(names) // shards)
    weight_map, total = {}, 0
    for number in range(shards):
        shard = f"model-{number + 1:05d}-of-{shards:05d}.safetensors"
        part = names[number * per_shard : (number + 1) * per_shard]
        total += write_model(folder / shard, {name: tensors[name] for name in part})
        weight_map.update(dict.fromkeys(part, shard))
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    return index


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    paths = {}
    # The model; its fine-tune, which saved one tensor in F16; the model as 2 shards.
    paths["model"] = root / "model.safetensors"
    write_model(paths["model"], minilm())
    tuned = minilm()
    tuned["pooler.dense.weight"] = ("F16", [384, 384])
    paths["tuned"] = root / "tuned.safetensors"
    write_model(paths["tuned"], tuned, {"format": "pt", "fine_tuned_on": "nli"})
    paths["sharded"] = root / "sharded"
    write_sharded(paths["sharded"], minilm())
    # An int8 copy: the linear layers' weights in I8, each with an F32 scale beside it.
    quantized: Tensors = {}
    for name, (dtype, shape) in minilm().items():
        if name.startswith("encoder.") and len(shape) == 2:
            quantized[name] = ("I8", shape)
            quantized[name.removesuffix("weight") + "scale"] = ("F32", [shape[0]])
        elif not name.startswith("pooler."):
            quantized[name] = (dtype, shape)
    paths["quantized"] = root / "quantized"
    paths["quantized"].mkdir()
    write_model(paths["quantized"] / "model.safetensors", quantized)
    return paths


def test_a_model_and_its_fine_tune(models: dict[str, Path]) -> None:
    result = run("diff", str(models["model"]), str(models["tuned"]))
    assert result.returncode == 1, result.stderr  # a tensor changed
    lines = result.stdout.splitlines()
    assert lines[:4] == [
        f"a: {models['model']} (1 file, 103 tensors)",
        f"b: {models['tuned']} (1 file, 103 tensors)",
        "tensors: 1 changed, 0 added, 0 removed",
        "metadata: 0 changed, 1 added, 0 removed",
    ]
    row = next(line for line in lines if line.startswith("~  pooler"))
    assert row.split("  ") == [
        "~",
        "pooler.dense.weight",
        "F32 -> F16",
        "[384, 384]",
        "589,824 -> 294,912",
    ]
    assert any(line.split() == ["+", "fine_tuned_on", "-", "nli"] for line in lines)
    totals = lines[lines.index(next(line for line in lines if line.startswith("dtype"))) + 1 :]
    # A row a side where a and b differ, one row where they hold the same.
    assert [line.split()[:3] for line in totals] == [
        ["F16", "a", "0"],
        ["F16", "b", "1"],
        ["F32", "a", "103"],
        ["F32", "b", "102"],
        ["all", "a", "103"],
        ["all", "b", "103"],
    ]
    assert "\x1b" not in result.stdout  # no colour when piped
    assert result.stderr == ""


def test_a_model_and_its_fine_tune_as_json(models: dict[str, Path]) -> None:
    result = run("diff", "--json", str(models["model"]), str(models["tuned"]))
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert document["same_tensors"] is False
    assert (document["added"], document["removed"]) == ([], [])
    assert document["changed"] == [
        {
            "name": "pooler.dense.weight",
            "changes": ["dtype", "nbytes"],
            "a": {
                "name": "pooler.dense.weight",
                "dtype": "F32",
                "shape": [384, 384],
                "nbytes": 589824,
            },
            "b": {
                "name": "pooler.dense.weight",
                "dtype": "F16",
                "shape": [384, 384],
                "nbytes": 294912,
            },
        }
    ]
    assert document["metadata"] == {"added": {"fine_tuned_on": "nli"}, "removed": {}, "changed": {}}
    a, b = document["totals"]["a"], document["totals"]["b"]
    assert (a["tensors"], a["numel"], a["nbytes"]) == (103, 22_713_216, 90_852_864)
    assert a["by_dtype"] == {"F32": {"tensors": 103, "numel": 22_713_216, "nbytes": 90_852_864}}
    assert b["by_dtype"]["F16"] == {"tensors": 1, "numel": 147_456, "nbytes": 294_912}
    assert b["nbytes"] == a["nbytes"] - 294_912
    assert document["error"] is None


def test_two_shards_and_one_file_of_the_same_tensors(models: dict[str, Path]) -> None:
    for args in ([str(models["model"]), str(models["sharded"])], [str(models["sharded"])] * 2):
        result = run("diff", *args)
        assert result.returncode == 0, result.stdout + result.stderr
        lines = result.stdout.splitlines()
        assert lines[2:4] == [
            "tensors: the same 103 (names, dtypes and shapes; values not compared: --values)",
            "metadata: the same",
        ]
    assert run("diff", str(models["model"]), str(models["sharded"])).stdout.splitlines()[1] == (
        f"b: {models['sharded']} (2 files, 103 tensors)"
    )
    index = models["sharded"] / "model.safetensors.index.json"
    document = json.loads(run("diff", "--json", str(index), str(models["model"])).stdout)
    assert document["same_tensors"] is True
    assert document["changed"] == document["added"] == document["removed"] == []
    assert document["totals"]["a"] == document["totals"]["b"]


def test_a_quantized_copy(models: dict[str, Path]) -> None:
    result = run("diff", "--json", str(models["model"]), str(models["quantized"]))
    assert result.returncode == 1
    document = json.loads(result.stdout)
    # Per layer: 4 attention and 2 feed-forward weights in I8, each with a new scale.
    assert len(document["changed"]) == 6 * 6
    assert {change["changes"][0] for change in document["changed"]} == {"dtype"}
    assert len(document["added"]) == 6 * 6
    assert all(t["name"].endswith(".scale") for t in document["added"])
    assert sorted(t["name"] for t in document["removed"]) == [
        "pooler.dense.bias",
        "pooler.dense.weight",
    ]
    assert set(document["totals"]["b"]["by_dtype"]) == {"F32", "I8"}
    text = run("diff", str(models["model"]), str(models["quantized"])).stdout.splitlines()
    assert "tensors: 36 changed, 36 added, 2 removed" in text
    rows = [line.split("  ")[:2] for line in text if line[:3] in ("~  ", "+  ", "-  ")]
    assert len(rows) == 36 + 36 + 2
    # By name, layer 2 before layer 10: each new scale beside the weight it scales.
    assert [name for _, name in rows] == sorted((name for _, name in rows), key=natural)
    for (sign, name), (next_sign, next_name) in itertools.pairwise(rows):
        if sign == "+":
            assert (next_sign, next_name) == ("~", name.removesuffix("scale") + "weight")


def natural(name: str) -> list[object]:
    """Numbers in number order: the rule written another way."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def test_an_80_column_terminal_names_every_tensor_alone(models: dict[str, Path]) -> None:
    text = on_terminal(
        "diff", str(models["model"]), str(models["quantized"]), columns=80, exits=(1,)
    )
    text = re.sub("\x1b\\[[0-9]*m", "", text)  # the colours
    lines = text.splitlines()
    names = [*minilm(), *(n.removesuffix("weight") + "scale" for n in minilm())]
    rows = [line for line in lines if line[:3] in ("~  ", "+  ", "-  ")]
    assert len(rows) == 74
    assert max(map(len, rows)) <= 80
    for row in rows:
        sign, shown, *_ = re.split(r" {2,}", row)
        assert_names_one(shown, names)
        if sign != "-":  # the pooler's, removed, have no layer
            assert re.search(r"layer\.[0-5]\b", shown), row
        # Sizes for people on a terminal: "576 KiB -> 144 KiB", not "589,824 -> 147,456".
        assert re.search(r"[0-9.]+ [KM]iB$", row), row


def assert_names_one(shown: str, names: list[str]) -> None:
    """`shown`, each ellipsis read as any run of characters, is one of `names` and no other;
    and it keeps that name's last two parts whole (``query.weight``)."""
    pattern = re.compile(".*".join(map(re.escape, shown.split("…"))))
    matched = [name for name in names if pattern.fullmatch(name)]
    assert len(matched) == 1, (shown, matched)
    assert shown.endswith(".".join(matched[0].split(".")[-2:])), shown


# COLUMNS of 0 is no width (the terminal's is used); 1, 20 and 44 are narrower than any
# table; a terminal that reports 0 columns (`script`, CI and container terminals) has no width.
@pytest.mark.parametrize(
    ("terminal", "columns"),
    [(80, "0"), (80, "1"), (80, "20"), (80, "44"), (0, None), (0, "0"), (30, None)],
    ids=["COLUMNS=0", "COLUMNS=1", "COLUMNS=20", "COLUMNS=44", "0-columns", "both-0", "30"],
)
def test_a_narrow_terminal_or_one_of_no_width(
    models: dict[str, Path], terminal: int, columns: str | None
) -> None:
    for other in ("quantized", "tuned", "sharded"):
        text = on_terminal(
            "diff",
            str(models["model"]),
            str(models[other]),
            columns=terminal,
            env_columns=columns,
            exits=(0, 1),  # same or not, never a traceback (its status would be 1 too)
            both=True,
        )
        assert "Traceback" not in text
        assert text.splitlines()[0].startswith("a: ")
        if terminal == 0 and columns in (None, "0"):  # no width known: 80, as shutil's
            rows = re.sub("\x1b\\[[0-9]*m", "", text).split("\n\n")[1].splitlines()
            assert max(map(len, rows)) <= 80, rows


def test_a_url_against_a_local_checkpoint(models: dict[str, Path], site: Site) -> None:
    site.root, site.mode = str(models["model"].parent), "ignore"  # (whole-file 200s)
    url = site.url("").rstrip("/")
    result = run("diff", f"{url}/tuned.safetensors", str(models["sharded"]))
    assert result.returncode == 1, result.stderr
    assert "tensors: 1 changed, 0 added, 0 removed" in result.stdout.splitlines()
    index = f"{url}/sharded/model.safetensors.index.json"
    assert run("diff", index, str(models["model"])).returncode == 0


def test_standard_input_as_one_side(models: dict[str, Path]) -> None:
    import subprocess
    import sys

    with models["tuned"].open("rb") as file:
        result = subprocess.run(
            [sys.executable, "-m", "safetensors_header", "diff", str(models["model"]), "-"],
            stdin=file,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[1] == "b: <stdin> (1 file, 103 tensors)"


def test_a_side_that_cannot_be_read_exits_2(models: dict[str, Path], tmp_path: Path) -> None:
    missing = tmp_path / "missing.safetensors"
    result = run("diff", str(models["model"]), str(missing))
    assert (result.returncode, result.stdout) == (2, "")
    assert (
        result.stderr
        == f"safetensors-header: {missing}: FileNotFoundError: No such file or directory\n"
    )
    result = run("diff", "--json", TINY, str(missing))
    assert result.returncode == 2
    document = json.loads(result.stdout)
    assert document["same_tensors"] is None
    assert document["error"] == {
        "path": str(missing),
        "kind": "FileNotFoundError",
        "message": "No such file or directory",
        "hint": None,
        "tensor": None,
        "offset": None,
    }
    assert run("diff", TINY).returncode == 2  # usage
    assert run("diff", "-", "-").returncode == 2  # standard input cannot be read twice


def test_a_directory_of_several_files_says_what_to_diff(tmp_path: Path) -> None:
    for name in ("a.safetensors", "b.safetensors"):
        (tmp_path / name).write_bytes(Path(TINY).read_bytes())
    result = run("diff", str(tmp_path), TINY)
    assert result.returncode == 2
    assert "it holds 2 safetensors files: a.safetensors, b.safetensors" in result.stderr
    assert f"name two of them: safetensors-header diff {tmp_path}/a.safetensors" in result.stderr
