"""The command line for people: names told apart at any width, the tree view, sizes for
people, help that fits. Real-shaped models are sparse files: the header a real model's (its
names, dtypes and shapes), the data a hole of the right size."""

from __future__ import annotations

import json
import math
import re
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_cli_output import COMMAND, environment, on_terminal, rows_of

from safetensors_header import DTYPES
from safetensors_header._cli.tree import tree_document, tree_of

pytest.importorskip("pty")


def sparse_file(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> int:
    """A safetensors file of these tensors whose data is a hole; its parameter count."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    at = numel = 0
    for name, (dtype, shape) in tensors.items():
        count = 1
        for size in shape:
            count *= size
        nbytes = count * DTYPES[dtype].bits // 8
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + nbytes]}
        at += nbytes
        numel += count
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(text)) + text)
        file.truncate(8 + len(text) + at)
    return numel


def llama_3_8b() -> dict[str, tuple[str, list[int]]]:
    """Meta-Llama-3-8B's tensors (names, BF16, shapes), as its checkpoint has them."""
    hidden, inner, vocab, kv = 4096, 14336, 128256, 1024
    tensors = {"model.embed_tokens.weight": ("BF16", [vocab, hidden])}
    for layer in range(32):
        p = f"model.layers.{layer}."
        tensors |= {
            p + "input_layernorm.weight": ("BF16", [hidden]),
            p + "mlp.down_proj.weight": ("BF16", [hidden, inner]),
            p + "mlp.gate_proj.weight": ("BF16", [inner, hidden]),
            p + "mlp.up_proj.weight": ("BF16", [inner, hidden]),
            p + "post_attention_layernorm.weight": ("BF16", [hidden]),
            p + "self_attn.k_proj.weight": ("BF16", [kv, hidden]),
            p + "self_attn.o_proj.weight": ("BF16", [hidden, hidden]),
            p + "self_attn.q_proj.weight": ("BF16", [hidden, hidden]),
            p + "self_attn.v_proj.weight": ("BF16", [kv, hidden]),
        }
    tensors |= {
        "model.norm.weight": ("BF16", [hidden]),
        "lm_head.weight": ("BF16", [vocab, hidden]),
    }
    return tensors


def minilm() -> dict[str, tuple[str, list[int]]]:
    """sentence-transformers/all-MiniLM-L6-v2's tensors (a BERT of 6 layers)."""
    tensors = {
        "embeddings.word_embeddings.weight": ("F32", [30522, 384]),
        "embeddings.position_embeddings.weight": ("F32", [512, 384]),
        "embeddings.token_type_embeddings.weight": ("F32", [2, 384]),
        "embeddings.LayerNorm.weight": ("F32", [384]),
        "embeddings.LayerNorm.bias": ("F32", [384]),
        "embeddings.position_ids": ("I64", [1, 512]),
    }
    for layer in range(6):
        p = f"encoder.layer.{layer}."
        for part, shape in (
            ("attention.self.query", [384, 384]),
            ("attention.self.key", [384, 384]),
            ("attention.self.value", [384, 384]),
            ("attention.output.dense", [384, 384]),
            ("intermediate.dense", [1536, 384]),
            ("output.dense", [384, 1536]),
        ):
            tensors[p + part + ".weight"] = ("F32", shape)
            tensors[p + part + ".bias"] = ("F32", [shape[0]])
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            tensors[p + norm + ".weight"] = ("F32", [384])
            tensors[p + norm + ".bias"] = ("F32", [384])
    tensors["pooler.dense.weight"] = ("F32", [384, 384])
    tensors["pooler.dense.bias"] = ("F32", [384])
    return tensors


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("real-shaped")
    bert = folder / "minilm.safetensors"
    sparse_file(bert, minilm())
    llama = folder / "llama"
    llama.mkdir()
    names = list(llama_3_8b())
    shards = {f"model-0000{i + 1}-of-00004.safetensors": names[i::4] for i in range(4)}
    tensors = llama_3_8b()
    for shard, members in shards.items():
        sparse_file(llama / shard, {name: tensors[name] for name in members})
    weight_map = {name: shard for shard, members in shards.items() for name in members}
    (llama / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return {"minilm": bert, "llama": llama}


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("model", ["minilm", "llama"])
def test_no_two_tensors_print_alike(models: dict[str, Path], model: str, columns: int) -> None:
    text = on_terminal("inspect", str(models[model]), columns=columns)
    lines = text.splitlines()
    assert max(map(len, lines)) <= columns
    names = [row[0] for row in rows_of(text)]
    expected = minilm() if model == "minilm" else llama_3_8b()
    assert len(names) == len(expected)
    assert len(set(names)) == len(names)  # every tensor its own name
    if columns == 120:
        assert set(names) == set(expected)  # room enough: nothing cut
    if model == "llama":  # four files named as transformers names them: one line of legend
        legend = "files 1-4: model-00001-of-00004.safetensors to model-00004-of-00004.safetensors"
        assert legend in lines
        assert {row[2] for row in rows_of(text)} == {"1", "2", "3", "4"}


@pytest.fixture(scope="module")
def llama_in_two(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Llama 3 8B's 291 tensors in 2 shards, each shard's tensors in the order the writer
    puts them (by name as text: layer 10 before layer 2); its weight map."""
    folder = tmp_path_factory.mktemp("llama-in-two")
    tensors = llama_3_8b()
    names = list(tensors)
    shards = {
        "model-00001-of-00002.safetensors": sorted(names[:150]),
        "model-00002-of-00002.safetensors": sorted(names[150:]),
    }
    for shard, members in shards.items():
        sparse_file(folder / shard, {name: tensors[name] for name in members})
    weight_map = {name: shard for shard, members in shards.items() for name in members}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return folder, weight_map


def natural(name: str) -> list[object]:
    return [int(part) if part.isdigit() else part for part in re.split(r"([0-9]+)", name)]


@pytest.mark.parametrize("columns", [80, 64])
def test_every_row_names_one_tensor_at_80_columns(
    llama_in_two: tuple[Path, dict[str, str]], columns: int
) -> None:
    folder, weight_map = llama_in_two
    text = on_terminal("inspect", str(folder), columns=columns)
    lines = text.splitlines()
    assert max(map(len, lines)) <= columns
    # The files by number, a legend above the table: the names get the room.
    legend = lines.index("file 1: model-00001-of-00002.safetensors")
    assert lines[legend + 1 : legend + 3] == [
        "file 2: model-00002-of-00002.safetensors",
        "dtype: BF16, every tensor",  # said once: not a column
    ]
    assert lines[legend + 3].split() == ["name", "shape", "file", "size"]
    rows = rows_of(text)
    assert len(rows) == 291
    named = []
    for shown, _, file, _ in rows:
        # Each ellipsis read as any run of characters: one tensor's name, and no other's.
        pattern = re.compile(".*".join(map(re.escape, shown.split("…"))))
        [name] = [name for name in weight_map if pattern.fullmatch(name)]
        named.append(name)
        parts = name.split(".")
        assert shown.endswith("." + parts[-1]), shown  # weight
        if "layers" in parts:  # the layer's number with its word: layers.0
            assert re.search(rf"layers\.{parts[2]}[.…]", shown), shown
        assert file == str(int(weight_map[name][6:11]))  # model-0000N-of-00002.safetensors
    # In the order people count (layer 2 before layer 10), not the files' (10 before 2).
    assert named == sorted(weight_map, key=natural)
    if columns == 80:  # every name whole: the dtype said once and the files by number
        assert [row[0] for row in rows] == named
    else:  # leading parts first, then what the module's own name cannot keep
        assert "…layers.0.…o_proj.weight" in [row[0] for row in rows]


def test_sort_by_name_counts_as_people_do(llama_in_two: tuple[Path, dict[str, str]]) -> None:
    folder, weight_map = llama_in_two
    for args in (["--sort", "name"], ["--sort", "size"]):
        result = subprocess.run(
            [*COMMAND, "inspect", *args, str(folder)],
            capture_output=True,
            text=True,
            env=environment(),
            timeout=60,
            check=True,
        )
        names = [row[0] for row in rows_of(result.stdout)]
        size = dict.fromkeys(weight_map, 1)  # --sort size: larger first, then by name
        if args[1] == "size":
            tensors = llama_3_8b()
            size = {name: -math.prod(shape) for name, (_, shape) in tensors.items()}
        assert names == sorted(weight_map, key=lambda name: (size[name], natural(name)))
    # Piped, a checkpoint's tensors stay in its files' order (file by file, offset order).
    piped = subprocess.run(
        [*COMMAND, "inspect", str(folder)],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=60,
        check=True,
    ).stdout
    assert [row[0] for row in rows_of(piped)] == list(weight_map)


def test_the_tree_collapses_the_repeated_layers(models: dict[str, Path]) -> None:
    text = on_terminal("inspect", "--tree", str(models["llama"]), columns=80)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80
    assert "291 tensors in 4 files, 8.03 B parameters, 15.0 GiB" in text
    [block] = [line for line in lines if "layers.{0..31}" in line]
    assert re.fullmatch(r"  model\.layers\.\{0\.\.31\}  x32 +BF16 +6\.98 B +13\.0 GiB", block) or (
        re.fullmatch(r"  layers\.\{0\.\.31\}  x32 +BF16 +6\.98 B +13\.0 GiB", block)
    ), block
    # One copy of a layer below it: nine tensors, each once.
    assert sum("q_proj.weight" in line for line in lines) == 1
    assert any(
        re.search(r"q_proj\.weight +BF16 +\[4096, 4096\] +16\.8 M +32\.0 MiB", x) for x in lines
    )
    bert = on_terminal("inspect", "--tree", str(models["minilm"]), columns=80)
    assert re.search(r"encoder\.layer\.\{0\.\.5\}  x6 +F32 +10\.6 M +40\.6 MiB", bert), bert


def test_the_tree_as_json(models: dict[str, Path]) -> None:
    result = subprocess.run(
        [*COMMAND, "inspect", "--tree", "--json", str(models["llama"])],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=60,
        check=True,
    )
    document = json.loads(result.stdout)
    assert document["totals"]["numel"] == 8_030_261_248
    model = next(node for node in document["tree"]["children"] if node["name"] == "model")
    layers = next(node for node in model["children"] if node["name"] == "layers")
    [block] = layers["children"]
    assert (block["name"], block["repeat"], block["numel"]) == ("{0..31}", 32, 6_979_584_000)
    assert block["by_dtype"] == {
        "BF16": {"tensors": 288, "numel": 6_979_584_000, "nbytes": 13_959_168_000}
    }
    assert [child["name"] for child in block["children"]] == [
        "input_layernorm",
        "mlp",
        "post_attention_layernorm",
        "self_attn",
    ]


def test_a_layer_that_differs_breaks_the_run() -> None:
    from safetensors_header import TensorInfo

    def info(name: str, shape: tuple[int, ...]) -> TensorInfo:
        count = 1
        for size in shape:
            count *= size
        return TensorInfo(name, "F32", shape, 0, 4 * count, 0)

    tensors = [info(f"layers.{i}.mlp.weight", (4, 4)) for i in (0, 1)]
    tensors += [info(f"layers.{i}.experts.{e}.weight", (4, 4)) for i in (2, 3, 4) for e in range(8)]
    tensors += [info("layers.6.mlp.weight", (4, 4))]  # not after 4: a run of its own
    document = tree_document(tree_of(tensors))
    [layers] = document["children"]
    assert [(g["name"], g["repeat"]) for g in layers["children"]] == [
        ("{0..1}", 2),
        ("{2..4}", 3),
        ("6", 1),
    ]
    [module] = layers["children"][1]["children"]  # experts
    [experts] = module["children"]
    assert (experts["name"], experts["repeat"], experts["numel"]) == ("{0..7}", 8, 8 * 16)


def test_sizes_for_people_on_a_terminal_and_exact_when_piped(models: dict[str, Path]) -> None:
    source = str(models["minilm"])
    shown = on_terminal("inspect", source, columns=100)
    assert re.search(r"embeddings\.word_embeddings\.weight +F32 +\[30522, 384\] +44\.7 MiB", shown)
    numel = sparse_file(models["minilm"].with_suffix(".again"), minilm())
    nbytes = numel * 4 + 512 * 4  # F32, and the I64 position ids
    assert f"total: 104 tensors, {numel / 1e6:.1f} M parameters, {nbytes / 2**20:.1f} MiB" in shown
    exact = on_terminal("inspect", "--exact", source, columns=100)
    assert f"total: 104 tensors, {numel:,} parameters, {nbytes:,} bytes" in exact
    text = piped("inspect", source).stdout
    assert f"total: 104 tensors, {numel:,} parameters, {nbytes:,} bytes" in text
    assert "MiB" not in text


@pytest.mark.parametrize("command", ["", "inspect", "validate", "hash", "diff"])
def test_help_fits_80_columns_and_breaks_no_word(command: str) -> None:
    from safetensors_header._cli import arguments

    result = subprocess.run(
        [*COMMAND, *([command] if command else []), "--help"],
        capture_output=True,
        text=True,
        env=environment(COLUMNS="80"),
        timeout=60,
        check=True,
    )
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 80, [line for line in lines if len(line) > 80]
    shown = set(result.stdout.split())
    epilog = getattr(arguments, f"_{command.upper()}_EPILOG" if command else "_EPILOG")
    for word in epilog.split():
        assert word in shown, word  # a word broken across two lines would be missing


def on_terminal_both(*args: str, **env: str | None) -> str:
    """stdout and stderr together, both on one pseudo-terminal 80 columns wide (a terminal
    that knows colour, NO_COLOR unset unless given)."""
    env = {"TERM": "xterm", "NO_COLOR": None, **env}
    return on_terminal(*args, columns=80, both=True, check=False, **env)


def piped(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *args], check=False, capture_output=True, text=True, env=environment()
    )


def _two_models(folder: Path) -> tuple[Path, Path]:
    a, b = folder / "a.safetensors", folder / "b.safetensors"
    sparse_file(a, {"w": ("F32", [4, 4]), "gone": ("F32", [2])})
    sparse_file(b, {"w": ("F16", [4, 4]), "new": ("F32", [2])})
    return a, b


def test_diff_in_colour_on_a_terminal_and_never_with_no_color(tmp_path: Path) -> None:
    a, b = _two_models(tmp_path)
    text = on_terminal_both("diff", str(a), str(b))
    assert "\x1b[33m~  w" in text  # changed: yellow
    assert "\x1b[31m-  gone" in text  # removed: red
    assert "\x1b[32m+  new" in text  # added: green
    assert "\x1b[0m" in text
    plain = on_terminal_both("diff", str(a), str(b), NO_COLOR="1")
    assert "\x1b[" not in plain
    assert re.sub(r"\x1b\[[0-9;]*m", "", text) == plain  # the same text, only coloured


def test_a_file_that_is_something_else_says_so_first(tmp_path: Path) -> None:
    page = tmp_path / "model.safetensors"
    page.write_bytes(b"<!DOCTYPE html><html><body>Sign in</body></html>")
    result = piped("inspect", str(page))
    assert result.stderr.startswith(
        f"safetensors-header: {page}: this is an HTML or XML page, not a safetensors file: the "
        "URL is wrong, the file needs a login or a token"
    )
    assert "(HeaderTooLarge: the header length is " in result.stderr
    assert len(result.stderr.splitlines()) == 1
    coloured = on_terminal_both("inspect", str(page))
    assert "\x1b[1mthis is an HTML or XML page" in coloured
    # validate's verdict keeps its kind first, for scripts.
    verdict = piped("validate", str(page))
    assert verdict.stdout.startswith(f"{page}: HeaderTooLarge: ")


# --- progress ----------------------------------------------------------------------------------


def _checkpoint_files(count: int) -> dict[str, bytes]:
    from helpers import build, tensor

    files = {}
    weight_map = {}
    for number in range(count):
        shard = f"model-{number + 1:05d}-of-{count:05d}.safetensors"
        files[shard] = build({f"t{number}": tensor("U8", [4], 0, 4)}, 4)
        weight_map[f"t{number}"] = shard
    files["model.safetensors.index.json"] = json.dumps({"weight_map": weight_map}).encode()
    return files


def test_the_library_reports_progress(tmp_path: Path) -> None:
    from safetensors_header import read_checkpoint
    from safetensors_header.integrity import hash_tensors

    for name, data in _checkpoint_files(5).items():
        (tmp_path / name).write_bytes(data)
    shards: list[tuple[int, int]] = []
    checkpoint = read_checkpoint(
        tmp_path, progress=lambda done, total: shards.append((done, total))
    )
    assert shards == [(done, 5) for done in range(1, 6)]
    hashed: list[tuple[int, int]] = []
    hash_tensors(checkpoint, progress=lambda done, total: hashed.append((done, total)))
    assert hashed[-1] == (20, 20)
    assert [done for done, _ in hashed] == sorted(done for done, _ in hashed)


def test_a_slow_checkpoint_shows_progress_on_a_terminal_only(site: Any) -> None:
    site.files.update(_checkpoint_files(3))
    site.delay = 0.6  # the index, then the shards together: over a second in all
    url = site.url("model.safetensors.index.json")
    shown = on_terminal_both("inspect", url)
    assert "shard headers read: 3/3" in shown
    assert "\r\x1b[K" in shown  # cleared before the output
    assert "t2" in shown
    quiet = on_terminal_both("inspect", "--quiet", url)
    assert "shard headers read" not in quiet
    result = piped("inspect", url)
    assert result.returncode == 0
    assert result.stderr == ""


def test_wide_shows_names_whole_on_a_terminal(models: dict[str, Path]) -> None:
    text = on_terminal("inspect", "--wide", str(models["llama"]), columns=40)
    names = [row[0] for row in rows_of(text)]
    assert set(names) == set(llama_3_8b())  # nothing cut, however narrow the terminal
    assert "…" not in text
