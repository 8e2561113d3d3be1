"""Read plans for custom and tensor-parallel loaders: which bytes of which files each tensor
(or each rank's share of one) needs, in as few requests as the bounds allow.

    from safetensors_header.plan import plan_reads, plan_rank, split_tensors

`plan_rank` follows the rules of tensor parallelism of the model's architecture
(docs/loaders.md); `numpy.load_plan`, `torch.load_plan` and `jax.load_plan` read a plan.

Layer: adapters (a public face of the services it re-exports).
"""

from __future__ import annotations

from ._plan import Parts, PlannedTensor, ReadPlan, Split, plan_reads
from ._ranks import plan_rank, split_tensors

__all__ = ["Parts", "PlannedTensor", "ReadPlan", "Split", "plan_rank", "plan_reads"]
__all__ += ["split_tensors"]
