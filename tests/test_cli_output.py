"""The command line's output as a person meets it (issue 18), each in a subprocess.

Pipes closed early (point 2), a terminal's width (3), one JSON convention (10), and output
hygiene (11): hostile names and metadata, hostile server replies, ASCII and latin-1 stdout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import build, tensor
from test_cli import TINY, run

COMMAND = [sys.executable, "-m", "safetensors_header"]


def environment(**changes: str | None) -> dict[str, str]:
    """This process's environment (coverage's variables too) with `changes`; None removes."""
    env = dict(os.environ)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def assert_quiet(stderr: str | bytes) -> None:
    text = stderr if isinstance(stderr, str) else stderr.decode("utf-8", "replace")
    for word in ("Traceback", "BrokenPipeError", "Exception ignored", "UnicodeEncodeError"):
        assert word not in text, text


# --- point 2: a reader that goes away ---------------------------------------------------------


def closed_early(*args: str, keep: int = 10) -> tuple[int, bytes, bytes]:
    """Run the CLI, read `keep` bytes of its stdout, close the pipe; (status, head, stderr)."""
    process = subprocess.Popen(
        [*COMMAND, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    assert process.stdout is not None
    assert process.stderr is not None
    head = process.stdout.read(keep)
    process.stdout.close()  # the next write past the pipe's buffer fails with EPIPE
    stderr = process.stderr.read()
    process.stderr.close()
    return process.wait(timeout=60), head, stderr


@pytest.fixture(scope="module")
def invalid(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("bad") / "bad.safetensors"
    path.write_bytes(build({"a": tensor("F32", [2], 0, 4)}, 4))
    return str(path)


# 2,000 lines of about 60 bytes: more than a pipe (64 KiB) and stdout's buffer (8 KiB) hold,
# so the CLI is still writing when the pipe closes.
MANY = [TINY] * 2000


@pytest.mark.parametrize(
    ("where", "status"),
    [
        pytest.param("first", 1, id="invalid-file-printed-before-the-pipe-closes"),
        pytest.param("last", 1, id="invalid-file-checked-after-the-pipe-closed"),
        pytest.param(None, 0, id="all-valid"),
    ],
)
def test_validate_status_survives_a_closed_pipe(
    invalid: str, where: str | None, status: int
) -> None:
    sources = {"first": [invalid, *MANY], "last": [*MANY, invalid], None: MANY}[where]
    code, head, stderr = closed_early("validate", *sources)
    assert code == status
    assert len(head) == 10
    assert_quiet(stderr)
    assert stderr == b""


def test_validate_json_status_survives_a_closed_pipe(invalid: str) -> None:
    code, head, stderr = closed_early("validate", "--json", *MANY, invalid)
    assert (code, head, stderr) == (1, b'{"path": "', b"")


@pytest.fixture(scope="module")
def big_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-shard checkpoint of 3,000 tensors: its table is larger than a pipe holds."""
    from test_checkpoint import write

    folder = tmp_path_factory.mktemp("big")
    shards = {
        f"model-0000{k}-of-00002.safetensors": {
            f"encoder.layer.{k * 1500 + i}.attention.self.query.weight": ("F32", [2, 2])
            for i in range(1500)
        }
        for k in (1, 2)
    }
    write(folder, shards=shards, metadata={"total_size": 3000 * 16})
    return folder


