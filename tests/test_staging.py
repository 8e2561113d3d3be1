"""A strided share read through a staging buffer: exact bytes whatever cuts the requests make,
staged requests kept small, and the same bytes with numpy, with torch and with neither.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import run_child
from loopback import Site

np = pytest.importorskip("numpy")

from safetensors_header import write_file  # noqa: E402
from safetensors_header.numpy import load_plan  # noqa: E402
from safetensors_header.plan import Split, plan_reads  # noqa: E402

# Planned requests of many small runs are at most this long (_staging.STAGE_PART).
STAGE_PART = 4 << 20


def _file(path: Path) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    arrays = {
        "before": rng.standard_normal((7, 5)).astype(np.float32),
        "wide": rng.standard_normal((37, 301)).astype(np.float16),
        "narrow": rng.integers(0, 255, (50, 9), dtype=np.uint8),
        "after": rng.standard_normal((3,)).astype(np.float64),
    }
    write_file(path, arrays)
    return arrays


@pytest.mark.parametrize("part_size", [1, 97, 4096, 1 << 20], ids=lambda size: f"part{size}")
@pytest.mark.parametrize("world", [2, 3, 5, 8])
def test_strided_rows_land_exactly_whatever_cuts_the_requests(
    tmp_path: Path, part_size: int, world: int
) -> None:
    """Requests cut inside rows (a tiny part_size), rows of two tensors and whole tensors in
    one staged request: every rank gets its columns."""
    path = tmp_path / "m.safetensors"
    arrays = _file(path)
    for rank in range(world):
        select = {
            "before": None,
            "wide": Split(rank, world, axis=1),
            "narrow": Split(rank, world, axis=1),
            "after": None,
        }
        plan = plan_reads(path, select, gap=1 << 20, part_size=part_size)
        got = load_plan(plan)
        for name in ("wide", "narrow"):
            assert np.array_equal(got[name], np.array_split(arrays[name], world, 1)[rank])
        assert np.array_equal(got["before"], arrays["before"])
        assert np.array_equal(got["after"], arrays["after"])


def test_staged_requests_stay_small_and_are_the_plans(tmp_path: Path, site: Site) -> None:
    """A 16 MiB tensor's columns joined into one span are read in requests of at most
    4 MiB, over HTTP exactly the plan's."""
    path = tmp_path / "big.safetensors"
    big = np.arange(4096 * 1024, dtype=np.float32).reshape(4096, 1024)
    write_file(path, {"big": big})
    site.files["big.safetensors"] = path.read_bytes()
    url = site.url("big.safetensors")
    plan = plan_reads(url, {"big": Split(3, 8, axis=1)}, gap=1 << 20)
    assert max(stop - start for _, start, stop in plan.requests) <= STAGE_PART
    assert plan.bytes_read >= 15 << 20  # the gaps between the rows joined
    before = len(site.hits)
    got = load_plan(plan, timeout=30)["big"]
    assert np.array_equal(got, big[:, 384:512])
    hits = site.done(before + len(plan.requests))[before:]
    asked = sorted(f"bytes={start}-{stop - 1}" for _, start, stop in plan.requests)
    assert sorted(hit.range for hit in hits) == asked


CHILD = """
import json, sys
{first}
from safetensors_header import write_file
from safetensors_header.plan import Split, plan_reads
path = sys.argv[1] if len(sys.argv) > 1 else {path!r}
rows, columns, world = 40, 48, 3
data = bytes(range(256)) * (rows * columns * 2 // 256 + 1)
data = data[: rows * columns * 2]
write_file(path, {{"w": ("I16", (rows, columns), data)}})
shares = []
for rank in range(world):
    plan = plan_reads(path, {{"w": Split(rank, world, axis=1)}}, gap=1 << 20)
    shares.append(bytes(plan.read()["w"]).hex())
print(json.dumps({{"numpy": "numpy" in sys.modules, "torch": "torch" in sys.modules,
                  "shares": shares}}))
"""


def _expected_shares() -> list[str]:
    rows, columns, world = 40, 48, 3
    data = bytes(range(256)) * (rows * columns * 2 // 256 + 1)
    matrix = np.frombuffer(data[: rows * columns * 2], "<i2").reshape(rows, columns)
    return [part.tobytes().hex() for part in np.array_split(matrix, world, 1)]


@pytest.mark.parametrize("library", ["neither", "torch"])
def test_the_strided_copy_without_numpy(tmp_path: Path, library: str) -> None:
    if library == "torch":
        pytest.importorskip("torch")
    first = "import torch" if library == "torch" else ""
    done = run_child(CHILD.format(first=first, path=str(tmp_path / "w.safetensors")), timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    if library == "neither":
        assert not found["numpy"]
        assert not found["torch"]
    else:
        assert found["torch"]
    assert found["shares"] == _expected_shares()


def test_staged_requests_beyond_the_buffer_are_read_a_batch_at_a_time(tmp_path: Path) -> None:
    """32 MiB of rows joined: eight staged requests, read in batches through one buffer."""
    path = tmp_path / "big.safetensors"
    big = np.arange(8192 * 1024, dtype=np.float32).reshape(8192, 1024)
    write_file(path, {"big": big})
    plan = plan_reads(path, {"big": Split(5, 8, axis=1)}, gap=1 << 20)
    assert len(plan.requests) >= 8
    assert np.array_equal(load_plan(plan)["big"], big[:, 640:768])
