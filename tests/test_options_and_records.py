"""Small edges of the helpers every layer shares: options, records, files beside a source."""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
import sys
from pathlib import Path

import pytest

import safetensors_header
from safetensors_header._core.records import frozen_record, set_fields
from safetensors_header._sources import open_source
from safetensors_header._sources.options import Options
from safetensors_header._sources.urls import beside as sibling


def test_options_check_their_values_and_hide_headers() -> None:
    with pytest.raises(TypeError, match="retries must be an int, not bool"):
        Options(retries=True)
    with pytest.raises(TypeError, match="max_workers must be an int, not float"):
        Options(max_workers=2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="first_read must be at least 8 \\(the length prefix\\)"):
        Options(first_read=7)
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        Options(timeout=float("nan"))
    assert Options(timeout=float("inf")).timeout is None
    options = Options(headers={"Authorization": "Bearer secret"}, storage_options={"anon": True})
    assert "secret" not in repr(options)
    assert repr(options).startswith("Options(headers=<Authorization>, timeout=10.0")
    again = pickle.loads(pickle.dumps(options))
    assert repr(again) == repr(options)
    assert dict(again.headers or {}) == {"Authorization": "Bearer secret"}
    given = Options.given("f", {"timeout": 3.0}, timeout=None, gap=7)
    assert (given.timeout, given.gap) == (3.0, 7)
    assert Options.given("f", {}, timeout=None).timeout is None
    with pytest.raises(TypeError, match=r"^f\(\) got an unexpected keyword argument 'time_out'$"):
        Options.given("f", {"time_out": 3.0})
    with pytest.raises(TypeError, match="unexpected keyword argument 'gap'"):
        Options.given("f", {"gap": 3})  # an option of the read plan, not of the transport


@pytest.mark.parametrize(
    ("source", "beside"),
    [
        ("https://host/a/b/model.safetensors?x=1", "https://host/a/b/shard.safetensors"),
        ("s3://bucket/a/model.safetensors", "s3://bucket/a/shard.safetensors"),
        (os.path.join("a", "b", "model.safetensors"), os.path.join("a", "b", "shard.safetensors")),
        (Path("a") / "model.safetensors", os.path.join("a", "shard.safetensors")),
    ],
)
def test_the_file_beside_a_source(source: object, beside: object) -> None:
    assert sibling(os.fspath(source), "shard.safetensors") == beside  # type: ignore[arg-type]
    if not str(source).startswith("s3:"):  # (s3fs would be set up)
        assert open_source(source).sibling("shard.safetensors").location == beside


def test_the_file_beside_a_store_path_and_nothing_beside_bytes() -> None:
    class Store:
        def get_range(self) -> None: ...
        def get(self) -> None: ...

    store = Store()
    shard = open_source((store, "a/b/model.safetensors")).sibling("s.safetensors")
    assert (shard.store, shard.path) == (store, "a/b/s.safetensors")  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="has no files beside it"):
        open_source(b"bytes").sibling("s.safetensors")


def test_a_record_names_only_its_fields() -> None:
    class Point:
        __slots__ = ("x", "y")
        x: int
        y: int

        def __init__(self, x: int, y: int = 0) -> None:
            set_fields(self, Point, (x, y))

    with pytest.raises(TypeError, match=r"Point has no fields \['z'\]"):
        frozen_record(uncompared=("z",))(Point)
    record = frozen_record(uncompared=("y",))(Point)
    assert record(1, 2) == record(1, 3)
    assert [field.default for field in dataclasses.fields(record)] == [dataclasses.MISSING, 0]
    if sys.version_info >= (3, 13):
        assert copy.replace(record(1, 2), y=5).y == 5  # type: ignore[attr-defined]
    assert record(1, 2).__replace__(x=4) == record(4, 0)  # type: ignore[attr-defined]


def test_a_record_written_for_its_fields() -> None:
    from safetensors_header._records import record

    @record(module="somewhere")
    class Pair:
        __slots__ = ("left", "right")
        left: int
        right: str

    pair = Pair(1, right="a")
    assert (pair.left, pair.right, pair) == (1, "a", Pair(left=1, right="a"))
    assert dataclasses.replace(pair, right="b") == Pair(1, "b")
    assert [field.name for field in dataclasses.fields(Pair)] == ["left", "right"]
    assert Pair.__init__.__qualname__ == f"{Pair.__qualname__}.__init__"
    assert Pair.__init__.__annotations__ == {"left": "int", "right": "str", "return": "None"}
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'right'"):
        Pair(1)  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        pair.left = 2  # type: ignore[misc]

    class Written:
        __slots__ = ("value",)
        value: int

        def __init__(self, value: int) -> None:
            set_fields(self, Written, (value,))

    with pytest.raises(TypeError, match="Written has an __init__: use frozen_record"):
        record()(Written)


def test_a_checkpoints_default_shards_are_empty() -> None:
    field = dataclasses.fields(safetensors_header.Checkpoint)[-1]
    assert field.name == "shards"
    # (A default factory where dataclasses takes the mapping proxy for mutable: before 3.12.)
    default = field.default_factory() if field.default is dataclasses.MISSING else field.default  # type: ignore[misc]
    assert dict(default) == {}
