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
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loopback import Site

np = pytest.importorskip("numpy")
reference = pytest.importorskip("safetensors.numpy")

from safetensors_header import Checkpoint, encode_header, read_checkpoint, read_header, write_file  # noqa: E402
from safetensors_header.numpy import load_plan, load_rank  # noqa: E402
from safetensors_header.plan import ReadPlan, Split, plan_reads, split_tensors  # noqa: E402

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


# The plans' mechanics (bounds, runs, requests) under a layout of fixed axes: norms whole,
# the row-parallel projections along axis 1, every other tensor along axis 0. (The rules of
# tensor parallelism themselves are tests/test_parallel.py's.)
AXES = {"*norm*": None, "*.o_proj.weight": 1, "*.down_proj.weight": 1, "*": 0}


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
        plan = plan_reads(checkpoint, split_tensors(rank, world, axes={"*": 0}))
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
        arrays = load_rank(checkpoint, rank, world, axes=AXES)
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
                split_tensors(rank, world, axes=AXES),
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
        plan_reads(checkpoint, split_tensors(1, 8, axes=AXES), max_over_read=0.1, max_requests=1)
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
    plan = plan_reads(checkpoint, split_tensors(1, 2, axes=AXES))
    again = pickle.loads(pickle.dumps(plan))
    assert again == plan
    assert isinstance(again, ReadPlan)
    # Made again from its parts as plain tuples, it is the same plan.
    assert ReadPlan(plan.tensors, tuple(plan.requests), plan.files) == plan
    assert {name: bytes(view) for name, view in again.read().items()} == {
        name: bytes(view) for name, view in plan.read().items()
    }
    summary = plan.summary()
    assert f"{len(plan.tensors)} tensors, {len(plan.requests)} requests to 3 files" in summary
    assert "model-00001-of-00003.safetensors:" in summary
    assert repr(plan).startswith("<ReadPlan ")


def test_one_ranks_requests_over_http_are_the_plans(
    checkpoint: Checkpoint, site: Site, tmp_path: Path
) -> None:
    folder = Path(next(iter(checkpoint.shards.values())).source).parent
    for file in folder.iterdir():
        site.files[file.name] = file.read_bytes()
    remote = read_checkpoint(site.url("model.safetensors.index.json"))
    before = len(site.done(1 + len(remote.files)))
    plan = plan_reads(remote, split_tensors(1, 4, axes=AXES), max_over_read=0.5)
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


# --- merged requests, against the plan made a run at a time ---------------------------------


