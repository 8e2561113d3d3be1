"""read_header's sources: paths, bytes-like objects and file objects, and what they read."""

from __future__ import annotations

import io
import mmap
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import build, tensor

from safetensors_header import HeaderError, parse_header, read_header
from safetensors_header._sources import local as _local

DATA = Path(__file__).parent / "data"
GOOD = build({"__metadata__": {"k": "v"}, "a": tensor("F32", [2], 0, 8)}, b"abcdefgh", pad=True)


class CountingReader(io.RawIOBase):
    """A raw stream that serves at most `step` bytes per read and counts what it served."""

    def __init__(self, data: bytes, *, step: int = 1 << 30, seekable: bool = True) -> None:
        self._data = data
        self._pos = 0
        self._step = step
        self._seekable = seekable
        self.served = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._seekable

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if not self._seekable:
            raise io.UnsupportedOperation("seek")
        self._pos = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._data)}[
            whence
        ] + offset
        return self._pos

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        chunk = self._data[self._pos : self._pos + min(len(buffer), self._step)]
        buffer[: len(chunk)] = chunk
        self._pos += len(chunk)
        self.served += len(chunk)
        return len(chunk)


def test_path_str_pathlike_and_bytes_agree(tmp_path: Path) -> None:
    path = tmp_path / "f.safetensors"
    path.write_bytes(GOOD)
    headers = [
        read_header(str(path)),
        read_header(path),
        read_header(GOOD),
        read_header(bytearray(GOOD)),
        read_header(memoryview(GOOD)),
        read_header(io.BytesIO(GOOD)),
        parse_header(GOOD, file_size=len(GOOD)),
    ]
    assert all(header == headers[0] for header in headers)
    assert headers[0].file_size == len(GOOD)
    assert headers[0].tensors["a"].start == headers[0].data_start


class _PathLike:
    """An os.PathLike that is not a pathlib.Path (its __fspath__ may give str or bytes)."""

    def __init__(self, path: str | bytes) -> None:
        self._path = path

    def __fspath__(self) -> str | bytes:
        return self._path


def test_any_pathlike_is_a_path(tmp_path: Path) -> None:
    path = tmp_path / "f.safetensors"
    path.write_bytes(GOOD)
    expected = read_header(path)
    assert read_header(_PathLike(str(path))) == expected
    assert read_header(_PathLike(os.fsencode(path))) == expected
    # A path with "://" in it that is no URL scheme this reads is a local path too.
    odd = tmp_path / "a:" / "" / "b.safetensors"
    odd.parent.mkdir()
    odd.write_bytes(GOOD)
    assert "://" in str(tmp_path / "a:") + "//b.safetensors"
    assert read_header(str(tmp_path / "a:") + "//b.safetensors") == expected


_STARTS = {
    "valid": GOOD,
    "too large": (10**9).to_bytes(8, "little") + bytes(100),
    "past the end": (200).to_bytes(8, "little") + bytes(100),
    "a zip": b"PK\x03\x04" + bytes(100),  # too large, with a hint naming it
    "not UTF-8": (2).to_bytes(8, "little") + b"\xff\xfe" + bytes(50),
    "tiny": b"1234567",
}


class _OptedOut(io.BytesIO):
    __fspath__ = None  # the usual way to say "not an os.PathLike"


class _Forwarding:
    """A wrapper that forwards every attribute, __fspath__ included, to a file object."""

    def __init__(self, file: io.BytesIO) -> None:
        self._file = file

    def __getattr__(self, name: str) -> object:
        if name == "__fspath__":
            return lambda: "/nonexistent"
        return getattr(self._file, name)


def test_only_a_type_with_fspath_is_a_path() -> None:
    """As os.PathLike decides (on the type, None opting out), a file object stays one."""
    with_attribute = io.BytesIO(GOOD)
    with_attribute.__fspath__ = lambda: "/nonexistent"  # type: ignore[attr-defined]
    for source in (with_attribute, _OptedOut(GOOD), _Forwarding(io.BytesIO(GOOD))):
        assert read_header(source) == read_header(GOOD)  # type: ignore[arg-type]


@pytest.mark.parametrize("cut", [0, 1, 7, 8, 9, 30, 63, 64, -1, None])
@pytest.mark.parametrize("name", list(_STARTS))
def test_file_start_agrees_with_parse_header(name: str, cut: int | None) -> None:
    """`parse_file_start` (a local file's first read) asks for more bytes than it was given,
    as `bytes_needed` would, until it gives parse_header's verdict on the whole file."""
    from safetensors_header._core import parse as _parser
    from safetensors_header._core.fileformat import MAX_HEADER_SIZE, bytes_needed

    data = _STARTS[name]
    size = len(data)
    try:
        expected: object = parse_header(data, file_size=size)
    except HeaderError as error:
        expected = error.kind
    have = data[:cut]
    for _ in range(4):
        try:
            got: object = _parser.parse_file_start(have, size, MAX_HEADER_SIZE)
        except HeaderError as error:
            got = error.kind
        if not isinstance(got, int):
            break
        assert len(have) < got <= size
        assert got == bytes_needed(have, file_size=size)
        have = data[:got]
    assert got == expected


