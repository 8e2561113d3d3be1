"""Read plans: each rank's share of a checkpoint, its requests bounded, its bytes exact.

The checkpoint has Llama's names and shapes (scaled down): column-parallel projections split
along axis 0, row-parallel ones along axis 1, norms whole. Every result is compared with the
reference's tensors (``safetensors.numpy.load_file``), sliced as ``numpy.array_split`` does.
"""

from __future__ import annotations

import itertools
import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loopback import Site

np = pytest.importorskip("numpy")
reference = pytest.importorskip("safetensors.numpy")

from safetensors_header import (  # noqa: E402
    TENSOR_PARALLEL,
    Checkpoint,
    ReadPlan,
    Split,
    plan_reads,
    read_checkpoint,
    split_tensors,
    write_file,
)
from safetensors_header.numpy import load_plan, load_rank  # noqa: E402

LAYERS = 3
SHAPES = {
    "self_attn.q_proj.weight": (48, 32),
    "self_attn.k_proj.weight": (16, 32),
    "self_attn.v_proj.weight": (16, 32),
    "self_attn.o_proj.weight": (32, 48),
    "mlp.gate_proj.weight": (88, 32),
    "mlp.up_proj.weight": (88, 32),
    "mlp.down_proj.weight": (32, 88),
    "input_layernorm.weight": (32,),
    "post_attention_layernorm.weight": (32,),
}


def _llama() -> dict[str, Any]:
    rng = np.random.default_rng(7)
    arrays = {"model.embed_tokens.weight": rng.standard_normal((101, 32)).astype(np.float16)}
    for layer in range(LAYERS):
        for name, shape in SHAPES.items():
            arrays[f"model.layers.{layer}.{name}"] = rng.standard_normal(shape).astype(np.float16)
    arrays["model.norm.weight"] = rng.standard_normal(32).astype(np.float16)
    arrays["lm_head.weight"] = rng.standard_normal((101, 32)).astype(np.float16)
    return arrays


ARRAYS = _llama()


def _write_checkpoint(folder: Path, shards: int = 3) -> Checkpoint:
    names = list(ARRAYS)
    files: dict[str, list[str]] = {}
    for index in range(shards):
        chunk = names[index::shards]
        files[f"model-{index + 1:05d}-of-{shards:05d}.safetensors"] = chunk
    for file, chunk in files.items():
        write_file(folder / file, {n: ("F16", ARRAYS[n].shape, ARRAYS[n]) for n in chunk})
    weight_map = {name: file for file, chunk in files.items() for name in chunk}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return read_checkpoint(folder)


def _axis(name: str) -> int | None:
    if "norm" in name:
        return None
    return 1 if name.endswith(("o_proj.weight", "down_proj.weight")) else 0


def _expected(rank: int, world: int, folder: Path) -> dict[str, Any]:
    """The reference's tensors, split as numpy splits them."""
    found: dict[str, Any] = {}
    for file in sorted(folder.glob("*.safetensors")):
        for name, array in reference.load_file(str(file)).items():
            axis = _axis(name)
            found[name] = array if axis is None else np.array_split(array, world, axis)[rank]
    return found


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Checkpoint:
    return _write_checkpoint(tmp_path_factory.mktemp("llama"))


@pytest.mark.parametrize("world", [1, 2, 4, 8])
def test_row_splits_cover_every_byte_once(checkpoint: Checkpoint, world: int) -> None:
    covered: dict[str | None, list[tuple[int, int]]] = {}
    for rank in range(world):
        plan = plan_reads(checkpoint, split_tensors(rank, world, axes={}, default_axis=0))
        for tensor in plan.tensors:
            covered.setdefault(tensor.file, []).extend(tensor.ranges)
    for file, header in checkpoint.files.items():
        ranges = sorted(covered[file])
        # No byte twice, none left out: the ranks' ranges tile every tensor's bytes.
        tiles = [(start, start + length) for start, length in ranges if length]
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(tiles))
        wanted = sorted((info.start, info.end) for info in header.tensors.values())
        assert _merged(tiles) == _merged(wanted)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, stop in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], stop))
        else:
            out.append((start, stop))
    return out


