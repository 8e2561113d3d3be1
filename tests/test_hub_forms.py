"""Every ``hf://`` form huggingface_hub's HfFileSystem reads, each read from the loopback Hub
at the resolve URL it names; the token's rules (``token=False``,
``HF_HUB_DISABLE_IMPLICIT_TOKEN``); ``HF_HUB_OFFLINE``; the Hub's errors for gated and
missing repositories, files and revisions."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import build, tensor
from loopback import Site

from safetensors_header import RemoteError, read_checkpoint, read_header

SMALL = build({"w": tensor("F32", [2], 0, 8)}, 8)


@pytest.mark.parametrize(
    ("path", "resolve"),
    [
        ("hf://org/repo/model.safetensors", "org/repo/resolve/main/model.safetensors"),
        ("hf://models/org/repo/model.safetensors", "org/repo/resolve/main/model.safetensors"),
        ("hf://datasets/org/data/x.safetensors", "datasets/org/data/resolve/main/x.safetensors"),
        ("hf://spaces/org/app/x.safetensors", "spaces/org/app/resolve/main/x.safetensors"),
        ("hf://kernels/org/k/x.safetensors", "kernels/org/k/resolve/main/x.safetensors"),
        ("hf://buckets/org/b/dir/x.safetensors", "buckets/org/b/resolve/dir/x.safetensors"),
        ("hf://org/repo@refs/pr/1/m.safetensors", "org/repo/resolve/refs%2Fpr%2F1/m.safetensors"),
        (
            "hf://org/repo@refs%2Fpr%2F1/m.safetensors",
            "org/repo/resolve/refs%2Fpr%2F1/m.safetensors",
        ),
        (
            "hf://datasets/org/d@refs/convert/parquet/d/x.safetensors",
            "datasets/org/d/resolve/refs%2Fconvert%2Fparquet/d/x.safetensors",
        ),
        ("hf://org/repo@feature%2Fx/m.safetensors", "org/repo/resolve/feature%2Fx/m.safetensors"),
        ("hf://org/repo@v1.0/sub/m.safetensors", "org/repo/resolve/v1.0/sub/m.safetensors"),
        ("hf://org/repo/w@2.safetensors", "org/repo/resolve/main/w%402.safetensors"),
        ("hf://org/repo/a b.safetensors", "org/repo/resolve/main/a%20b.safetensors"),
    ],
    ids=lambda value: value.removeprefix("hf://")[:40],
)
def test_every_form_reads_its_resolve_url(loopback_hub: Site, path: str, resolve: str) -> None:
    loopback_hub.linked[resolve] = SMALL  # a large file's way: 302 to the CDN
    header = read_header(path)
    assert list(header.tensors) == ["w"]
    [hit] = loopback_hub.hits
    assert hit.path == "/" + resolve
    assert hit.status == 302


@pytest.mark.parametrize(
    ("path", "first"),
    [
        ("hf://datasets/org/data", "datasets/org/data/resolve/main/model.safetensors.index.json"),
        ("hf://org/repo@refs/pr/1", "org/repo/resolve/refs%2Fpr%2F1/model.safetensors.index.json"),
        ("hf://buckets/org/b", "buckets/org/b/resolve/model.safetensors.index.json"),
    ],
)
def test_a_repository_of_every_kind_is_its_checkpoint(
    loopback_hub: Site, path: str, first: str
) -> None:
    loopback_hub.hub_errors[first] = (404, "EntryNotFound")
    single = first.replace(".index.json", "")
    loopback_hub.linked[single] = SMALL
    checkpoint = read_checkpoint(path)
    assert list(checkpoint.tensors) == ["w"]
    assert [hit.path for hit in loopback_hub.hits] == ["/" + first, "/" + single]


def test_token_false_sends_no_authorization_anywhere(
    loopback_hub: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_from_the_environment")
    loopback_hub.linked["org/repo/resolve/main/model.safetensors"] = SMALL
    read_header("hf://org/repo/model.safetensors", storage_options={"token": False})
    cdn = loopback_hub.cdn
    assert cdn is not None
    hits = loopback_hub.hits + cdn.hits
    assert len(hits) == 2
    assert all(hit.authorization is None for hit in hits)
    assert all("authorization" not in hit.headers for hit in hits)
    # Without it, the token goes to the Hub, and not on to the CDN.
    read_header("hf://org/repo/model.safetensors")
    assert loopback_hub.hits[-1].authorization == "Bearer hf_from_the_environment"
    assert cdn.hits[-1].authorization is None


def test_no_implicit_token_when_the_environment_says_so(
    loopback_hub: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_implicit")
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    loopback_hub.linked["org/repo/resolve/main/model.safetensors"] = SMALL
    read_header("hf://org/repo/model.safetensors")
    assert loopback_hub.hits[-1].authorization is None
    read_header("hf://org/repo/model.safetensors", storage_options={"token": True})
    assert loopback_hub.hits[-1].authorization == "Bearer hf_implicit"
    read_header("hf://org/repo/model.safetensors", storage_options={"token": "hf_given"})
    assert loopback_hub.hits[-1].authorization == "Bearer hf_given"


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
@pytest.mark.parametrize(
    "source", ["hf://org/repo/model.safetensors", "hf://org/repo", "hf://datasets/o/d@refs/pr/1"]
)
def test_offline_fails_before_any_request(
    loopback_hub: Site, monkeypatch: pytest.MonkeyPatch, value: str, source: str
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", value)
    loopback_hub.linked["org/repo/resolve/main/model.safetensors"] = SMALL
    reader = read_checkpoint if source.count("/") < 5 else read_header
    with pytest.raises(RemoteError, match="HF_HUB_OFFLINE is set") as info:
        reader(source)
    assert "Hugging Face Hub" in str(info.value)
    assert loopback_hub.hits == []
    cdn = loopback_hub.cdn
    assert cdn is not None
    assert cdn.hits == []


@pytest.mark.parametrize("value", ["0", "false", ""])
def test_offline_not_set(loopback_hub: Site, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", value)
    loopback_hub.linked["org/repo/resolve/main/model.safetensors"] = SMALL
    read_header("hf://org/repo/model.safetensors")
    assert len(loopback_hub.hits) == 1


def test_offline_from_the_command_line(tmp_path: object) -> None:
    """The command line's `inspect org/repo`, offline, in a process of its own: its error
    names the mode, and nothing was asked of a Hub that is not there."""
    import os

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}
    done = subprocess.run(
        [sys.executable, "-m", "safetensors_header", "inspect", "hf://org/repo/m.safetensors"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode != 0
    assert "HF_HUB_OFFLINE is set" in done.stderr


@pytest.mark.parametrize(
    ("status", "code", "said"),
    [
        (401, "RepoNotFound", "no such repository, or it is private"),
        (403, "GatedRepo", "the repository is gated"),
        (404, "RepoNotFound", "no such repository"),
        (404, "EntryNotFound", "no such file at this revision"),
        (404, "RevisionNotFound", "no such revision"),
    ],
)
def test_gated_and_missing(loopback_hub: Site, status: int, code: str, said: str) -> None:
    path = "datasets/org/d/resolve/refs%2Fpr%2F1/x.safetensors"
    loopback_hub.hub_errors[path] = (status, code)
    with pytest.raises(RemoteError, match=said) as info:
        read_header("hf://datasets/org/d@refs/pr/1/x.safetensors")
    assert info.value.status == status
    assert len(loopback_hub.hits) == 1  # a 4xx is never asked again
