"""What a file that is not safetensors looks like, and what to do about it.

The reference reports a Git LFS pointer, an HTML error page or a PyTorch zip file as "header
too large" (their first 8 bytes read as an absurd length): the most reported safetensors
error there is. The kind stays the reference's; these hints ride along with it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Final

__all__ = ["SNIFF_SIZE", "TORN_PREFIX", "sniff", "truncation_hint"]

SNIFF_SIZE: Final = 64  # bytes from the start of the file that `sniff` looks at

#: The length prefix `update_metadata` writes while it rewrites a header in place, before any
#: other byte changes, and replaces by the real one after the last: a kill in between leaves
#: a file no reader takes for valid. As a length it is about 5.9 x 10^18 bytes, above any
#: limit and any file (HeaderTooLarge, or InvalidHeaderLength with the limit raised).
TORN_PREFIX: Final = b"TORN-HDR"

# (the file starts with one of these, what it is and what to do), most specific first
_RAW_SIGNATURES: Final = (
    (
        (TORN_PREFIX,),
        "the header is torn: update_metadata was rewriting it when it was stopped (killed, or "
        "the machine crashed), or is rewriting it now. The tensors' bytes are intact, the "
        "header is not: if this persists, restore the file from where it came from",
    ),
    (
        (b"version https://git-lfs",),
        "this is a Git LFS pointer file, not the file itself: run `git lfs pull` in the "
        "repository, or download the file through its LFS URL",
    ),
    (
        (b"<!doctype html", b"<html", b"<head", b"<body", b"<?xml", b"<!--"),
        "this is an HTML or XML page, not a safetensors file: the URL is wrong, the file needs "
        "a login or a token, or the server answered with an error page",
    ),
    (
        (b"PK\x03\x04",),
        "this is a zip archive, the format of PyTorch's torch.save (.bin, .pt, .pth): load it "
        "with torch.load (only if you trust its source: it can run code) or convert it",
    ),
    (
        (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05"),
        "this is a Python pickle (an old torch.save file?): unpickling can run code; load it "
        "only if you trust its source, or ask for a safetensors version",
    ),
    ((b"GGUF",), "this is a GGUF file (llama.cpp): read it with the gguf package"),
    ((b"\x89HDF\r\n\x1a\n",), "this is an HDF5 file (Keras .h5?), not safetensors"),
    ((b"\x93NUMPY",), "this is a NumPy .npy file: read it with numpy.load"),
    ((b"\x1f\x8b",), "this is a gzip-compressed file: decompress it first"),
    (
        (b"{",),
        'this is a JSON file, not a safetensors file; if it has a "weight_map", it is the '
        "index of a sharded checkpoint: read the shards it names",
    ),
)


# Compared with the file's first bytes lowered (HTML tags are case-insensitive).
_SIGNATURES: Final = tuple(
    (tuple(prefix.lower() for prefix in prefixes), hint) for prefixes, hint in _RAW_SIGNATURES
)


def sniff(head: bytes) -> str | None:
    """A hint naming the format of a file that starts with `head`, or None if unknown."""
    start = head[:SNIFF_SIZE].lstrip(b" \t\r\n\xef\xbb\xbf").lower()
    if not head:
        return "the file is empty: the download or copy did not complete"
    for prefixes, hint in _SIGNATURES:
        if start.startswith(prefixes):
            return hint
    return None


def truncation_hint(missing: int) -> str:
    """The hint for a file that ends `missing` bytes before its header or data says."""
    return (
        f"the file is {missing:,} bytes shorter than it says it is: an interrupted download "
        "or copy? Fetch it again"
    )
