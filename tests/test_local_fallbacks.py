"""Local reads on the paths other platforms take: no preadv (macOS before 11, some BSDs), no
pread (Windows), reads split over the cores, a header longer than the first read, and bytes
held in memory as a file. Every read is checked against the bytes written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from safetensors_header import Header, open_file, read_header, read_ranges, read_tensor, write_file
from safetensors_header._sources import local

NAMES = [f"t{i:03d}" for i in range(40)]


def _write(path: Path, *, name_length: int = 10) -> tuple[Header, bytes]:
    tensors = {
        name.ljust(name_length, "x"): (
            "U8",
            [300 + i],
            bytes((i + j) % 256 for j in range(300 + i)),
        )
        for i, name in enumerate(NAMES)
    }
    header = write_file(path, tensors)
    return header, path.read_bytes()


def _every_range(header: Header) -> list[tuple[int, int]]:
    return [(info.start + 1, info.nbytes - 2) for info in header.tensors.values()] + [(0, 8)]


@pytest.mark.parametrize("missing", ["preadv", "pread and preadv"])
def test_reads_without_preadv_or_pread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    path = tmp_path / "m.safetensors"
    header, data = _write(path)
    monkeypatch.setattr(local, "_preadv", None)
    if missing == "pread and preadv":
        monkeypatch.setattr(local, "_pread", None)
    assert read_header(path) == header
    views = read_ranges(path, _every_range(header))
    assert [bytes(view) for view in views] == [data[at : at + n] for at, n in _every_range(header)]
    info = header.tensors[NAMES[7].ljust(10, "x")]
    assert bytes(read_tensor(path, info)) == data[info.start : info.end]


@pytest.mark.parametrize("pread", [True, False])
def test_a_header_longer_than_the_first_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pread: bool
) -> None:
    numpy = pytest.importorskip("safetensors_header.numpy")
    path = tmp_path / "long.safetensors"
    header, data = _write(path, name_length=1000)
    assert header.data_start > local.FILE_FIRST_READ
    if not pread:  # then through the source layer's loop
        monkeypatch.setattr(local, "_pread", None)
    assert read_header(path) == header
    arrays = numpy.load(path, mmap=True)  # the header read from the descriptor it maps
    info = header.tensors[NAMES[5].ljust(1000, "x")]
    assert arrays[info.name].tobytes() == data[info.start : info.end]


def test_batches_of_buffers_and_parts_read_in_parallel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.safetensors"
    header, data = _write(path)
    monkeypatch.setattr(local, "_IOV_MAX", 3)  # several preadv calls for one read
    monkeypatch.setattr(local, "_PARALLEL", 1000)  # parts on the cores from 1,000 bytes
    monkeypatch.setattr(local, "_PART", 700)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    ranges = _every_range(header)
    views = read_ranges(path, ranges, gap=10**6)  # one read of many buffers
    assert [bytes(view) for view in views] == [data[at : at + n] for at, n in ranges]


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_bytes_in_memory_as_a_file(tmp_path: Path, kind: type) -> None:
    header, data = _write(tmp_path / "m.safetensors")
    file = open_file(kind(data))
    assert file.header == header
    info = header.tensors[NAMES[3].ljust(10, "x")]
    assert bytes(file.read_tensor(info.name)) == data[info.start : info.end]
    target = bytearray(info.nbytes)
    file.read_ranges([(info.start, info.nbytes)], into=[target])
    assert target == data[info.start : info.end]