def test_bytes_are_contents_never_a_path(tmp_path: Path) -> None:
    path = tmp_path / "f.safetensors"
    path.write_bytes(GOOD)
    with pytest.raises(HeaderError) as info:
        read_header(os.fsencode(path))
    assert info.value.kind == "HeaderTooLarge"


def test_mmap_source(tmp_path: Path) -> None:
    path = tmp_path / "f.safetensors"
    path.write_bytes(GOOD)
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as view:
        header = read_header(view)
        info = header.tensors["a"]
        assert view[info.start : info.end] == b"abcdefgh"
    # The memoryview was released: the map could be closed above without BufferError.


def test_shipped_file_reads() -> None:
    header = read_header(DATA / "tiny.safetensors")
    assert header.metadata == {"format": "np", "source": "safetensors_header tests"}
    assert len(header.tensors) == 7
    assert header.data_start + header.data_size == header.file_size


@pytest.mark.parametrize("step", [1, 3, 8, 1 << 30], ids=["1-byte", "3-byte", "8-byte", "whole"])
def test_file_object_reads_exactly_the_header(step: int) -> None:
    data = build({"a": tensor("U8", [1008], 0, 1008)}, 1008)  # a data buffer never read
    reader = CountingReader(data, step=step)
    header = read_header(reader)
    assert reader.served == header.data_start  # 8 + N bytes, not one more
    assert header.file_size == len(data)


def test_file_object_is_read_from_offset_zero() -> None:
    stream = io.BytesIO(GOOD)
    stream.seek(17)
    assert read_header(stream).tensors["a"].dtype == "F32"


def test_unseekable_stream_skips_the_coverage_rule() -> None:
    reader = CountingReader(GOOD + b"trailing", seekable=False)
    header = read_header(reader)
    assert header.file_size is None
    assert reader.served == header.data_start
    with pytest.raises(HeaderError) as info:
        read_header(GOOD + b"trailing")
    assert info.value.kind == "MetadataIncompleteBuffer"


def test_unseekable_stream_that_ends_inside_the_header() -> None:
    with pytest.raises(HeaderError) as info:
        read_header(CountingReader(GOOD[:20], seekable=False))
    assert info.value.kind == "InvalidHeaderLength"
    with pytest.raises(HeaderError) as info:
        read_header(CountingReader(GOOD[:5], seekable=False))
    assert info.value.kind == "HeaderTooSmall"


def test_object_without_seekable_method() -> None:
    class Minimal:
        def __init__(self) -> None:
            self._inner = io.BytesIO(GOOD)

        def read(self, size: int = -1) -> bytes:
            return self._inner.read(size)

    assert read_header(Minimal()).file_size is None


def test_stream_that_shrank_after_its_size_was_taken() -> None:
    class Liar(CountingReader):
        def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
            position = super().seek(offset, whence)
            return position + 100 if whence == io.SEEK_END else position

    with pytest.raises(HeaderError) as info:
        read_header(Liar(GOOD[:30]))
    assert info.value.kind == "InvalidHeaderLength"


def test_huge_prefix_on_an_unseekable_stream_reads_in_bounded_chunks() -> None:
    # Limit raised far above the stream: read() is never asked for the claimed size at once.
    asked: list[int] = []

    class Recorder(CountingReader):
        def read(self, size: int = -1) -> bytes:
            asked.append(size)
            return super().read(size)  # type: ignore[no-any-return]

    data = (10**12).to_bytes(8, "little") + b"{}"
    with pytest.raises(HeaderError) as info:
        read_header(Recorder(data, seekable=False), max_header_size=10**13)
    assert info.value.kind == "InvalidHeaderLength"
    assert max(asked) <= 16 * 2**20


def test_text_mode_file_is_a_type_error(tmp_path: Path) -> None:
    path = tmp_path / "f.safetensors"
    path.write_bytes(GOOD)
    with path.open(encoding="latin-1") as file, pytest.raises(TypeError, match="binary"):
        read_header(file)  # type: ignore[arg-type]


def test_unsupported_source_is_a_type_error() -> None:
    with pytest.raises(
        TypeError, match="path, a URL, a bytes-like object, a binary file object or a"
    ):
        read_header(42)  # type: ignore[arg-type]


def _long_header_file(tensors: int = 600) -> bytes:
    """A valid file whose header is longer than the first read of a regular file (16 KiB)."""
    header = {f"layer.{i}.weight": tensor("F32", [2], 8 * i, 8 * i + 8) for i in range(tensors)}
    return build(header, 8 * tensors, pad=True)


def test_a_header_longer_than_the_first_read(tmp_path: Path) -> None:
    data = _long_header_file()
    assert int.from_bytes(data[:8], "little") > _local.FILE_FIRST_READ
    path = tmp_path / "long.safetensors"
    path.write_bytes(data)
    expected = parse_header(data, file_size=len(data))
    assert read_header(path) == expected
    # Where os.pread is missing (Windows), or reads short (a file truncated meanwhile), the
    # rest is read as from a stream: the same header.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_local, "_pread", None)
        assert read_header(path) == expected
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_local, "_pread", lambda descriptor, count, offset: data[: count - 1])
        assert read_header(path) == expected


