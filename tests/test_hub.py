"""The Hugging Face Hub: `hub_url`, and `hf://` paths read at the Hub's resolve URLs (a loopback
server as the Hub) with its token, its errors and its repositories."""

from __future__ import annotations

import doctest
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from helpers import build, tensor

import safetensors_header
from safetensors_header import RemoteError, hub_url, read_checkpoint, read_header
from safetensors_header._sources import hub as _hub


@pytest.mark.parametrize(
    ("path", "url"),
    [
        ("hf://org/repo/model.safetensors", "/org/repo/resolve/main/model.safetensors"),
        ("hf://org/repo/sub/dir/m.safetensors", "/org/repo/resolve/main/sub/dir/m.safetensors"),
        ("hf://org/repo@v1.0/m.safetensors", "/org/repo/resolve/v1.0/m.safetensors"),
        ("hf://org/repo@refs%2Fpr%2F3/m.json", "/org/repo/resolve/refs%2Fpr%2F3/m.json"),
        ("hf://datasets/org/data/x.safetensors", "/datasets/org/data/resolve/main/x.safetensors"),
        ("hf://spaces/org/app@dev/x.safetensors", "/spaces/org/app/resolve/dev/x.safetensors"),
        ("hf://org/repo/a b#c?.safetensors", "/org/repo/resolve/main/a%20b%23c%3F.safetensors"),
    ],
)
def test_hf_paths(path: str, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert hub_url(path) == "https://huggingface.co" + url


def test_the_endpoint_from_the_environment_or_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:8080/")
    assert hub_url("hf://o/r/f") == "http://127.0.0.1:8080/o/r/resolve/main/f"
    assert hub_url("hf://o/r/f", endpoint="https://hub.example") == (
        "https://hub.example/o/r/resolve/main/f"
    )


@pytest.mark.parametrize("url", ["https://x/y.safetensors", "s3://b/k", "/tmp/a", "hf:/x"])
def test_other_urls_are_returned_as_they_are(url: str) -> None:
    assert hub_url(url) == url


@pytest.mark.parametrize(
    "path",
    ["hf://", "hf://org", "hf://org/repo", "hf://org/repo/", "hf://datasets/org/x", "hf:///r/f"],
)
def test_an_hf_path_without_a_file_is_refused(path: str) -> None:
    kinds = r"\[models/\|datasets/\|spaces/\|kernels/\|buckets/\]"
    with pytest.raises(ValueError, match=rf"expected hf://{kinds}<org>/<repo>"):
        hub_url(path)


def test_the_examples_in_its_docstring(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    failed, tried = doctest.testmod(_hub, verbose=False)
    assert (failed, tried) == (0, 2)
    assert safetensors_header.hub_url is hub_url


# --- the Hub's resolve URLs, on a loopback server ----------------------------------------


SMALL = build({"w": tensor("F32", [2], 0, 8)}, 8)


def _shard(name: str) -> bytes:
    return build({name: tensor("U8", [4], 0, 4)}, 4)


@pytest.fixture
def hub(site: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """The loopback server as the Hub (HF_ENDPOINT), with no token from this machine."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no saved login
    monkeypatch.setenv("HF_ENDPOINT", site.url("").rstrip("/"))
    return site


def test_an_hf_file_is_one_request_at_its_resolve_url(hub: Any) -> None:
    hub.files["org/repo/resolve/main/model.safetensors"] = SMALL
    header = read_header("hf://org/repo/model.safetensors")
    assert list(header.tensors) == ["w"]
    [hit] = hub.done(1)
    assert hit.path == "/org/repo/resolve/main/model.safetensors"
    assert hit.range == "bytes=0-131071"
    assert hit.authorization is None  # no token anywhere: none sent


def test_a_revision_and_the_token_of_the_environment(
    hub: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    hub.files["org/repo/resolve/v1.0/model.safetensors"] = SMALL
    read_header("hf://org/repo@v1.0/model.safetensors")
    [hit] = hub.done(1)
    assert hit.authorization == "Bearer hf_secret"
    # The caller's own Authorization wins.
    read_header("hf://org/repo@v1.0/model.safetensors", headers={"authorization": "Bearer mine"})
    assert hub.done(2)[1].authorization == "Bearer mine"


def test_the_saved_login_is_the_token_when_the_environment_has_none(
    hub: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "hf-home").mkdir()
    (tmp_path / "hf-home" / "token").write_text("hf_saved\n")
    hub.files["org/repo/resolve/main/model.safetensors"] = SMALL
    read_header("hf://org/repo/model.safetensors")
    assert hub.done(1)[0].authorization == "Bearer hf_saved"


def test_the_token_never_goes_to_another_origin(hub: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # "away/..." answers with a redirect to the same server under another host name: another
    # origin, as the Hub's CDN is.
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    hub.files["repo/resolve/main/model.safetensors"] = SMALL
    header = read_header("hf://away/repo/model.safetensors")
    assert list(header.tensors) == ["w"]
    first, second = hub.done(2)
    assert first.authorization == "Bearer hf_secret"
    assert second.host.startswith("localhost:")
    assert second.authorization is None


def test_a_repository_is_its_index_and_its_shards(
    hub: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    shards = {f"model-0000{i}-of-00003.safetensors": _shard(f"t{i}") for i in (1, 2, 3)}
    index = {"weight_map": {f"t{i}": f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)}}
    for name, data in {**shards, "model.safetensors.index.json": json.dumps(index)}.items():
        hub.files[f"org/big/resolve/main/{name}"] = (
            data if isinstance(data, bytes) else data.encode()
        )
    checkpoint = read_checkpoint("hf://org/big")
    assert sorted(checkpoint.tensors) == ["t1", "t2", "t3"]
    hits = hub.done(4)
    assert len(hits) == 4  # the index, then one request a shard
    assert hits[0].path == "/org/big/resolve/main/model.safetensors.index.json"
    assert sorted(hit.path for hit in hits[1:]) == sorted(
        f"/org/big/resolve/main/{name}" for name in shards
    )
    assert {hit.authorization for hit in hits} == {"Bearer hf_secret"}


def test_a_repository_of_one_file(hub: Any) -> None:
    hub.hub_errors["org/one/resolve/main/model.safetensors.index.json"] = (404, "EntryNotFound")
    hub.files["org/one/resolve/main/model.safetensors"] = SMALL
    checkpoint = read_checkpoint("hf://org/one")
    assert list(checkpoint.tensors) == ["w"]
    assert [hit.path.rsplit("/", 1)[1] for hit in hub.done(2)] == [
        "model.safetensors.index.json",
        "model.safetensors",
    ]


def test_a_repository_without_a_checkpoint_says_what_was_tried(hub: Any) -> None:
    with pytest.raises(RemoteError, match=r"hf://org/empty/ has no model.safetensors.index.json"):
        read_checkpoint("hf://org/empty")


def test_a_repository_the_hub_does_not_have_is_said_so(
    hub: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # A mistyped (or private) repository: the Hub answers 404 with RepoNotFound for every
    # file of it. That is said after the first request, not "it has no index and no file".
    for name in ("model.safetensors.index.json", "model.safetensors"):
        hub.hub_errors[f"org/typo/resolve/main/{name}"] = (404, "RepoNotFound")
    with pytest.raises(RemoteError) as info:
        read_checkpoint("hf://org/typo")
    assert (info.value.status, info.value.code) == (404, "RepoNotFound")
    message = str(info.value)
    assert "no such repository, or it is private" in message
    assert "HF_TOKEN" in message  # a token may be needed
    assert "has no model.safetensors.index.json" not in message
    assert len(hub.done(1)) == 1
    # Pickled with its code (through its own __reduce__: tblib, which dask's tests install,
    # pickles an exception's context too, and this one's is urllib's reply).
    rebuild, arguments = info.value.__reduce__()
    assert pickle.loads(pickle.dumps(rebuild(*arguments))).code == "RepoNotFound"
    from safetensors_header._cli import main

    assert main(["inspect", "hf://org/typo"]) == 1
    err = capsys.readouterr().err
    assert "no such repository, or it is private" in err
    assert "has no model.safetensors.index.json" not in err


def test_an_error_code_the_hub_does_not_send_is_none(hub: Any) -> None:
    with pytest.raises(RemoteError) as info:
        read_checkpoint("hf://org/empty")
    assert info.value.code is None


@pytest.mark.parametrize(
    ("status", "code", "said"),
    [
        (401, "RepoNotFound", "the Hugging Face Hub has no such repository, or it is private"),
        (403, "GatedRepo", "the repository is gated: accept its conditions"),
        (404, "EntryNotFound", "the repository has no such file at this revision"),
        (404, "RevisionNotFound", "the repository has no such revision"),
    ],
)
def test_hub_errors_are_named_plainly(hub: Any, status: int, code: str, said: str) -> None:
    hub.hub_errors["org/repo/resolve/main/model.safetensors"] = (status, code)
    with pytest.raises(RemoteError) as info:
        read_header("hf://org/repo/model.safetensors")
    assert info.value.status == status
    assert said in str(info.value)


def test_storage_options_for_an_hf_path(hub: Any) -> None:
    hub.files["org/repo/resolve/main/model.safetensors"] = SMALL
    read_header("hf://org/repo/model.safetensors", storage_options={"token": "hf_given"})
    assert hub.done(1)[0].authorization == "Bearer hf_given"
    with pytest.raises(
        ValueError, match=r"takes only 'token' and 'endpoint' for it, not \['anon'\]"
    ):
        read_header("hf://org/repo/model.safetensors", storage_options={"anon": True})


def test_the_command_line_reads_org_repo_from_the_hub(
    hub: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from safetensors_header._cli import main

    monkeypatch.chdir(tmp_path)
    hub.hub_errors["org/one/resolve/v2/model.safetensors.index.json"] = (404, "EntryNotFound")
    hub.files["org/one/resolve/v2/model.safetensors"] = SMALL
    assert main(["inspect", "org/one@v2"]) == 0
    captured = capsys.readouterr()
    assert "reading hf://org/one@v2 from the Hugging Face Hub" in captured.err
    assert " w " in captured.out or "\nw " in captured.out
    # A local path of that name is read as the path, never from the Hub.
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "one").write_bytes(SMALL)
    requests = len(hub.hits)
    assert main(["inspect", "org/one"]) == 0
    assert "Hugging Face Hub" not in capsys.readouterr().err
    assert len(hub.hits) == requests


def test_token_false_sends_no_token(hub: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub reads token=False as "send none": HF_TOKEN stays at home."""
    monkeypatch.setenv("HF_TOKEN", "hf_from_the_environment")
    hub.files["org/repo/resolve/main/model.safetensors"] = SMALL
    read_header("hf://org/repo/model.safetensors", storage_options={"token": False})
    read_header("hf://org/repo/model.safetensors")
    first, second = hub.done(2)
    assert first.authorization is None
    assert second.authorization == "Bearer hf_from_the_environment"
    with pytest.raises(TypeError, match="token must be a str, True or False, not int"):
        read_header("hf://org/repo/model.safetensors", storage_options={"token": 3})