def test_inspect_a_checkpoint_closed_early(big_checkpoint: Path, tmp_path: Path) -> None:
    code, head, stderr = closed_early("inspect", str(big_checkpoint))
    assert (code, stderr) == (0, b"")
    assert head == str(big_checkpoint).encode()[:10]
    # The sources after the pipe closed are still read: a missing one still fails the run.
    code, _, stderr = closed_early("inspect", str(big_checkpoint), str(tmp_path / "missing"))
    assert code == 1
    assert_quiet(stderr)
    assert b"missing: FileNotFoundError" in stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_inspect_dir_piped_to_head(big_checkpoint: Path) -> None:
    # As the issue ran it: `inspect DIR | head -1` in a shell.
    script = f'"$@" inspect {big_checkpoint} | head -1; echo "status=${{PIPESTATUS[0]}}"'
    result = subprocess.run(
        ["bash", "-c", script, "bash", *COMMAND],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.stdout.splitlines() == [f"{big_checkpoint}: 2 files, 3,000 tensors", "status=0"]
    assert result.stderr == ""


# --- point 3: a terminal -----------------------------------------------------------------------


def on_terminal(
    *args: str,
    columns: int,
    env_columns: str | None = None,
    both: bool = False,
    check: bool = True,
    exits: tuple[int, ...] = (0,),
    **env: str | None,
) -> str:
    """The CLI's stdout on a pseudo-terminal `columns` wide (COLUMNS set to `env_columns`;
    `env` changes the environment further); with `both`, its stderr on it too. With `check`,
    its exit status must be one of `exits`."""
    pty = pytest.importorskip("pty")
    import fcntl
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    process = subprocess.Popen(
        [*COMMAND, *args],
        stdout=follower,
        stderr=follower if both else subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=environment(COLUMNS=env_columns, PYTHONIOENCODING="utf-8", **env),
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    stderr = b""
    if process.stderr is not None:
        stderr = process.stderr.read()
        process.stderr.close()
    status = process.wait(timeout=60)
    assert status in exits or not check, stderr
    return b"".join(chunks).decode().replace("\r\n", "\n")


# In the order people count (layer 2 before layer 10), which a terminal shows.
LAYER_NAMES = [
    f"encoder.layer.{i}.attention.{part}.weight"
    for i in range(12)
    for part in ("output.dense", "self.key", "self.query")
]


@pytest.fixture(scope="module")
def long_names(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from test_checkpoint import write

    folder = tmp_path_factory.mktemp("long")
    half = len(LAYER_NAMES) // 2
    shards = {
        "model-00001-of-00002.safetensors": {n: ("F32", [2, 2]) for n in LAYER_NAMES[:half]},
        "model-00002-of-00002.safetensors": {n: ("F32", [2, 2]) for n in LAYER_NAMES[half:]},
    }
    write(folder, shards=shards, metadata={"total_size": len(LAYER_NAMES) * 16})
    return folder


def rows_of(text: str) -> list[list[str]]:
    """The tensor table's rows, split into cells (at runs of two or more spaces)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("name ")) + 1
    rows = []
    for line in lines[start:]:
        if line.startswith("total:"):
            break
        rows.append(re.split(r" {2,}", line))
    return rows


@pytest.mark.parametrize("width", [50, 60, 80])
def test_long_names_keep_their_layer_and_module_on_a_terminal(long_names: Path, width: int) -> None:
    text = on_terminal("inspect", str(long_names), columns=200, env_columns=str(width))
    rows = rows_of(text)
    assert len(rows) == len(LAYER_NAMES)
    assert max(len(line) for line in text.splitlines()) <= width
    for row in rows:
        shown = row[0]
        # Read with each ellipsis as any run of characters, the cut name is one tensor's.
        pattern = re.compile(".*".join(map(re.escape, shown.split("…"))))
        [name] = [name for name in LAYER_NAMES if pattern.fullmatch(name)]
        layer = name.split(".")[2]
        assert re.search(rf"layer\.{layer}[.…]", shown)  # the layer's number, with its word
        assert shown.endswith(".".join(name.split(".")[-2:]))  # query.weight, dense.weight
    if width == 80:
        assert [row[0] for row in rows] == LAYER_NAMES  # room enough: nothing cut


def test_a_checkpoint_s_files_are_numbered_on_a_terminal(long_names: Path) -> None:
    text = on_terminal("inspect", str(long_names), columns=80)
    lines = text.splitlines()
    legend = lines.index("file 1: model-00001-of-00002.safetensors")
    assert lines[legend + 1 : legend + 3] == [
        "file 2: model-00002-of-00002.safetensors",
        "dtype: F32, every tensor",
    ]
    assert lines[legend + 3].split() == ["name", "shape", "file", "size"]
    files = [row[2] for row in rows_of(text)]
    half = len(LAYER_NAMES) // 2
    assert files == ["1"] * half + ["2"] * (len(LAYER_NAMES) - half)
    # Piped, and with --wide, each row has its file's name.
    for wide in (
        on_terminal("inspect", "--wide", str(long_names), columns=80),
        _piped(str(long_names)),
    ):
        assert "file 1:" not in wide
        assert {row[3] for row in rows_of(wide)} == {
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
        }


def _piped(*args: str) -> str:
    return subprocess.run(
        [*COMMAND, "inspect", *args],
        capture_output=True,
        text=True,
        env=environment(COLUMNS="40"),
        timeout=60,
        check=True,
    ).stdout


def test_width_from_the_terminal_itself(long_names: Path) -> None:
    text = on_terminal("inspect", str(long_names), columns=64)
    widths = [len(line) for line in text.splitlines()]
    assert max(widths) <= 64
    assert max(len(line) for line in text.splitlines() if "…" in line) >= 60
    assert "…" in text


def test_a_terminal_wide_enough_cuts_nothing(long_names: Path) -> None:
    text = on_terminal("inspect", str(long_names), columns=200)
    assert [row[0] for row in rows_of(text)] == LAYER_NAMES
    assert "…" not in text


def test_piped_output_is_never_cut(long_names: Path) -> None:
    result = subprocess.run(
        [*COMMAND, "inspect", str(long_names)],
        capture_output=True,
        text=True,
        env=environment(COLUMNS="40"),
        timeout=60,
        check=False,
    )
    assert [row[0] for row in rows_of(result.stdout)] == LAYER_NAMES


# --- point 10: JSON Lines, everywhere ------------------------------------------------------------

ERROR_KEYS = {"kind", "message", "hint", "tensor", "offset"}


def test_every_json_output_is_one_object_per_source(invalid: str, tmp_path: Path) -> None:
    from test_checkpoint import write

    write(tmp_path)
    missing = str(tmp_path / "missing.safetensors")
    for command in ("inspect", "validate"):
        result = run(command, "--json", TINY, invalid, str(tmp_path), missing)
        assert result.returncode == 1
        lines = result.stdout.splitlines()
        documents = [json.loads(line) for line in lines]  # JSON Lines: one object per line
        assert [d["path"] for d in documents] == [TINY, invalid, str(tmp_path), missing]
        errors = [d["error"] for d in documents]
        assert (errors[0], errors[2]) == (None, None)
        assert errors[1]["kind"] == "TensorInvalidInfo"
        assert errors[1]["tensor"] == "a"
        assert errors[3]["kind"] == "FileNotFoundError"
        assert set(errors[1]) == set(errors[3]) == ERROR_KEYS


def test_one_source_is_one_json_document() -> None:
    # So `| python -m json.tool` works for one source, and `--json-lines` for several.
    for args in (["inspect", "--json", TINY], ["validate", "--json", TINY]):
        assert isinstance(json.loads(run(*args).stdout), dict)
    tool = subprocess.run(
        [sys.executable, "-m", "json.tool", "--json-lines"],
        input=run("validate", "--json", TINY, TINY).stdout,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert tool.stdout.count('"valid": true') == 2


# --- point 11: hostile text, any encoding -------------------------------------------------------

HOSTILE = [
    "\x1b]0;PWNED\x07\x1b[2J",  # sets the window title, clears the screen
    "csi\x9b31mred",  # C1 CSI
    "nel\x85next",  # C1 next line
    "del\x7fete",
    "bidi\u202eevil\u2066x\u2069",  # right-to-left override, isolates
    "line\u2028sep\u2029par",
    "tab\tnew\nline\rnul\x00",
    "café",
    "emoji😀",
]
# Characters that drive a terminal, or reorder or break what it shows.
FORBIDDEN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "hostile.safetensors"
    header: dict[str, object] = {
        name: tensor("U8", [1], i, i + 1) for i, name in enumerate(HOSTILE)
    }
    header["__metadata__"] = {f"key{name}": f"value{name}" for name in HOSTILE}
    path.write_bytes(build(header, len(HOSTILE)))
    return path


def assert_clean(output: bytes, encoding: str) -> str:
    text = output.decode(encoding)
    assert FORBIDDEN.search(text) is None, FORBIDDEN.search(text)
    return text


@pytest.mark.parametrize("encoding", ["utf-8", "ascii", "latin-1"])
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["inspect"], id="inspect"),
        pytest.param(["validate", "--strict"], id="validate-strict"),
        pytest.param(["diff", TINY], id="diff"),
    ],
)
def test_hostile_names_are_escaped(hostile: Path, args: list[str], encoding: str) -> None:
    result = subprocess.run(
        [*COMMAND, *args, str(hostile)],
        capture_output=True,
        env=environment(PYTHONIOENCODING=encoding),
        timeout=60,
        check=False,
    )
    assert_quiet(result.stderr)
    assert result.returncode == (0 if args[0] == "inspect" else 1)
    text = assert_clean(result.stdout, encoding)
    assert "\\x1b]0;PWNED\\x07\\x1b[2J" in text
    assert "tab\\tnew\\nline\\rnul\\x00" in text
    if args[0] == "validate":  # the findings name only the names with C0 controls or DEL
        assert "ControlCharacterInName: tensor name 'del\\x7fete'" in text
        return
    assert "csi\\x9b31mred" in text
    assert "nel\\x85next" in text
    assert "bidi\\u202eevil\\u2066x\\u2069" in text
    assert "line\\u2028sep\\u2029par" in text
    # What the output can show is shown; the rest is escaped, never an error.
    assert ("café" if encoding != "ascii" else "caf\\xe9") in text
    assert ("emoji😀" if encoding == "utf-8" else "emoji\\U0001f600") in text


@pytest.mark.parametrize(
    ("command", "encoding"),
    [
        ("inspect", "utf-8"),
        ("inspect", "latin-1"),
        ("inspect", "ascii"),
        ("validate", "ascii"),
        ("diff", "ascii"),
    ],
)
def test_hostile_json_is_clean_and_exact(hostile: Path, command: str, encoding: str) -> None:
    args = [command, "--json", *([TINY] if command == "diff" else []), str(hostile)]
    result = subprocess.run(
        [*COMMAND, *args],
        capture_output=True,
        env=environment(PYTHONIOENCODING=encoding),
        timeout=60,
        check=False,
    )
    assert_quiet(result.stderr)
    # Valid UTF-8 (as JSON must be) whatever the output's encoding, and nothing raw in it...
    document = json.loads(assert_clean(result.stdout, "utf-8"))
    if encoding != "utf-8":
        assert result.stdout.isascii()
    # ...yet every name comes back exactly.
    if command == "inspect":
        assert [t["name"] for t in document["tensors"]] == HOSTILE
        assert set(document["metadata"]) == {f"key{name}" for name in HOSTILE}
    elif command == "diff":
        assert [t["name"] for t in document["added"]] == HOSTILE
    else:
        assert document["valid"] is True


@pytest.mark.parametrize("encoding", ["utf-8", "ascii", "latin-1"])
def test_a_file_name_that_is_not_utf8(tmp_path: Path, encoding: str) -> None:
    if sys.platform in ("darwin", "win32"):
        pytest.skip("file names are Unicode there")
    name = os.fsencode(tmp_path) + b"/caf\xe9\xff\x1b[2J.safetensors"
    with open(name, "wb") as file:
        file.write(Path(TINY).read_bytes())
    commands = (["inspect"], ["inspect", "--json"], ["validate"], ["diff", TINY])
    for args in commands if encoding == "ascii" else commands[:2]:
        result = subprocess.run(
            [*COMMAND, *args, name],
            capture_output=True,
            env=environment(PYTHONIOENCODING=encoding),
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert_quiet(result.stderr)
        text = assert_clean(result.stdout, encoding)
        if args[-1] == "--json":
            assert json.loads(text)["path"].endswith("/caf\udce9\udcff\x1b[2J.safetensors")
        else:
            assert "caf\\xe9\\xff\\x1b[2J.safetensors" in text  # the bytes, as repr() shows them


# Replies of a hostile server: a status line that sets the window title and clears the screen
# (and a C1 CSI), and a Content-Encoding that does the same.
REPLIES = {
    b"/status": b"HTTP/1.1 299 \x1b]0;PWNED\x07\x1b[2J\x9b31m\r\nContent-Length: 0\r\n\r\n",
    b"/encoding": b"HTTP/1.1 206 Partial Content\r\nContent-Encoding: x\x1b[2J\xe2\x80\xae\r\n"
    b"Content-Range: bytes 0-7/8\r\nContent-Length: 8\r\n\r\n12345678",
}


@pytest.fixture(scope="module")
def hostile_server() -> Iterator[str]:
    """A raw socket server on 127.0.0.1 that answers each path with its bytes of REPLIES."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return  # closed: the module's tests are done
            with connection:
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = connection.recv(4096)
                    if not chunk:
                        break
                    request += chunk
                path = request.split(b" ", 2)[1] if request.count(b" ") >= 2 else b""
                connection.sendall(REPLIES.get(path, b"HTTP/1.1 404 Not Found\r\n\r\n"))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


# Each command under one of the encodings (the escaping is the same code for all three).
COMMANDS = [
    pytest.param("utf-8", ["inspect", "{url}"], 1, id="inspect-utf-8"),
    pytest.param("ascii", ["validate", "{url}"], 1, id="validate-ascii"),
    pytest.param("latin-1", ["diff", "{url}", TINY], 2, id="diff-latin-1"),
]


@pytest.mark.parametrize(("encoding", "args", "status"), COMMANDS)
@pytest.mark.parametrize("path", ["/status", "/encoding"])
def test_hostile_server_replies_are_escaped(
    hostile_server: str, path: str, encoding: str, args: list[str], status: int
) -> None:
    url = hostile_server + path
    args = [arg.format(url=url) for arg in args]
    # How what the server sent is shown (the HTTP client escapes it in its messages too).
    if path == "/status":
        shown = "\\x1b]0;PWNED\\x07\\x1b[2J\\x9b31m"
    else:  # http.client reads headers as latin-1; the client lowers the value
        shown = "x\\x1b[2j\\xe2\\x80\\xae"
    result = subprocess.run(
        [*COMMAND, *args],
        capture_output=True,
        env=environment(PYTHONIOENCODING=encoding),
        timeout=60,
        check=False,
    )
    assert result.returncode == status
    assert_quiet(result.stderr)
    text = assert_clean(result.stdout + result.stderr, encoding)
    assert f"RemoteError: {url} " in text
    assert shown in text  # shown, escaped
    # --json: clean too, the same message.
    result = subprocess.run(
        [*COMMAND, args[0], "--json", *args[1:]],
        capture_output=True,
        env=environment(PYTHONIOENCODING=encoding),
        timeout=60,
        check=False,
    )
    assert result.returncode == status
    assert_clean(result.stderr, encoding)
    error = json.loads(assert_clean(result.stdout, "utf-8"))["error"]
    assert error["kind"] == "RemoteError"
    assert shown in error["message"]


@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "utf-8"])
def test_text_that_slipped_past_the_escaping_is_escaped_on_the_way_out(encoding: str) -> None:
    import io

    from safetensors_header._cli.output import Output as _Output

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding)
    out = _Output(stream)
    out.write("café \udcff ok\n")  # write() is given raw text: it must not raise
    stream.flush()
    written = raw.getvalue().decode(encoding)
    assert written.endswith(" ok\n")
    assert "\\udcff" in written


