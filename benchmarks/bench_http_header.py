"""A header over loopback HTTP against one plain ``urllib`` GET of the same bytes, per call.

    python benchmarks/bench_http_header.py                  # this Python
    for v in 3.10 3.11 3.12 3.13; do python$v benchmarks/bench_http_header.py; done

The standard library only (any supported Python runs it from a checkout: the package is
imported from beside this folder). A loopback HTTP/1.1 server in this process serves one
file of a header of ``--tensors`` tensors (10: the parse is then a small part); each round
times, interleaved:

* ``read_header(url)``: a ranged GET of ``first_read`` bytes, checked, and the parse;
* ``urllib``: ``urlopen(Request(url, headers={"Range": "bytes=0-..."})).read()`` of the same
  bytes, nothing checked or parsed: what one call of any HTTP client costs here;
* ``parse``: `parse_header` of those bytes alone, for how much of the first is the parse.

The server keeps connections open (HTTP/1.1) with TCP_NODELAY, as nginx does; ``--nagle``
serves without it (Python's http.server as it comes), where a client on a kept connection
that delayed its ACKs would wait 40 ms a reply.

A TLS context made per call (Python 3.12 and later make one for every ``build_opener()``,
``http://`` too: about 20 ms) would show as a ratio far above 1. Target: ``read_header`` at
most 1.5x ``urllib``. Prints medians and ranges of the rounds, and the ratio of medians.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import platform
import re
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from safetensors_header import parse_header, read_header


def header_file(tensors: int) -> bytes:
    """A file of `tensors` small F16 tensors of Llama-like names: mostly header."""
    header = {
        f"model.layers.{i // 10}.block_{i % 10}.weight": {
            "dtype": "F16",
            "shape": [4],
            "data_offsets": [8 * i, 8 * i + 8],
        }
        for i in range(tensors)
    }
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + bytes(8 * tensors)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as nginx's tcp_nodelay (on by default): without it, a reply written as
    # two writes (its header lines, then its body) on a kept connection waits for the
    # client's delayed ACK of the first (40 ms on Linux).
    disable_nagle_algorithm = True
    data = b""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        data = self.data
        match = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        first, last = (int(match[1]), int(match[2])) if match else (0, len(data) - 1)
        last = min(last, len(data) - 1)
        self.send_response(206 if match else 200)
        if match:
            self.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
        self.send_header("Content-Length", str(last - first + 1))
        self.send_header("ETag", '"v1"')
        self.end_headers()
        self.wfile.write(data[first : last + 1])


def interleaved(
    candidates: dict[str, Callable[[], object]], rounds: int, calls: int
) -> dict[str, list[float]]:
    """Seconds a call of each candidate, one value a round: each is called once first (its
    imports, the first connection), then `rounds` rounds of `calls` calls of each in turn (a
    drift of the machine hits all alike)."""
    for work in candidates.values():
        work()
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, work in candidates.items():
            started = time.perf_counter()
            for _ in range(calls):
                work()
            times[name].append((time.perf_counter() - started) / calls)
    return times


def printed_medians(times: dict[str, list[float]], width: int) -> dict[str, float]:
    """Each candidate's median and range, printed in ms; the medians."""
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, values in times.items():
        print(
            f"  {name:{width}} median {medians[name] * 1e3:7.3f} ms"
            f"  (range {min(values) * 1e3:.3f}-{max(values) * 1e3:.3f})"
        )
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=50, help="calls of each per round")
    parser.add_argument("--tensors", type=int, default=10, help="in the header (10)")
    parser.add_argument(
        "--nagle", action="store_true", help="a server with Nagle's algorithm on (no TCP_NODELAY)"
    )
    args = parser.parse_args()
    _Handler.disable_nagle_algorithm = not args.nagle
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy"):
        os.environ.pop(name, None)

    _Handler.data = header_file(args.tensors)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/model.safetensors"
    first_read = 128 * 1024
    asked = f"bytes=0-{first_read - 1}"
    data = _Handler.data[:first_read]

    def ours() -> None:
        read_header(url)

    def plain() -> None:
        request = urllib.request.Request(url, headers={"Range": asked})
        with urllib.request.urlopen(request, timeout=10) as reply:
            reply.read()

    def parse() -> None:
        parse_header(data, file_size=len(_Handler.data))

    candidates = {"read_header": ours, "urllib": plain, "parse": parse}
    times = interleaved(candidates, args.rounds, args.calls)
    server.shutdown()

    print(
        f"Python {platform.python_version()}, {args.tensors:,} tensors, "
        f"{len(_Handler.data):,}-byte file, {args.rounds} rounds of {args.calls} calls"
    )
    medians = printed_medians(times, 12)
    ratio = medians["read_header"] / medians["urllib"]
    print(f"  read_header / urllib: {ratio:.2f}x (target at most 1.5x)")
    beyond = (medians["read_header"] - medians["parse"]) / medians["urllib"]
    print(f"  (read_header - parse) / urllib: {beyond:.2f}x (the request and its checks)")


if __name__ == "__main__":
    main()
