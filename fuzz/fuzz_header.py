"""Coverage-guided fuzzing of the header parser, differential against the reference.

    python fuzz/fuzz_header.py [atheris/libFuzzer flags] [CORPUS_DIR ...]
    python fuzz/fuzz_header.py -atheris_runs=1000000 fuzz/corpus   # a bounded run

Every input is a whole file. For each one the harness checks:

* only `HeaderError` escapes `read_header` / `parse_header` (anything else is a crash);
* bytes, a file object, `parse_header(data, file_size=len(data))` and a local file's reader
  (`parse_file_start` on the first 16 KiB, then on as many bytes as it asks for) give the
  same result, and every 64th input a real path as well;
* the fast JSON path and the exact one agree (same `Header`, or both step aside);
* where the `safetensors` package is installed, the verdict (accept, or the error kind) is
  the reference's. Two non-empty tensors on one byte range make the reference's choice of
  kind depend on its hash-map order (docs/format.md §6): the reference is then
  asked again, and any of its answers is accepted.

Mutations are structure-aware half of the time (see `mutate`): JSON-level edits of the
header (entry forms, numbers, strings and escapes, nesting, duplicate keys), the length
prefix and the data size; the other half are libFuzzer's byte mutations.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import random
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

import atheris

with atheris.instrument_imports():
    import safetensors_header
    from safetensors_header import HeaderError, parse_header, read_header
    from safetensors_header._core import parse as _parser
    from safetensors_header._core import rules as _rules

# The reference's verdict, as the tests ask for it (tests/conftest.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers import HAVE_REFERENCE, reference_kind

_LAYOUT_KINDS = {"InvalidOffset", "ValidationOverflow", "MisalignedSlice", "TensorInvalidInfo"}
_DTYPES = list(safetensors_header.DTYPE_BITS)
_SCRATCH = Path(
    tempfile.mkdtemp(prefix="fuzz-header-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
)
_inputs = itertools.count(1)


def verdict(call: Any) -> tuple[str | None, object]:
    try:
        return None, call()
    except HeaderError as error:
        return error.kind, None


def test_one_input(data: bytes) -> None:
    kind, header = verdict(lambda: read_header(data))
    for other in (
        verdict(lambda: read_header(io.BytesIO(data))),
        verdict(lambda: parse_header(data, file_size=len(data))),
        verdict(lambda: file_start(data)),
    ):
        assert other == (kind, header), (data, kind, other)
    if next(_inputs) % 64 == 0:
        path = _SCRATCH / "input.safetensors"
        path.write_bytes(data)
        assert verdict(lambda: read_header(path)) == (kind, header)
    check_paths_agree(data)
    if HAVE_REFERENCE:
        expected = reference_kind(data)
        if expected != kind:
            # Tensors on one range: the reference walks them in its hash map's order, which
            # varies from call to call (docs/format.md §6). Every order it could take is one
            # order of the tied entries in the JSON for us (we keep ties in header order).
            seen = {expected, *(reference_kind(data) for _ in range(16))}
            possible = tie_verdicts(data)
            assert possible is not None, (data, kind, seen)  # no tie: a real difference
            assert kind in possible, (data, kind, possible)
            assert seen <= possible, (data, seen, possible)


def file_start(data: bytes) -> object:
    """The header as `read_header` reads a regular file: its first 16 KiB, then the bytes
    `parse_file_start` asks for (always more than it had, at most the file)."""
    have = data[: 16 * 1024]
    while True:
        parsed = _parser.parse_file_start(have, len(data), safetensors_header.MAX_HEADER_SIZE)
        if not isinstance(parsed, int):
            return parsed
        assert len(have) < parsed <= len(data), (data, len(have), parsed)
        have = data[:parsed]


def tie_verdicts(data: bytes) -> set[str | None] | None:
    """Our verdicts over every order of the entries that share a (begin, end); None if none do.

    Only for files whose JSON reads (it then only reaches the layout checks), with at most
    720 orders to try.
    """
    size = int.from_bytes(data[:8], "little")
    try:
        top = json.loads(data[8 : 8 + size])
        entries = [(k, v) for k, v in top.items() if k != "__metadata__"]
        span = {k: tuple(v["data_offsets"] if isinstance(v, dict) else v[2]) for k, v in entries}
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError):
        return None  # not a file whose verdict is a layout kind
    metadata = {k: v for k, v in top.items() if k == "__metadata__"}
    groups: dict[tuple[int, ...], list[int]] = {}
    for position, (name, _) in enumerate(entries):
        groups.setdefault(span[name], []).append(position)
    tied = [members for members in groups.values() if len(members) > 1]
    if not tied:
        return None
    orders = list(itertools.product(*(itertools.permutations(members) for members in tied)))
    if len(orders) > 720:
        return _LAYOUT_KINDS | {None}  # too many to try: any layout kind is possible
    kinds: set[str | None] = set()
    for choice in orders:
        placed = list(range(len(entries)))
        for members, permuted in zip(tied, choice, strict=True):
            for slot, source in zip(members, permuted, strict=True):
                placed[slot] = source
        body = json.dumps({**metadata, **dict(entries[i] for i in placed)}).encode()
        body += b" " * (-len(body) % 8)  # keep N a multiple of 8 only if it was; size adjusts
        rest = data[8 + size :]
        kinds.add(
            verdict(
                lambda body=body, rest=rest: parse_header(
                    struct.pack("<Q", len(body)) + body + rest, file_size=8 + len(body) + len(rest)
                )
            )[0]
        )
    return kinds


def check_paths_agree(data: bytes) -> None:
    """Every fast reader of the parser's table (`READERS`), at any size, where it answers,
    says what the rule set (`exact`) says: their contract."""
    if len(data) < 8:
        return
    size = int.from_bytes(data[:8], "little")
    if size > len(data) - 8:
        return
    try:
        text = data[8 : 8 + size].decode()
    except UnicodeDecodeError:
        return
    answers = {}
    for reader in _parser.READERS:  # every one, whatever the text's size
        try:
            if reader.uses_json:
                _rules.reject_deep_nesting(text)  # (as the table's dispatch does first)
            found = reader.read(text)
        except HeaderError:  # the nesting: the rule set's verdict, not a reader's
            found = None
        if found is not None:
            answers[reader.name] = found
    if not answers:
        return
    try:
        exact = _parser.exact(text)
    except HeaderError as error:  # pragma: no cover - a finding
        raise AssertionError(
            f"a fast reader ({', '.join(answers)}) accepted what the rule set rejects: {error}"
        ) from None
    for name, found in answers.items():
        assert found == exact, (data, name, found, exact)


# --- structure-aware mutations --------------------------------------------------------

_TOKENS = [
    "-0", "0", "1", "-1", "1.0", "1e400", "-1e400", "1e-400", "NaN", "Infinity", "true", "null",
    "1.7976931348623158e308",
    "17976931348623158e292",
    "18446744073709551615", "18446744073709551616", "9223372036854775808", "01", "+1", ".5",
    '"\\ud800"', '"\\udc00"', '"\\ud83d\\ude00"', '"\\u0000"', '"\\u005f_metadata__"', '"a\\x"',
    "[]", "{}", '{"F32":null}', '["F32",[1],[0,4]]', "[" * 130 + "]" * 130, '"\x01"',
    "false", "1E0", "4.0", "2e0", "-Infinity", '"e"', '"\\u0065"', '"\\u00e9"', '"\\\\u00e9"',
]  # fmt: skip


def mutate(data: bytes, max_size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    if rng.random() < 0.5 or len(data) < 8:
        return atheris.Mutate(data, max_size)
    size = int.from_bytes(data[:8], "little")
    body, rest = data[8 : 8 + size], data[8 + size :]
    choice = rng.randrange(8)
    if choice == 0:  # the length prefix
        size = rng.choice(
            [size - 1, size + 1, 0, 10**8, 10**8 + 1, 2**64 - 1, len(body) + len(rest)]
        )
        return (size % 2**64).to_bytes(8, "little") + body + rest
    if choice == 1:  # the data size
        rest = (
            rest[: rng.randrange(len(rest) + 1)]
            if rest and rng.random() < 0.5
            else rest + b"\0" * rng.randrange(1, 9)
        )
        return data[:8] + body + rest
    try:
        top = json.loads(body)
    except (ValueError, RecursionError):
        top = None
    if choice == 3:  # one character of JSON's alphabet inserted or replaced anywhere
        text = body.decode("utf-8", "replace")
        at = rng.randrange(len(text) + 1)
        char = rng.choice(' \t\n\r,:[]{}"0123456789-.enul\\\x00\x1f')
        return frame((text[:at] + char + text[at + rng.randrange(2) :]).encode(), rest)
    if choice == 2 or not isinstance(top, dict):  # a token spliced into the text
        text = body.decode("utf-8", "replace")
        at = rng.randrange(len(text) + 1)
        cut = rng.randrange(0, 4)
        text = text[:at] + rng.choice(_TOKENS) + text[at + cut :]
        return frame(text.encode(), rest)
    return frame(
        mutate_object(top, rng).encode("utf-8", "surrogatepass"), rest, pad=rng.random() < 0.5
    )


def mutate_object(top: dict[str, Any], rng: random.Random) -> str:
    names = [key for key in top if key != "__metadata__"]
    name = rng.choice(names) if names else "t"
    entry = top.get(name)
    action = rng.randrange(10)
    if action == 0 and isinstance(entry, dict):  # the array form, or the map-form dtype
        if rng.random() < 0.5:
            top[name] = [entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")]
        else:
            entry["dtype"] = {str(entry.get("dtype")): None}
    elif action == 1 and isinstance(entry, dict):
        entry["dtype"] = rng.choice([*_DTYPES, "f32", "F8", ""])
    elif action == 2 and isinstance(entry, dict):
        entry["shape"] = [
            rng.choice([0, 1, 2, 3, 2**32, 2**64 - 1]) for _ in range(rng.randrange(4))
        ]
    elif action == 3 and isinstance(entry, dict):
        begin = rng.choice([0, 1, 4, 8, 2**61, 2**64 - 1])
        entry["data_offsets"] = [begin, begin + rng.choice([0, 1, 4, 8, -1])]
    elif action == 4 and isinstance(entry, dict):
        entry[rng.choice(["extra", "dtype", "shape"])] = rng.choice([1, "x", None, [1], {"a": 1}])
        del entry[rng.choice(list(entry))]
    elif action == 5:
        top["__metadata__"] = rng.choice([None, {}, {"a": "b"}, {"a": 1}, [], "x"])
    elif action == 6 and names:  # a second tensor on the same or the next range
        other = rng.choice(names)
        top[other + rng.choice(["", "2"])] = json.loads(json.dumps(top[other]))
    elif action == 7 and names:
        del top[name]
    if rng.random() < 0.3:  # the fields of every entry in another order
        fields = ["dtype", "shape", "data_offsets"]
        rng.shuffle(fields)
        for key, value in top.items():
            if key != "__metadata__" and isinstance(value, dict):
                top[key] = {f: value[f] for f in fields if f in value} | value
    text = json.dumps(
        top,
        separators=rng.choice([(",", ":"), (", ", ": "), (",\n", ":\t")]),
        ensure_ascii=rng.random() < 0.3,
        indent=rng.choice([None, None, None, 1, "\t"]),
    )
    if action == 8 and names:  # a duplicate key, as text
        key = json.dumps(rng.choice([*names, "__metadata__"]))
        text = text[:-1] + ("," if len(top) else "") + key + ":" + rng.choice(_TOKENS) + "}"
    if action == 9:  # whitespace and padding
        text = (
            rng.choice([" ", "\t", "\n", "\r", "\x0c", "\ufeff", ""])
            + text
            + rng.choice([" ", "\n", "\0", "x"])
        )
    return text


def frame(body: bytes, rest: bytes, *, pad: bool = False) -> bytes:
    if pad:
        body += b" " * (-len(body) % 8)
    return struct.pack("<Q", len(body)) + body + rest


def main() -> None:
    atheris.Setup(sys.argv, test_one_input, custom_mutator=mutate)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