# --- names cut by their parts (the helpers, in this process) ---------------------------------


def test_a_dotted_name_loses_whole_parts_first() -> None:
    from safetensors_header._cli.columns import _dotted_cuts

    name = "model.layers.0.self_attn.o_proj.weight"
    assert list(_dotted_cuts(name, 38, "…")) == []  # it fits: nothing to cut
    assert list(_dotted_cuts(name, 33, "…")) == ["…layers.0.self_attn.o_proj.weight"]
    assert list(_dotted_cuts(name, 30, "…")) == [
        "…layers.0.…o_proj.weight",  # the run in the middle left out (after a number, a dot)
        "…layers.0.self_a…o_proj.weight",  # or cut short
        "…layers.0.…o_proj.weight",  # the fewest parts, the module's own name whole
    ]
    # Too narrow for the fewest parts and 4 characters of the module's own name: nothing.
    assert list(_dotted_cuts(name, 20, "…")) == []
    assert list(_dotted_cuts("lm_head.weight", 5, "…")) == []  # two parts: nothing to leave out
    deep = ".".join(["part"] * 17) + ".weight"
    assert list(_dotted_cuts(deep, 20, "…")) == []  # too many parts: cut as any text is


def test_a_cut_name_reads_as_its_own_only() -> None:
    from safetensors_header._cli.columns import _fits, distinct_cuts

    assert _fits(["", "layer.0.", "dense.weight"], "x.layer.0.intermediate.dense.weight")
    assert not _fits(["", "layer.1.", "query.weight"], "e.layer.10.attention.self.query.weight")
    assert not _fits(["a", "b"], "ab"[:1])  # shorter than its ends
    assert _fits(["whole"], "whole")
    assert not _fits(["whole"], "whole.weight")
    names = [
        "encoder.layer.0.attention.output.dense.weight",
        "encoder.layer.0.intermediate.dense.weight",
        "encoder.layer.0.output.dense.weight",
    ]
    shown = distinct_cuts(names, 30, "…")
    # "…layer.0.…dense.weight" would be all three's, "…layer.0.…output.dense.weight" two's:
    # each keeps what is its own.
    assert shown == [
        "…layer.0.a…output.dense.weight",
        "…layer.0.intermed…dense.weight",
        "…layer.0.output.dense.weight",
    ]


