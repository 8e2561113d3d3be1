"""`hub_url`: an ``hf://`` path as the Hub's HTTPS URL, as huggingface_hub writes both."""

from __future__ import annotations

import doctest

import pytest

import safetensors_header
from safetensors_header import _hub, hub_url


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
    with pytest.raises(ValueError, match=r"expected hf://\[datasets/\|spaces/\]<org>/<repo>"):
        hub_url(path)


def test_the_examples_in_its_docstring(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    failed, tried = doctest.testmod(_hub, verbose=False)
    assert (failed, tried) == (0, 2)
    assert safetensors_header.hub_url is hub_url