def test_a_long_header_past_the_file_or_the_limit(tmp_path: Path) -> None:
    data = _long_header_file()
    header_size = int.from_bytes(data[:8], "little")
    path = tmp_path / "cut.safetensors"
    path.write_bytes(data[: 8 + header_size - 1])  # ends inside the header
    with pytest.raises(HeaderError) as info:
        read_header(path)
    assert info.value.kind == "InvalidHeaderLength"
    path.write_bytes(data)
    with pytest.raises(HeaderError) as info:
        read_header(path, max_header_size=header_size - 1)
    assert info.value.kind == "HeaderTooLarge"


def test_missing_path_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_header(tmp_path / "missing.safetensors")


def test_path_errors_match_bytes_errors(tmp_path: Path) -> None:
    cases = [
        b"",
        b"1234567",
        (10**9).to_bytes(8, "little"),
        (100).to_bytes(8, "little") + b"{}",
        GOOD[:-1],
        GOOD + b"x",
    ]
    for index, data in enumerate(cases):
        path = tmp_path / f"{index}.safetensors"
        path.write_bytes(data)
        kinds = []
        for source in (path, data, io.BytesIO(data)):
            with pytest.raises(HeaderError) as info:
                read_header(source)
            kinds.append(info.value.kind)
        assert len(set(kinds)) == 1, (data, kinds)


def test_file_like_without_seekable_but_with_seek() -> None:
    class Old:
        def __init__(self) -> None:
            self._inner = io.BytesIO(GOOD + b"trailing")

        def read(self, size: int = -1) -> bytes:
            return self._inner.read(size)

        def seek(self, offset: int, whence: int = 0) -> int:
            return self._inner.seek(offset, whence)

    with pytest.raises(HeaderError) as info:
        read_header(Old())
    assert info.value.kind == "MetadataIncompleteBuffer"


# --- pipes and FIFOs named by a path: streams, not empty files --------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")
def test_a_fifo_path_is_read_as_a_stream(tmp_path: Path) -> None:
    data = build({"a": tensor("U8", [3], 0, 3)}, b"xyz")
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as end:
            end.write(data)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        header = read_header(fifo)
    finally:
        writer.join(timeout=10)
    assert header.file_size is None  # a stream has no size: the coverage rule is skipped
    assert header.tensors == read_header(data).tensors


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")
def test_a_fifo_opened_with_a_header_given_is_read_in_order(tmp_path: Path) -> None:
    # open_file(fifo, header=h): nothing is read until the data is; the header's bytes are
    # then compared, from the one descriptor the data is read from (never a pread of a pipe).
    from safetensors_header import open_file

    data = build({"a": tensor("U8", [3], 0, 3)}, b"xyz")
    copy, fifo = tmp_path / "copy.safetensors", tmp_path / "pipe.safetensors"
    copy.write_bytes(data)
    os.mkfifo(fifo)

    def write() -> None:
        try:
            with open(fifo, "wb") as end:
                end.write(data)
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        file = open_file(fifo, header=read_header(copy))
        assert bytes(file.read_tensors(list(file.header.tensors.values()))["a"]) == b"xyz"
    finally:
        writer.join(timeout=10)
    assert not writer.is_alive()


_QUICK_WRITER = """
import os, sys, threading, time
from safetensors_header import open_file, read_header

fifo, data = sys.argv[1], bytes.fromhex(sys.argv[2])
fstat = os.fstat


def slow_fstat(descriptor):  # the reader is slow between opening and reading: the writer has
    time.sleep(0.3)          # written its bytes and closed its end by then
    return fstat(descriptor)


os.fstat = slow_fstat


def write():
    with open(fifo, "wb") as end:
        end.write(data)


for read in (read_header, lambda path: open_file(path).header):
    writer = threading.Thread(target=write)
    writer.start()
    print(sorted(read(fifo).tensors))
    writer.join()
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")
def test_a_fifo_whose_writer_is_quick_is_read_from_the_one_opening(tmp_path: Path) -> None:
    # Opened a second time, the FIFO would wait for a writer that has written and gone: a
    # hang (under load it happened in CI). In a subprocess, so that a hang is its timeout.
    fifo = tmp_path / "quick.safetensors"
    os.mkfifo(fifo)
    data = build({"a": tensor("U8", [3], 0, 3)}, b"xyz")
    done = subprocess.run(
        [sys.executable, "-c", _QUICK_WRITER, str(fifo), data.hex()],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['a']", "['a']"]


@pytest.mark.skipif(sys.platform == "win32", reason="needs /dev/stdin")
def test_dev_stdin_fed_by_a_pipe_is_read_as_a_stream() -> None:
    data = build({"a": tensor("U8", [3], 0, 3)}, b"xyz")
    code = "from safetensors_header import read_header; print(read_header('/dev/stdin'))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=data,
        capture_output=True,
        timeout=30,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip() == "<Header 1 tensor, header_size=53, file_size=unknown>"