def test_names_in_the_order_people_count() -> None:
    from safetensors_header._cli.output import natural_key

    names = ["layers.10.w", "layers.2.w", "layers.1.w", "embed", "layers.02.w", "x" + "9" * 5000]
    assert sorted(names, key=natural_key) == [
        "embed",
        "layers.1.w",
        "layers.2.w",
        "layers.02.w",
        "layers.10.w",
        "x" + "9" * 5000,  # a number longer than int() takes, still in its place
    ]


def test_files_numbered_with_a_legend() -> None:
    from safetensors_header._cli.output import shard_numbers

    names = [f"model-{n:05d}-of-00005.safetensors" for n in range(1, 6)]
    numbers, legend = shard_numbers(names)
    assert numbers == {name: str(n) for n, name in enumerate(names, start=1)}
    assert legend == [f"files 1-5: {names[0]} to {names[-1]}"]
    # Not transformers' names in order: a line a file.
    odd = [*names[:3], "extra.safetensors"]
    assert shard_numbers(odd)[1] == [f"file {n}: {name}" for n, name in enumerate(odd, start=1)]
    swapped = [names[1], names[0], *names[2:]]
    assert len(shard_numbers(swapped)[1]) == 5


def test_hash_on_a_terminal_shows_short_digests_and_whole_ones_piped() -> None:
    piped = run("hash", TINY)
    assert piped.returncode == 0, piped.stderr
    whole = [line.split("  ", 1) for line in piped.stdout.splitlines()]
    assert all(len(digest) == 64 for digest, _ in whole)  # as sha256sum prints
    shown = on_terminal("hash", TINY, columns=80).splitlines()
    assert shown[-1] == "(digests cut to 16 hex digits: --full or a pipe shows them whole)"
    cut = [line.split("  ", 1) for line in shown[:-1]]
    assert [digest for digest, _ in cut] == [digest[:16] for digest, _ in whole]
    names = [name for _, name in cut]
    assert names[:-2] == [name for _, name in whole][:-2]  # the tensors' and the file's
    assert names[-2] == "(sha256 fingerprint of the 7 tensors)"
    assert names[-1] == f"(sha256 of the 7 tensor digests of {TINY})"
    # Every line fits 80 columns but the last, which names the SOURCE (here a long path).
    assert all(len(line) <= 80 for line in shown[:-2] if TINY not in line)
    full = on_terminal("hash", "--full", TINY, columns=80).splitlines()
    assert full == piped.stdout.splitlines()
