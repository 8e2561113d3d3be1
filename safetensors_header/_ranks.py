"""A rank's share of a model: the rules of tensor parallelism applied to a source's tensors,
and what no rule decides warned of or refused.

Layer: services (on read plans; the rules themselves are `_model.parallel`'s, sans-IO).
"""

from __future__ import annotations

import fnmatch
import operator
from collections.abc import Mapping

from ._checkpoint import files_of
from ._errors import HeaderError
from ._model.parallel import Share, TensorParallel
from ._plan import Parts, ReadPlan, Split, planned
from ._sources.options import Options

__all__ = ["plan_rank", "rank_plan", "split_tensors"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Final

    from typing_extensions import Unpack

    from ._core.header import TensorInfo
    from ._sources.transport import Transport

    class RankOptions(Transport, total=False):
        """The keywords of a loader's ``load_rank``: `plan_rank`'s, and `Transport`'s."""

        config: Mapping[str, Any] | None
        axes: Mapping[str, int | None] | None
        strict: bool
        gap: int | None
        max_over_read: float | None
        max_requests: int | None


_BOUNDS: Final = ("gap", "max_over_read", "max_requests")  # of `plan_reads`
_LISTED_NAMES: Final = 5  # tensor names a warning or an error lists


def split_tensors(
    rank: int,
    world: int,
    *,
    config: Mapping[str, Any] | None = None,
    axes: Mapping[str, int | None] | None = None,
) -> Callable[[TensorInfo], Split | Parts | None]:
    """A `plan_reads` selection: rank `rank` of `world`'s share of every tensor, by the rules
    of tensor parallelism (docs/loaders.md has them in a table).

    Args:
        config: The model's config.json, as a dict: its ``model_type`` chooses the
            architecture's rules and its head counts where q, k and v are cut. ``None``:
            the names alone decide (case-insensitively), and q, k and v are whole.
        axes: Glob patterns of tensor names (matched as written; the first that matches
            wins, before the rules) -> the axis to split along, or ``None``: whole.

    A name no rule knows is read whole; `plan_rank` (and ``load_rank``) also warn of
    those or, with ``strict=True``, refuse them.
    """
    Split(rank, world)  # checked now, not at the first tensor
    rules = TensorParallel(world, config)
    own = list((axes or {}).items())

    def choose(info: TensorInfo) -> Split | Parts | None:
        return _selection(rank, world, _share(rules, own, info))

    return choose


def plan_rank(
    source: Any,
    /,
    rank: int,
    world: int,
    *,
    config: Mapping[str, Any] | None = None,
    axes: Mapping[str, int | None] | None = None,
    strict: bool = False,
    gap: int | None = None,
    max_over_read: float | None = None,
    max_requests: int | None = None,
    **transport: Unpack[Transport],
) -> ReadPlan:
    """The read plan of rank `rank` of `world`'s share of a model, by the rules of tensor
    parallelism for its architecture: a tensor is whole on every rank or the part its rule
    names, never a guess. Nothing but headers (and the config) is read.

    Each `PlannedTensor` says what the rank gets (``selection``, ``axis``, ``shape``) and
    why (``rule``); ``plan.summary()`` counts them. ``numpy.load_plan(plan)`` (or torch's,
    or jax's) reads it; ``load_rank`` is both steps in one.

    Args:
        source: A `Checkpoint`, a `SafetensorsFile`, a checkpoint's directory or index
            (a path or a URL ending in ``.json``), or any source `open_file` takes.
        config: The model's config.json, as a dict. By default the ``config.json`` beside
            the source is read where there is one; ``{}`` reads none: the names decide.
        axes: Your own rules, before the built-in ones: glob patterns of tensor names
            (matched as written; the first that matches wins) -> the axis to split along,
            or ``None`` for whole.
        strict: Refuse (`HeaderError` of kind ``NoSplitRule``, naming them) the tensors no
            rule decides; by default they are whole on every rank, with one warning that
            says how many and how many bytes each rank reads for them.
        gap, max_over_read, max_requests: As for `plan_reads`.
        **transport: How the source is reached (`Transport`).

    Raises:
        HeaderError: ``NoSplitRule`` (with `strict`); as `plan_reads`.
        ValueError: `rank` is not in ``0..world-1``.
    """
    how = {"config": config, "axes": axes, "strict": strict, "gap": gap}
    bounds = {"max_over_read": max_over_read, "max_requests": max_requests}
    return rank_plan("plan_rank", source, rank, world, {**how, **bounds, **transport})


def rank_plan(
    function: str,
    source: Any,
    rank: int,
    world: int,
    given: Mapping[str, Any],
    *,
    stacklevel: int = 3,
) -> ReadPlan:
    """`plan_rank` for `function` (a loader's ``load_rank``), with its keywords as `given`
    (`RankOptions`); its warning points `stacklevel` frames up (3: the caller of
    `function`)."""
    transport = dict(given)
    config, axes = transport.pop("config", None), transport.pop("axes", None)
    strict = bool(transport.pop("strict", False))
    gap, over_read, requests = (transport.pop(name, None) for name in _BOUNDS)
    options = Options.given(function, transport)
    Split(rank, world)
    files = files_of(source, **transport)
    notes: list[str] = []  # why no config was read, where none was
    if config is None:
        from ._describe import config_of

        shards = {name or "": file for name, file in files}
        config = config_of(source, shards, notes, **transport)
    rules = TensorParallel(world, config)
    said = rules.architecture if config or not notes else f"{rules.architecture}: {notes[-1]}"
    own = list((axes or {}).items())
    shares: dict[str, Share] = {}
    unknown: list[TensorInfo] = []
    for _, file in files:
        for info in file.header.tensors.values():
            share = shares[info.name] = _share(rules, own, info)
            if not share.known:
                unknown.append(info)
    if unknown:
        _unknown(unknown, shares, said, world, strict, stacklevel)
    return planned(
        files,
        lambda info: _selection(rank, world, shares[info.name]),
        options,
        gap,
        over_read,
        requests,
        rules={name: share.rule for name, share in shares.items()},
    )


def _share(rules: TensorParallel, own: list[tuple[str, int | None]], info: TensorInfo) -> Share:
    """The share of a tensor: by the first of the caller's patterns that matches, else by
    the rules."""
    for pattern, axis in own:
        if fnmatch.fnmatchcase(info.name, pattern):
            if axis is None or axis >= len(info.shape):
                return Share(None, (), f"axes[{pattern!r}]: whole")
            return Share(operator.index(axis), (), f"axes[{pattern!r}]: axis {axis}")
    return rules.share(info.name, info.shape)


def _selection(rank: int, world: int, share: Share) -> Split | Parts | None:
    if share.axis is None:
        return None
    if share.parts:
        return Parts(rank, world, share.axis, share.parts)
    return Split(rank, world, share.axis)


def _unknown(  # noqa: PLR0917 - rank_plan's findings
    tensors: list[TensorInfo],
    shares: Mapping[str, Share],
    architecture: str,
    world: int,
    strict: bool,
    stacklevel: int,
) -> None:
    """Refuse (`strict`) or warn of the tensors no rule decides, with what they cost."""
    names = [info.name for info in tensors]
    shown_names = "; ".join(
        name if shares[name].rule == "no rule: whole" else f"{name} ({shares[name].rule})"
        for name in names[:_LISTED_NAMES]
    ) + (f" (and {len(names) - _LISTED_NAMES:,} more)" if len(names) > _LISTED_NAMES else "")
    if strict:
        raise HeaderError(
            "NoSplitRule",
            f"{len(names):,} tensor{'' if len(names) == 1 else 's'} with no tensor-parallel "
            f"rule ({architecture}): {shown_names}; strict=True wants every tensor split or "
            "made whole by a rule: name them in axes= (an axis, or None for whole), or give "
            "the model's config",
            tensor=names[0],
        )
    import warnings

    cost = sum(info.nbytes for info in tensors)
    warnings.warn(
        f"{len(names):,} tensor{'' if len(names) == 1 else 's'} no tensor-parallel rule "
        f"decides ({architecture}) {'is' if len(names) == 1 else 'are'} read whole on each "
        f"of the {world} ranks: {cost:,} bytes a rank ({shown_names}). Name them in axes= "
        "to split them, or pass strict=True to refuse them",
        UserWarning,
        stacklevel=stacklevel + 1,  # this function's frame too
    )
