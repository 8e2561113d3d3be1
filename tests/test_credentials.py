"""Credentials in URLs: sent where they belong, and never shown.

A URL's user info (``https://user:password@host/...``, or such an ``HF_ENDPOINT``) is sent as
``Authorization: Basic`` to that origin only, and no message, error or line of the command
line's output holds the password (http.client would quote it: "nonnumeric port: 'pw@host'").
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from loopback import Site

from safetensors_header import RemoteError, read_header, write_file

SECRET = "s3cret-Pw"


def _small(tmp_path: Path) -> bytes:
    path = tmp_path / "s.safetensors"
    write_file(path, {"w": ("U8", [4], b"abcd")})
    return path.read_bytes()


def test_user_info_is_sent_as_basic_authorization(site: Site, tmp_path: Path) -> None:
    site.files["m"] = _small(tmp_path)
    url = f"http://alice:{SECRET}@127.0.0.1:{site.port}/m"
    header = read_header(url)
    assert list(header.tensors) == ["w"]
    expected = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()
    assert site.done(1)[0].authorization == expected
    assert SECRET not in repr(header.identity)
    # A header given by the caller wins.
    read_header(url, headers={"Authorization": "Bearer mine"})
    assert site.done(2)[1].authorization == "Bearer mine"


@pytest.mark.parametrize(
    "url",
    [
        f"http://alice:{SECRET}@127.0.0.1:1/m",  # refused
        f"http://alice:{SECRET}@127.0.0.1:8x0/m",  # a port that is no number
        f"http://alice:{SECRET}@[::1/m",  # unreadable
        f"http://127.0.0.1:1/m?signature={SECRET}",  # a signed query
    ],
)
def test_no_message_holds_a_password(url: str) -> None:
    with pytest.raises((RemoteError, ValueError)) as caught:
        read_header(url, timeout=5, retries=0)
    assert SECRET not in str(caught.value)
    assert SECRET not in repr(caught.value)
    assert SECRET not in str(getattr(caught.value, "url", ""))


def test_nor_the_command_line(site: Site, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "HF_ENDPOINT": f"http://bob:{SECRET}@127.0.0.1:{site.port}",
        "HF_HOME": str(tmp_path),
    }
    env.pop("HF_TOKEN", None)
    site.hub_errors["org/repo/resolve/main/m.safetensors"] = (404, "EntryNotFound")
    for source in (
        f"http://alice:{SECRET}@127.0.0.1:8x0/m",
        f"http://alice:{SECRET}@127.0.0.1:1/m",
        "hf://org/repo/m.safetensors",
    ):
        done = subprocess.run(
            [sys.executable, "-m", "safetensors_header", "inspect", "--json", source],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        assert done.returncode != 0
        assert SECRET not in done.stdout + done.stderr, done.stderr
        assert done.stdout.startswith('{"path": '), done.stdout
    hit: Any = site.done(1)[0]
    assert hit.authorization == "Basic " + base64.b64encode(f"bob:{SECRET}".encode()).decode()
