"""A header per call from a Hub-style nginx over HTTPS, beside huggingface_hub's.

    python benchmarks/bench_hub_header.py                       # this Python
    for v in 3.10 3.13; do python$v benchmarks/bench_hub_header.py; done

Needs nginx and the ``openssl`` command (the certificate is made here, self-signed, for
127.0.0.1) and huggingface_hub. nginx serves ``<org>/<repo>/resolve/<revision>/<file>`` from a
folder, with Range, an ETag and ``X-Repo-Commit`` (what ``file_exists`` asks for), over
HTTPS with keep-alive; ``HF_ENDPOINT`` points huggingface_hub at it. Each round times,
interleaved, ``--calls`` calls of:

* ``read_header``: ``read_header(resolve URL)``: one ranged GET of 128 KiB, checked, parsed;
* ``get_safetensors_metadata``: huggingface_hub's ``get_safetensors_metadata(repo)``: a HEAD
  (``file_exists``), then a ranged GET of 100,001 bytes, parsed (what the issue compared);
* ``parse_safetensors_file_metadata``: its one-GET form, the same file named.

Both libraries keep their connections between calls (huggingface_hub's httpx client; ours,
the process's kept-alive connections); ``--no-keep-alive`` times ours with
``keep_alive=False`` (a new connection and TLS handshake each call, as before issue 54).
Target: ``read_header`` at most 1.0x ``get_safetensors_metadata``. Prints medians and
ranges of the rounds and the ratios of the medians.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_http_header import header_file, interleaved, printed_medians

REPO = "org/model"
COMMIT = "0" * 40


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _certificate(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    command = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2"
    command += " -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1,DNS:localhost"
    subprocess.run(
        [*command.split(), "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True
    )
    return cert, key


@contextlib.contextmanager
def _nginx(root: Path, run: Path, cert: Path, key: Path) -> Iterator[str]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    port = _free_port()
    config = run / "nginx.conf"
    config.write_text(
        textwrap.dedent(f"""
        worker_processes 1;
        pid {run}/nginx.pid;
        error_log {run}/error.log;
        daemon off;
        events {{ worker_connections 256; }}
        http {{
          access_log off;
          client_body_temp_path {run}/body;
          proxy_temp_path {run}/proxy;
          fastcgi_temp_path {run}/fastcgi;
          uwsgi_temp_path {run}/uwsgi;
          scgi_temp_path {run}/scgi;
          server {{
            listen 127.0.0.1:{port} ssl;
            ssl_certificate {cert};
            ssl_certificate_key {key};
            location ~ ^/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$ {{
              alias {root}/$1/$2/$4;
              add_header X-Repo-Commit {COMMIT};
            }}
          }}
        }}
        """)
    )
    process = subprocess.Popen([nginx, "-c", str(config)], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"https://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=30, help="calls of each per round")
    parser.add_argument("--tensors", type=int, default=100, help="in the header (100)")
    parser.add_argument("--no-keep-alive", action="store_true", help="ours with keep_alive=False")
    args = parser.parse_args()
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        os.environ.pop(name, None)
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        root, run = folder / "root", folder / "run"
        (root / REPO).mkdir(parents=True)
        run.mkdir()
        data = header_file(args.tensors)
        (root / REPO / "model.safetensors").write_bytes(data)
        for path in (folder, *root.rglob("*")):  # readable by nginx's workers
            path.chmod(0o755)
        cert, key = _certificate(folder)
        os.environ["SSL_CERT_FILE"] = str(cert)  # the process's TLS context trusts it
        with _nginx(root, run, cert, key) as endpoint:
            os.environ["HF_ENDPOINT"] = endpoint  # read by huggingface_hub as it is imported
            os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
            os.environ["HF_TOKEN"] = "hf_" + "x" * 34  # sent by both: no saved login read
            _run(args, endpoint, cert, len(data))


def _run(args: argparse.Namespace, endpoint: str, cert: Path, size: int) -> None:
    import huggingface_hub
    from huggingface_hub.utils import _http

    from safetensors_header import read_header

    trusted = ssl.create_default_context(cafile=str(cert))
    huggingface_hub.set_client_factory(
        lambda: _http.httpx2.Client(
            event_hooks={"request": [_http.hf_request_event_hook]},
            follow_redirects=True,
            timeout=None,
            verify=trusted,
        )
    )
    api = huggingface_hub.HfApi(endpoint=endpoint)
    url = f"{endpoint}/{REPO}/resolve/main/model.safetensors"
    headers = {"Authorization": f"Bearer {os.environ['HF_TOKEN']}"}
    keep = not args.no_keep_alive

    def ours() -> None:
        read_header(url, headers=headers, keep_alive=keep)

    def theirs() -> None:
        api.get_safetensors_metadata(REPO)

    def theirs_one_get() -> None:
        api.parse_safetensors_file_metadata(REPO, "model.safetensors")

    candidates = {
        "read_header": ours,
        "get_safetensors_metadata": theirs,
        "parse_safetensors_file_metadata": theirs_one_get,
    }
    times = interleaved(candidates, args.rounds, args.calls)  # (the first call: a handshake)
    print(
        f"Python {platform.python_version()}, huggingface_hub {huggingface_hub.__version__}, "
        f"nginx over HTTPS, {args.tensors:,} tensors, {size:,}-byte file, "
        f"{args.rounds} rounds of {args.calls} calls, keep_alive={keep}"
    )
    medians = printed_medians(times, 32)
    for name in ("get_safetensors_metadata", "parse_safetensors_file_metadata"):
        print(f"  read_header / {name}: {medians['read_header'] / medians[name]:.2f}x")


if __name__ == "__main__":
    main()