def _one_run_at_a_time(
    runs: list[tuple[int, int]],
    *,
    joinable: int,
    over: float | None,
    most: int | None,
    part: int,
    workers: int,
) -> list[tuple[int, int]] | str:
    """The rules of `plan_reads` for one file, applied to a list of every run (the plan
    before runs were held as blocks): touching runs merged, gaps joined smallest first (the
    first of equal ones first) up to `joinable` bytes then down to `most` requests, within
    `over`; spans cut into parts. The requests, or the ValueError's message."""
    merged: list[tuple[int, int]] = []
    for offset, length in sorted(runs):
        if not length:
            continue
        if merged and offset <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], offset + length))
        else:
            merged.append((offset, offset + length))
    asked = sum(stop - start for start, stop in merged)
    budget = float("inf") if over is None else over * asked
    order = sorted(range(len(merged) - 1), key=lambda i: (merged[i + 1][0] - merged[i][1], i))
    joined: set[int] = set()
    extra = 0
    for i in order:
        gap = merged[i + 1][0] - merged[i][1]
        too_many = most is not None and len(merged) - len(joined) > most
        if gap > joinable and not too_many:
            break
        if extra + gap > budget:
            if not too_many:
                break
            return f"{len(merged):,} runs cannot be joined into max_requests={most:,}"
        joined.add(i)
        extra += gap
    spans = merged[:1]
    for i in range(1, len(merged)):
        if i - 1 in joined:
            spans[-1] = (spans[-1][0], merged[i][1])
        else:
            spans.append(merged[i])
    total = sum(stop - start for start, stop in spans)
    streams = min(workers, max(4, 2 * (os.cpu_count() or 1)))
    longest = max(part, min(4 * part, -(-total // streams)))
    out = []
    for start, stop in spans:
        count = -(-(stop - start) // longest)
        bounds = [start + (stop - start) * i // count for i in range(count + 1)]
        out += list(itertools.pairwise(bounds))
    if most is not None and len(out) > most:
        return f"{len(out):,} requests of at most"
    return out


_DTYPES = {"F16": np.float16, "F32": np.float32, "U8": np.uint8, "I64": np.int64}


@st.composite
def _layouts(draw: Any) -> tuple[bytes, dict[str, Any]]:
    """A small file of 1-4 tensors, and what a rank selects of each: a `Split` (along any
    axis, of any world) or, now and then, a basic index or the whole tensor."""
    count = draw(st.integers(1, 4))
    tensors: dict[str, tuple[str, list[int]]] = {}
    select: dict[str, Any] = {}
    for i in range(count):
        dtype = draw(st.sampled_from(sorted(_DTYPES)))
        shape = draw(st.lists(st.integers(0, 9), min_size=0, max_size=3))
        tensors[f"t{i}"] = (dtype, shape)
        world = draw(st.integers(1, 5))
        choice = draw(st.integers(0, 9))
        if choice == 0:
            select[f"t{i}"] = None
        elif choice == 1 and shape:
            select[f"t{i}"] = (slice(None, None, draw(st.sampled_from([1, 2, -1]))),) * len(shape)
        else:
            select[f"t{i}"] = Split(draw(st.integers(0, world - 1)), world, draw(st.integers(0, 3)))
    header = encode_header(tensors)
    size = sum(
        int(np.prod(shape, dtype=np.int64)) * np.dtype(_DTYPES[dtype]).itemsize
        for dtype, shape in tensors.values()
    )
    return header + bytes(size), select


@settings(max_examples=150, deadline=None)
@given(
    layout=_layouts(),
    joinable=st.sampled_from([0, 1, 2, 7, 30, 1 << 20]),
    over=st.sampled_from([None, 0.0, 0.1, 0.5, 3.0]),
    most=st.sampled_from([None, 1, 2, 5]),
    part=st.sampled_from([1, 5, 64, 1 << 20]),
    workers=st.sampled_from([1, 3]),
)
def test_merged_requests_are_those_of_a_run_at_a_time(
    layout: tuple[bytes, dict[str, Any]],
    *,
    joinable: int,
    over: float | None,
    most: int | None,
    part: int,
    workers: int,
) -> None:
    data, select = layout
    header = read_header(data)
    runs: list[tuple[int, int]] = []
    for name, selection in select.items():
        info = header.tensors[name]
        key = selection.key(info.shape) if isinstance(selection, Split) else selection
        runs += info.byte_ranges(key) if key is not None else [(info.start, info.nbytes)]
    expected = _one_run_at_a_time(
        runs, joinable=joinable, over=over, most=most, part=part, workers=workers
    )
    bounds = {"gap": joinable, "max_over_read": over, "max_requests": most}
    if isinstance(expected, str):
        with pytest.raises(ValueError, match=re.escape(expected)):
            plan_reads(data, select, **bounds, part_size=part, max_workers=workers)
        return
    plan = plan_reads(data, select, **bounds, part_size=part, max_workers=workers)
    assert [(start, stop) for _, start, stop in plan.requests] == expected
    assert len(plan.requests) == len(expected)
    assert tuple(plan.requests) == plan.requests
    assert plan.bytes_read == sum(stop - start for start, stop in expected)
    for tensor in plan.tensors:  # each tensor's ranges are its selection's, a run at a time
        info = header.tensors[tensor.name]
        selection = select[tensor.name]
        key = selection.key(info.shape) if isinstance(selection, Split) else selection
        wanted = info.byte_ranges(key) if key is not None else [(info.start, info.nbytes)]
        assert list(tensor.ranges) == [pair for pair in wanted if pair[1]]
        assert tensor.nbytes == sum(length for _, length in wanted)
        assert len(tensor.ranges) == len(list(tensor.ranges))
    assert pickle.loads(pickle.dumps(plan)) == plan


@pytest.mark.parametrize("world", [2, 3, 8])
@pytest.mark.parametrize("gap", [0, 4096, 1 << 20])
def test_merged_requests_cover_exactly_what_each_rank_needs(
    tmp_path: Path, world: int, gap: int
) -> None:
    # Llama-70B's projections at a 64th of their width: a row-parallel split makes a run per
    # row, which a gap of 1 MiB joins into one request a tensor and 0 leaves apart.
    shapes = {"q_proj": (128, 128), "o_proj": (128, 128), "down_proj": (128, 448)}
    tensors = {f"l.{name}.weight": ("BF16", list(shape)) for name, shape in shapes.items()}
    path = tmp_path / "model.safetensors"
    header = encode_header(tensors)
    path.write_bytes(header)
    os.truncate(path, len(header) + 2 * sum(a * b for a, b in shapes.values()))
    for rank in range(world):
        plan = plan_reads(path, split_tensors(rank, world, axes=AXES), gap=gap)
        needed = sorted(pair for tensor in plan.tensors for pair in tensor.ranges)
        spans = [(start, stop) for _, start, stop in plan.requests]
        assert spans == sorted(spans)
        # Every byte a tensor needs is in exactly one request; every request begins and ends
        # with needed bytes, and reads nothing else but gaps of at most `gap` bytes.
        bytes_needed = {offset + i for offset, length in needed for i in range(length)}
        for start, stop in spans:
            assert start in bytes_needed
            assert stop - 1 in bytes_needed
            inside = [(o, o + n) for o, n in needed if start <= o < stop]
            assert all(b <= stop for _, b in inside)
            assert all(b[0] - a[1] <= gap for a, b in itertools.pairwise(inside))
        read = [b for start, stop in spans for b in range(start, stop)]
        assert len(read) == len(set(read))
        assert bytes_needed <= set(read)
        rows = sum(1 for tensor in plan.tensors for _ in tensor.ranges)
        if gap == 1 << 20:
            assert len(plan.requests) == 1  # the three tensors' rows: one span
        elif gap == 0:  # no two ranges of a rank touch: a request a range
            assert len(plan.requests) == rows
        assert plan.requests_per_file() == {None: len(plan.requests)}


def test_equal_gaps_are_joined_first_to_last_up_to_the_bound() -> None:
    # Rank 0 of 2 along axis 1 of 4 rows of 8 bytes: runs of 4 bytes with gaps of 4 between.
    data = encode_header({"a": ("U8", [4, 8])}) + bytes(32)
    start = read_header(data).tensors["a"].start
    plan = plan_reads(data, {"a": Split(0, 2, axis=1)}, gap=0, max_requests=2)
    assert list(plan.requests) == [(None, start, start + 20), (None, start + 24, start + 28)]
    # A bound of exactly the three gaps' bytes (0.75 of the 16 asked) allows all three.
    plan = plan_reads(data, {"a": Split(0, 2, axis=1)}, gap=0, max_over_read=0.75, max_requests=1)
    assert list(plan.requests) == [(None, start, start + 28)]
    assert plan.over_read == 0.75
    with pytest.raises(ValueError, match=r"4 runs cannot be joined into max_requests=1 .* 75\.0%"):
        plan_reads(data, {"a": Split(0, 2, axis=1)}, gap=0, max_over_read=0.7, max_requests=1)
    (tensor,) = plan.tensors
    assert tensor.ranges == tuple((start + 8 * row, 4) for row in range(4))
    assert repr(tensor.ranges) == f"Runs(start={start}, length=4, stride=8, number=4)"
    assert tensor.ranges[-1] == (start + 24, 4)
    assert tensor.ranges[1:3] == ((start + 8, 4), (start + 16, 4))
