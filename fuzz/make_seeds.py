"""Write the seed corpus: every case of tests/test_rules.py, and the shipped test files.

python fuzz/make_seeds.py fuzz/corpus
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import test_rules  # noqa: E402  (needs tests/ on the path)


def main() -> int:
    target = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "fuzz" / "corpus")
    target.mkdir(parents=True, exist_ok=True)
    seeds = [param.values[0].data for name in dir(test_rules) if name.endswith("_CASES")
             for param in getattr(test_rules, name)]  # fmt: skip
    seeds += [path.read_bytes() for path in (ROOT / "tests" / "data").glob("*.safetensors")]
    seeds = [seed for seed in seeds if len(seed) <= 1 << 16]  # the huge ones slow the fuzzer
    for seed in seeds:
        (target / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
    print(f"{len(seeds)} seeds in {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
