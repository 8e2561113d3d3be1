"""What a file that is not safetensors looks like, and what to do about it.

Layer: core (sans-IO).

The reference reports a Git LFS pointer, an HTML error page or a PyTorch zip file as "header
too large" (their first 8 bytes read as an absurd length): the most reported safetensors
error there is. The kind stays the reference's; these hints ride along with it.
"""

from __future__ import annotations

__all__ = ["DIAGNOSIS", "SNIFF_SIZE", "TORN_PREFIX", "cut", "listed", "sniff", "truncation_hint"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Final

SNIFF_SIZE: Final = 64  # bytes from the start of the file that `sniff` looks at
#: How every hint that says what a file is instead begins ("this is an HTML or XML page,
#: ..."): messages put such a diagnosis first, and the numbers of the error after it.
DIAGNOSIS: Final = "this is "
_LISTED: Final = 5  # names a message lists

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
    (
        (b"\x93NUMPY",),
        "this is NumPy data: a .npy file (read it with numpy.load), or an Equinox .eqx file, "
        ".npy arrays one after another (read it with equinox.tree_deserialise_leaves)",
    ),
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


_NPZ_HINT: Final = (
    "this is a NumPy .npz archive (a zip of .npy files), not a safetensors file: read it with "
    "numpy.load"
)
_ONNX_HINT: Final = (
    "this is an ONNX model (a protobuf), not a safetensors file: read it with onnx.load, or "
    "run it with onnxruntime"
)
_TFLITE_HINT: Final = "this is a TensorFlow Lite model (.tflite), not a safetensors file"
_TEXT_HINT: Final = (
    "this is a text file, not a safetensors file (it starts with {start!r}): an error message "
    "saved in place of the file, or a config or a README under the wrong name?"
)
_SHOWN_TEXT: Final = 40  # characters of a text file's first line a hint quotes


def sniff(head: bytes) -> str | None:
    """A hint naming the format of a file that starts with `head`, or None if unknown."""
    head = head[:SNIFF_SIZE]
    start = head.lstrip(b" \t\r\n\xef\xbb\xbf").lower()
    if not head:
        return "the file is empty: the download or copy did not complete"
    if head.startswith(b"PK\x03\x04") and _zip_member(head).endswith(".npy"):
        return _NPZ_HINT  # before the zip signature, which names PyTorch
    for prefixes, hint in _SIGNATURES:
        if start.startswith(prefixes):
            return hint
    if _is_onnx(head):
        return _ONNX_HINT
    if head[4:8] == b"TFL3":  # a FlatBuffer's file identifier, after its root offset
        return _TFLITE_HINT
    text = _text(head)
    if text is not None:
        return _TEXT_HINT.format(start=cut(text.strip().split("\n", 1)[0], _SHOWN_TEXT))
    return None


def _zip_member(head: bytes) -> str:
    """The name of the first member of a zip file (its local file header), as far as seen."""
    length = int.from_bytes(head[26:28], "little")
    return head[30 : 30 + length].decode("utf-8", "replace").lower()


def _is_onnx(head: bytes) -> bool:
    """An ONNX ModelProto: field 1 (ir_version, a small varint), then field 2 (producer_name).

    A protobuf writes fields in number order, so an ONNX file starts ``08 vv 12 ll`` and the
    producer's name (``pytorch``, ``tf2onnx``...). A safetensors prefix cannot: its bytes 4
    to 7 are zero for any header under 4 GiB, where this needs the name's first letter.
    """
    return (
        len(head) >= 5
        and head[0] == 0x08
        and 0 < head[1] < 0x80
        and head[2] == 0x12
        and 0 < head[3] < 0x80
        and head[4 : 4 + head[3]].isascii()
        and head[4 : 4 + head[3]].decode("ascii").isprintable()
    )


def _text(head: bytes) -> str | None:
    """`head` as text if it is UTF-8 made of printable characters and line breaks, else None."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as error:
        # The 64 bytes may end inside a character: judge the text up to there.
        if error.reason != "unexpected end of data" or error.start < len(head) - 3:
            return None
        text = head[: error.start].decode("utf-8")
    text = text.removeprefix("\ufeff")
    if not text or not text.replace("\n", "").replace("\r", "").replace("\t", "").isprintable():
        return None
    return text


def cut(text: str, limit: int) -> str:
    """At most `limit` characters: a longer `text` ends in "..."."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def listed(names: Sequence[str]) -> str:
    """Names for a message: the first `_LISTED` of them, then how many more there are."""
    shown = ", ".join(names[:_LISTED])
    more = len(names) - _LISTED
    return shown + (f" and {more:,} more" if more > 0 else "")


def truncation_hint(missing: int) -> str:
    """The hint for a file that ends `missing` bytes before its header or data says."""
    return (
        f"the file is {missing:,} bytes shorter than it says it is: an interrupted download "
        "or copy? Fetch it again"
    )
