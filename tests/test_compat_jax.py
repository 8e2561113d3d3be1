"""``safetensors.flax`` of the alias (issue 52), compared with the ``safetensors`` package.

Run in the nox ``jax`` session (it needs JAX); the alias is installed in a subprocess.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_compat import aliased

jax = pytest.importorskip("jax")
reference = pytest.importorskip("safetensors.flax")
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from safetensors_header._compat import flax as compat  # noqa: E402
from safetensors_header._compat import safe_open  # noqa: E402


def _arrays() -> dict[str, jax.Array]:
    key = jax.random.key(52)
    return {
        "f": jax.random.normal(key, (4, 6), dtype=jnp.float32),
        "h": jax.random.normal(key, (3,), dtype=jnp.bfloat16),
        "i": jnp.arange(5, dtype=jnp.int32),
        "e": jnp.zeros((2, 0), dtype=jnp.float32),
    }


def test_flax_save_and_load_as_the_reference(tmp_path: Path) -> None:
    arrays = _arrays()
    assert compat.save(arrays) == reference.save(arrays)
    compat.save_file(arrays, tmp_path / "ours")
    reference.save_file(arrays, str(tmp_path / "theirs"))
    assert (tmp_path / "ours").read_bytes() == (tmp_path / "theirs").read_bytes()
    # The reference's load (of bytes) reads no BF16 (its numpy table lacks it: a KeyError);
    # its load_file does. Here both read every dtype.
    plain = {name: array for name, array in arrays.items() if array.dtype != jnp.bfloat16}
    with pytest.raises(KeyError):
        reference.load(compat.save(arrays))
    bf16 = compat.load(compat.save(arrays))["h"]
    assert bf16.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(bf16), np.asarray(arrays["h"]))
    for mine, expected in (
        (compat.load_file(tmp_path / "ours"), reference.load_file(str(tmp_path / "ours"))),
        (compat.load(compat.save(plain)), reference.load(compat.save(plain))),
    ):
        assert sorted(mine) == sorted(expected)
        for name, array in expected.items():
            assert mine[name].dtype == array.dtype
            np.testing.assert_array_equal(np.asarray(mine[name]), np.asarray(array))


def test_safe_open_flax(tmp_path: Path) -> None:
    arrays = _arrays()
    compat.save_file(arrays, tmp_path / "m")
    with safe_open(tmp_path / "m", "flax") as f:
        assert isinstance(f.get_tensor("f"), jax.Array)
        np.testing.assert_array_equal(np.asarray(f.get_slice("f")[1:3]), arrays["f"][1:3])


def test_flax_through_the_alias(tmp_path: Path) -> None:
    found = aliased(
        f"""
        import json
        import jax.numpy as jnp
        from safetensors.flax import load_file, save_file
        save_file({{"a": jnp.arange(6, dtype=jnp.float32)}}, {str(tmp_path / "a")!r})
        print(json.dumps(load_file({str(tmp_path / "a")!r})["a"].tolist()))
        """
    )
    assert found == [0, 1, 2, 3, 4, 5]
