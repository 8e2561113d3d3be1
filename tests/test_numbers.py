"""serde_json's "number out of range" rule, which is not correct rounding near f64::MAX."""

from __future__ import annotations

import random

import pytest
from helpers import HAVE_REFERENCE, build, reference_kind

from safetensors_header import HeaderError, read_header


def ignored(token: str) -> bytes:
    """`token` as the value of an unknown (ignored) field of a valid U8[1] tensor."""
    return build(f'{{"a":{{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":{token}}}}}', 1)


def verdict(data: bytes) -> str | None:
    try:
        read_header(data)
    except HeaderError as error:
        return error.kind
    return None


BAD = "InvalidHeaderDeserialization"


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("1.7976931348623157e308", None),  # f64::MAX
        ("1.7976931348623158e308", BAD),  # rounds to f64::MAX, but serde_json overflows
        ("17976931348623157e292", None),
        ("17976931348623158e292", BAD),
        ("1e308", None),
        ("1e309", BAD),
        ("-1e309", BAD),
        ("1e-400", None),  # underflow is fine
        ("0e999999999999", None),  # a zero significand never overflows
        ("1e2147483648", BAD),  # exponent beyond i32, positive
        ("1e-2147483648", None),
        ("0." + "0" * 400 + "1e400", None),  # leading fraction zeros move the exponent
        ("18446744073709551615", None),  # u64::MAX is an integer
        ("18446744073709551616", None),  # beyond u64: a float, in range
        ("1" + "0" * 308, None),
        ("1" + "0" * 309, BAD),
        ("-9223372036854775809", None),  # below i64: a float
        ("1797693134862315708145274237317043567981" + "0" * 269, BAD),  # 2^1024 - 2^970
        ("9" * 400 + ".5", BAD),
        ("123456789012345678901234567890.123456789e280", BAD),
        ("1844674407370955161.5e289", None),  # fraction digits absorbed after the integer
    ],
)
def test_out_of_range_rule(token: str, expected: str | None) -> None:
    data = ignored(token)
    assert verdict(data) == expected
    if HAVE_REFERENCE:
        assert reference_kind(data) == expected


@pytest.mark.skipif(not HAVE_REFERENCE, reason="the safetensors package is not installed")
def test_boundary_numbers_agree_with_the_reference() -> None:
    rng = random.Random(20261129)
    bases = [
        "17976931348623157",
        "17976931348623158",
        "1797693134862315708",
        "18446744073709551616",
        "99999999999999999999",
        "1",
    ]
    for _ in range(400):
        digits = rng.choice(bases)
        digits = digits[: rng.randrange(1, len(digits) + 1)] + str(rng.randrange(10**4))
        form = rng.randrange(3)
        if form == 0:
            token = f"{digits}e{308 - len(digits) + rng.randrange(-3, 4)}"
        elif form == 1:
            token = f"{digits[0]}.{digits[1:]}e{308 + rng.randrange(-2, 2)}"
        else:
            token = digits + "0" * (308 - len(digits) + rng.randrange(-2, 3))
        data = ignored(rng.choice(["", "-"]) + token)
        assert verdict(data) == reference_kind(data), token