@pytest.mark.parametrize("world", [1, 2, 4, 8])
def test_every_rank_gets_the_references_slices(
    checkpoint: Checkpoint, tmp_path_factory: pytest.TempPathFactory, world: int
) -> None:
    folder = Path(next(iter(checkpoint.shards.values())).source).parent
    for rank in range(world):
        arrays = load_rank(checkpoint, rank, world)
        expected = _expected(rank, world, folder)
        assert arrays.keys() == expected.keys()
        for name, array in expected.items():
            assert arrays[name].dtype == array.dtype
            assert arrays[name].shape == array.shape, name
            assert (arrays[name] == array).all(), name


@pytest.mark.parametrize(("over", "requests"), [(0.0, None), (0.25, None), (1.0, None), (10.0, 3)])
def test_the_bounds_hold(checkpoint: Checkpoint, over: float, requests: int | None) -> None:
    for world in (2, 4, 8):
        for rank in range(world):
            plan = plan_reads(
                checkpoint,
                split_tensors(rank, world),
                gap=1 << 20,
                max_over_read=over,
                max_requests=requests,
            )
            read: dict[str | None, int] = {}
            asked: dict[str | None, int] = {}
            for file, start, stop in plan.requests:
                read[file] = read.get(file, 0) + stop - start
            for tensor in plan.tensors:
                asked[tensor.file] = asked.get(tensor.file, 0) + tensor.nbytes
            for file, wanted in asked.items():
                assert read[file] <= wanted * (1 + over) + 1e-9
            if requests is not None:
                assert max(plan.requests_per_file().values()) <= requests
            if over == 0.0:
                assert plan.bytes_read == plan.bytes_asked
            # Every asked byte lies in a request of its file.
            spans = {file: [(a, b) for f, a, b in plan.requests if f == file] for file in asked}
            for tensor in plan.tensors:
                for offset, length in tensor.ranges:
                    assert any(a <= offset and offset + length <= b for a, b in spans[tensor.file])


def test_bounds_that_cannot_both_hold(checkpoint: Checkpoint) -> None:
    with pytest.raises(ValueError, match=r"max_requests=1 requests without reading"):
        plan_reads(checkpoint, split_tensors(1, 8), max_over_read=0.1, max_requests=1)
    with pytest.raises(ValueError, match="above max_requests=2: raise part_size"):
        plan_reads(checkpoint, None, max_over_read=0.0, max_requests=2, part_size=100)
    with pytest.raises(ValueError, match="max_over_read must be 0 or more or None"):
        plan_reads(checkpoint, None, max_over_read=-1)
    with pytest.raises(ValueError, match=r"rank must be in 0\.\.world-1"):
        Split(4, 4)


def test_columns_are_runs_of_rows(checkpoint: Checkpoint) -> None:
    name = "model.layers.0.self_attn.o_proj.weight"  # 32 rows of 48 columns
    plan = plan_reads(checkpoint, {name: Split(1, 4, axis=1)}, max_over_read=0)
    (tensor,) = plan.tensors
    assert tensor.shape == (32, 12)
    assert len(tensor.ranges) == 32  # a run of 12 columns in each row
    assert all(length == 24 for _, length in tensor.ranges)
    assert len(plan.requests) == 32  # nothing over-read: one request a run
    assert len(plan_reads(checkpoint, {name: Split(1, 4, axis=1)}, gap=0).requests) == 32
    # By default the gaps a request costs more than (4 KiB locally) are joined.
    assert len(plan_reads(checkpoint, {name: Split(1, 4, axis=1)}).requests) == 1
    joined = plan_reads(checkpoint, {name: Split(1, 4, axis=1)}, max_over_read=3.0)
    assert len(joined.requests) == 1  # the gaps (3 x 24 bytes a row) joined
    assert joined.over_read == pytest.approx((31 * 72) / (32 * 24))
    array = load_plan(joined)[name]
    assert (array == np.array_split(ARRAYS[name], 4, axis=1)[1]).all()


