"""Thread safety under stress: many threads parsing and fetching at once, the interpreter
switching between them as often as it can (`sys.setswitchinterval` at its smallest).

`parse_header` promises that it is safe from any number of threads at once, and a header's
`TensorTable` builds its name index while other threads may be looking names up; an opened
file (`SafetensorsFile`) is shared by the threads that read from it. Every result is checked
against the one computed before the threads start.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import build, tensor
from loopback import Site

from safetensors_header import (
    Header,
    HeaderError,
    encode_header,
    open_file,
    parse_header,
    read_header,
    read_tensor,
)
from safetensors_header._core.parse import READERS, exact

THREADS = 16
SMALLEST_SWITCH = 1e-6  # seconds; CPython takes this and switches at its own floor


@pytest.fixture(autouse=True)
def fast_switching() -> Iterator[None]:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SMALLEST_SWITCH)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def _hammer(jobs: list[Callable[[], None]], *, rounds: int) -> None:
    """Run every job `rounds` times on each of `THREADS` threads started at once, each thread
    in its own order; re-raise the first failure."""
    start = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    def work(shift: int) -> None:
        order = jobs[shift % len(jobs) :] + jobs[: shift % len(jobs)]
        start.wait()
        try:
            for _ in range(rounds):
                for job in order:
                    job()
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=work, args=(shift,)) for shift in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    if failures:
        raise failures[0]


def _headers() -> dict[str, bytes]:
    """A header for each reader of the table, and one that only the exact reader takes."""
    many = {f"model.layers.{i}.mlp.up_proj.weight": ("BF16", [64, 32]) for i in range(400)}
    huge = {
        f"model.layers.{i // 64}.experts.{i % 64}.w{i % 3}": ("F8_E4M3", [8, 4])
        for i in range(40_000)
    }
    smallest = {reader.name: reader.smallest for reader in READERS}
    found = {
        "canonical": encode_header(many, metadata={"format": "pt"}),
        "compact": encode_header(huge),
        # Whitespace and a repeated metadata key: json's reader, or the exact one.
        "json": build(
            b'{ "__metadata__": {"a": "1", "a": "2"}, "t": {"dtype": "U8", '
            b'"shape": [2], "data_offsets": [0, 2]} }',
            2,
        )[:-2],
        # A repeated tensor name (the last one wins, as in the reference).
        "exact": build(
            b'{"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
            b'"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
            2,
        )[:-2],
    }
    assert len(found["compact"]) > smallest["compact"]
    assert smallest["canonical"] < len(found["canonical"]) < smallest["compact"]
    return found


@pytest.mark.slow
def test_parsing_from_many_threads_at_once() -> None:
    prefixes = _headers()
    files = {
        name: prefix + bytes(parse_header(prefix).data_size) for name, prefix in prefixes.items()
    }
    expected = {name: parse_header(data, file_size=len(data)) for name, data in files.items()}
    for name in ("canonical", "compact", "json"):
        text = bytes(files[name][8 : expected[name].data_start]).decode()
        assert exact(text) is not None  # (the exact reader's own verdict, for comparison)
    bad = b'\x08\x00\x00\x00\x00\x00\x00\x00{"a":1} '

    def parse(name: str) -> Callable[[], None]:
        def job() -> None:
            data = files[name]
            assert parse_header(data, file_size=len(data)) == expected[name]

        return job

    def refuse() -> None:
        with pytest.raises(HeaderError) as caught:
            parse_header(bad)
        assert caught.value.kind == "InvalidHeaderDeserialization"

    _hammer([parse(name) for name in files] + [refuse], rounds=1)


@pytest.mark.slow
def test_one_table_looked_up_from_many_threads() -> None:
    # The table scans names for its first lookups, then builds its index: while other
    # threads look names up.
    for _ in range(20):
        header = parse_header(encode_header({f"t{i}": ("U8", [i % 7]) for i in range(3000)}))
        table = header.tensors
        names = list(table)

        def lookups(table: object = table, names: list[str] = names) -> None:
            for name in names[::97]:
                info = table[name]  # type: ignore[index]
                assert info.name == name
                assert name in table  # type: ignore[operator]
            assert "missing" not in table  # type: ignore[operator]

        def walk(table: object = table, names: list[str] = names) -> None:
            assert [info.name for info in table.values()] == names  # type: ignore[attr-defined]

        _hammer([lookups, walk], rounds=2)


def _checkpoint_file(tmp_path: Path) -> tuple[Path, Header, dict[str, bytes]]:
    tensors = {f"w{i}": tensor("U8", [1000 + i], 0, 0) for i in range(12)}
    data = {
        name: bytes((i * 7 + j) % 251 for j in range(1000 + i)) for i, name in enumerate(tensors)
    }
    path = tmp_path / "model.safetensors"
    from safetensors_header import write_file

    header = write_file(path, {name: ("U8", [len(value)], value) for name, value in data.items()})
    return path, header, data


def test_reading_a_local_file_from_many_threads(tmp_path: Path) -> None:
    path, header, data = _checkpoint_file(tmp_path)
    shared = open_file(path)

    def read_one_file() -> None:
        assert read_header(path) == header

    def read_shared() -> None:
        for name, value in data.items():
            assert bytes(shared.read_tensor(name)) == value
        views = shared.read_ranges([(header.tensors["w3"].start + 5, 10), (0, 8)])
        assert bytes(views[0]) == data["w3"][5:15]

    def read_fresh() -> None:
        assert bytes(read_tensor(path, "w11", slice(3, 9))) == data["w11"][3:9]

    _hammer([read_one_file, read_shared, read_fresh], rounds=5)


def test_reading_over_http_from_many_threads(site: Site, tmp_path: Path) -> None:
    path, header, data = _checkpoint_file(tmp_path)
    site.files["m"] = path.read_bytes()
    url = site.url("m")
    shared = open_file(url)

    def read_remote_header() -> None:
        assert read_header(url) == header

    def read_shared() -> None:
        for name in ("w0", "w7"):
            assert bytes(shared.read_tensor(name)) == data[name]
        assert bytes(shared.read_tensor("w5", slice(10, 20))) == data["w5"][10:20]

    _hammer([read_remote_header, read_shared], rounds=2)
