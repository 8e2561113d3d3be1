"""Shared test helpers: build files byte by byte, and ask the reference for its verdict.

Imported as ``from helpers import ...`` (pytest puts tests/ on the path); fixtures and hooks,
if any, belong in conftest.py.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# The reference's error Display strings (safetensors/src/tensor.rs) -> its variant names.
_REFERENCE_MESSAGES = {
    "header too small": "HeaderTooSmall",
    "header too large": "HeaderTooLarge",
    "invalid header length": "InvalidHeaderLength",
    "invalid UTF-8 in header": "InvalidHeader",
    "invalid JSON in header": "InvalidHeaderDeserialization",
    "invalid offset for tensor": "InvalidOffset",
    "overflow computing buffer size": "ValidationOverflow",
    "The slice is slicing for subbytes": "MisalignedSlice",
    "invalid shape, data type, or offset for tensor": "TensorInvalidInfo",
    "incomplete metadata, file not fully covered": "MetadataIncompleteBuffer",
}


# The reference writer's dtype names (safetensors.TensorSpec), for every dtype it can write:
# all but F6_E2M3 and F6_E3M2.
REFERENCE_WRITER_DTYPES = {
    "BOOL": "bool",
    "F4": "float4_e2m1fn_x2",
    "U8": "uint8",
    "I8": "int8",
    "F8_E5M2": "float8_e5m2",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E8M0": "float8_e8m0fnu",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "I16": "int16",
    "U16": "uint16",
    "F16": "float16",
    "BF16": "bfloat16",
    "I32": "int32",
    "U32": "uint32",
    "F32": "float32",
    "C64": "complex64",
    "F64": "float64",
    "I64": "int64",
    "U64": "uint64",
}


def run_child(
    code: str,
    *,
    timeout: float = 30,
    env: dict[str, str] | None = None,
    flags: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """Run `code` (dedented) in a fresh interpreter that imports this checkout: a hang is its
    timeout, a crash its exit status. `env` replaces this process's environment; `flags` are
    the interpreter's (``("-S",)``: no site-packages' start-up)."""
    root = str(Path(__file__).resolve().parent.parent)
    return subprocess.run(
        [sys.executable, *flags, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**(os.environ if env is None else env), "PYTHONPATH": root},
        check=False,
    )


#: Code for a child (`run_child`, before the child's own): ``feed(path, content)`` makes a
#: FIFO at `path` and writes `content` into it from a thread, which it returns (to join); a
#: reader that stops before the end is no error of the writer's.
FEED_A_FIFO = """
import os, threading


def feed(path, content):
    os.mkfifo(path)

    def write():
        try:
            with open(path, "wb") as pipe:
                pipe.write(content)
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=write)
    writer.start()
    return writer
"""


def untraced_environment(**changes: str) -> dict[str, str]:
    """This process's environment for a child that coverage must not trace (a stress test's
    work, or pytest collecting tests): what coverage's subprocess patch passes on, left out."""
    env = {name: value for name, value in os.environ.items() if name != "COVERAGE_PROCESS_CONFIG"}
    return {**env, **changes}


def bounded(max_examples: int) -> settings:
    """Hypothesis settings for CI: bounded, derandomized, no example database."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
        ],
    )


def build(
    header: str | bytes | dict[str, Any],
    data: bytes | int = b"",
    *,
    n: int | None = None,
    pad: bool = False,
) -> bytes:
    """A file: the 8-byte little-endian length, the header, then the data buffer.

    `header` is JSON text (str or bytes, used as is) or an object to dump compactly.
    `data` is the data buffer, or its length (filled with zero bytes).
    `n` overrides the length prefix (for lying prefixes); `pad` pads with spaces to 8.
    """
    if isinstance(header, dict):
        header = json.dumps(header, separators=(",", ":"), ensure_ascii=False)
    body = header.encode() if isinstance(header, str) else header
    if pad:
        body += b" " * (-len(body) % 8)
    if isinstance(data, int):
        data = bytes(data)
    return struct.pack("<Q", len(body) if n is None else n) + body + data


def tensor(dtype: str, shape: list[int], begin: int, end: int) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


try:
    from safetensors import SafetensorError, deserialize

    HAVE_REFERENCE = True
except ImportError:  # pragma: no cover - CI installs it
    HAVE_REFERENCE = False


def reference_kind(data: bytes) -> str | None:
    """The reference's verdict on a whole file: None if it accepts, else its variant name."""
    if not HAVE_REFERENCE:  # pragma: no cover
        pytest.skip("the safetensors package is not installed")
    try:
        deserialize(data)
    except SafetensorError as error:
        message = str(error).split(": ", 1)[1]
        for prefix, kind in _REFERENCE_MESSAGES.items():
            if message.startswith(prefix):
                return kind
        raise AssertionError(f"unknown reference error: {error}") from None
    return None


class _Pairs(list):  # type: ignore[type-arg]
    pass


def has_tied_ranges(data: bytes) -> bool:
    """Whether two tensors (after last-wins) may name the same data_offsets.

    The reference then walks them in a random order, so its error kind may vary between runs
    (docs/format.md §6); accept or reject does not. Conservative: reads the header with
    Python's lenient json; what it cannot read has no ties that matter.
    """
    try:
        n = int.from_bytes(data[:8], "little")
        top = json.loads(data[8 : 8 + n].decode(), object_pairs_hook=_Pairs)
    except (ValueError, RecursionError):
        return False
    if type(top) is not _Pairs:
        return False
    entries = {key: value for key, value in top if key != "__metadata__"}
    seen = set()
    for entry in entries.values():
        if type(entry) is _Pairs:
            offsets = [value for key, value in entry if key == "data_offsets"]
        elif type(entry) is list and len(entry) == 3:
            offsets = [entry[2]]
        else:
            continue
        for value in offsets:
            token = repr(value)
            if token in seen:
                return True
            seen.add(token)
    return False


def reference_kinds(data: bytes) -> set[str | None]:
    """Every verdict the reference gives on the file: one, unless tensors tie.

    On tied ranges the reference walks the tensors in a random order and its kind may change
    from call to call (docs/format.md §6; two zero-size tensors on one offset are such a
    case): then it is asked 32 times, which misses one of two even outcomes once in 2^31.
    """
    first = reference_kind(data)
    if not has_tied_ranges(data):
        return {first}
    return {first, *(reference_kind(data) for _ in range(31))}


def reference_header(data: bytes) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
    """What the reference reads from an accepted file: name -> (dtype, shape, data). Skips
    the test (or, at a module's import, the module) without the safetensors package."""
    if not HAVE_REFERENCE:  # pragma: no cover
        pytest.skip("the safetensors package is not installed", allow_module_level=True)
    out = {}
    for name, info in deserialize(data):
        out[name] = (info["dtype"], tuple(info["shape"]), bytes(info["data"]))
    return out