def test_selections_by_name_pattern_and_index(checkpoint: Checkpoint) -> None:
    plan = plan_reads(
        checkpoint,
        {
            "lm_head.weight": np.s_[10:20, ::2],
            "model.layers.[02].mlp.*": Split(0, 2),
            "model.layers.*.input_layernorm.weight": None,
        },
    )
    names = {tensor.name for tensor in plan.tensors}
    assert names == {
        "lm_head.weight",
        *(f"model.layers.{i}.mlp.{p}_proj.weight" for i in (0, 2) for p in ("gate", "up", "down")),
        *(f"model.layers.{i}.input_layernorm.weight" for i in range(LAYERS)),
    }
    arrays = load_plan(plan)
    assert (arrays["lm_head.weight"] == ARRAYS["lm_head.weight"][10:20, ::2]).all()
    down = "model.layers.2.mlp.down_proj.weight"
    assert (arrays[down] == np.array_split(ARRAYS[down], 2, 0)[0]).all()
    with pytest.raises(KeyError, match="no tensor 'nope'"):
        plan_reads(checkpoint, {"nope": None})
    only = plan_reads(checkpoint, lambda info: None if info.name == "model.norm.weight" else False)
    assert [tensor.name for tensor in only.tensors] == ["model.norm.weight"]


def test_a_plan_is_data(checkpoint: Checkpoint) -> None:
    plan = plan_reads(checkpoint, split_tensors(1, 2))
    again = pickle.loads(pickle.dumps(plan))
    assert again == plan
    assert isinstance(again, ReadPlan)
    assert {name: bytes(view) for name, view in again.read().items()} == {
        name: bytes(view) for name, view in plan.read().items()
    }
    summary = plan.summary()
    assert f"{len(plan.tensors)} tensors, {len(plan.requests)} requests to 3 files" in summary
    assert "model-00001-of-00003.safetensors:" in summary
    assert repr(plan).startswith("<ReadPlan ")
    assert TENSOR_PARALLEL["*.o_proj.weight"] == 1


def test_one_ranks_requests_over_http_are_the_plans(
    checkpoint: Checkpoint, site: Site, tmp_path: Path
) -> None:
    folder = Path(next(iter(checkpoint.shards.values())).source).parent
    for file in folder.iterdir():
        site.files[file.name] = file.read_bytes()
    remote = read_checkpoint(site.url("model.safetensors.index.json"))
    before = len(site.done(1 + len(remote.files)))
    plan = plan_reads(remote, split_tensors(1, 4), max_over_read=0.5)
    assert len(site.hits) == before  # planning reads nothing
    arrays = load_plan(plan)
    hits = site.done(before + len(plan.requests))[before:]
    asked = sorted((f"/{file}", f"bytes={start}-{stop - 1}") for file, start, stop in plan.requests)
    assert sorted((hit.path, hit.range) for hit in hits) == asked
    expected = _expected(1, 4, folder)
    assert all((arrays[name] == expected[name]).all() for name in expected)


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(0, 6), min_size=1, max_size=3),
    data=st.data(),
    over=st.sampled_from([0.0, 0.1, 1.0, 100.0]),
    part=st.sampled_from([1, 7, 64, 1 << 20]),
    workers=st.sampled_from([1, 3, 16]),
)
@pytest.mark.slow
def test_any_basic_index_reads_numpys_slice(
    tmp_path_factory: pytest.TempPathFactory,
    *,
    shape: list[int],
    data: Any,
    over: float,
    part: int,
    workers: int,
) -> None:
    array = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    path = tmp_path_factory.mktemp("any") / "a.safetensors"
    write_file(path, {"pad": ("U8", [3], b"xyz"), "a": ("I32", shape, array)})
    key = tuple(
        data.draw(
            st.one_of(
                st.builds(
                    slice,
                    st.none() | st.integers(-8, 8),
                    st.none() | st.integers(-8, 8),
                    st.none() | st.sampled_from([-2, -1, 1, 2, 3]),
                ),
                *([st.integers(-size, size - 1)] if size else []),
            )
        )
        for size in shape
    )
    plan = plan_reads(path, {"a": key}, max_over_read=over, part_size=part, max_workers=workers)
    assert load_plan(plan)["a"].tobytes() == np.ascontiguousarray(array[key]).tobytes()
    # Parts of `part`, or one per stream (at most 4 * part) where that makes fewer; at most
    # 2 streams a core, or 4.
    streams = min(workers, max(4, 2 * (os.cpu_count() or 1)))
    longest = max(part, min(4 * part, -(-plan.bytes_read // streams)))
    assert all(stop - start <= longest for _, start, stop in plan.requests)
