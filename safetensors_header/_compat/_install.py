"""``install_as_safetensors``: ``import safetensors`` (and its submodules) made this project's
modules of the reference's API, as PyMySQL's ``install_as_MySQLdb`` does for ``MySQLdb``.

Layer: adapters.

A finder first on ``sys.meta_path`` serves ``safetensors`` as ``safetensors_header._compat``
and ``safetensors.<name>`` as ``safetensors_header._compat.<name>``, each imported when it is
first imported by its alias (so ``import safetensors.tensorflow`` imports TensorFlow then, and
says which extra to install when it is missing). The module objects are the same:
``safetensors.torch is safetensors_header._compat.torch``.
"""

from __future__ import annotations

import sys
from importlib import import_module
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from importlib.util import find_spec

__all__ = ["Alias", "install_as_safetensors"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType, TracebackType

ALIAS = "safetensors"
TARGET = __name__.rpartition(".")[0]  # safetensors_header._compat (or a vendored copy's)
# The reference's own names for its modules that are not files here.
_RENAMED = {"_safetensors_rust": ""}  # its Rust extension: the top-level module


def _target(fullname: str) -> str | None:
    """The module that serves `fullname` (``safetensors`` or ``safetensors.<name>``)."""
    if fullname == ALIAS:
        return TARGET
    prefix, dot, name = fullname.partition(".")
    if prefix != ALIAS or not dot:
        return None
    if name in _RENAMED:
        return TARGET + (f".{_RENAMED[name]}" if _RENAMED[name] else "")
    return f"{TARGET}.{name}"


class _AliasLoader(Loader):
    """Loads an alias as the very module it names (imported on first use)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = import_module(self.target)
        # (importlib is about to give it the alias's spec: kept, and given back below)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec  # the module stays its own (reload, pickling)


class _AliasFinder(MetaPathFinder):
    """Finds ``safetensors`` and ``safetensors.*`` as this package's modules; ``alias`` is
    the `Alias` that installed it (given back by `install_as_safetensors` while it is)."""

    alias: Alias

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        name = _target(fullname)
        if name is None:
            return None
        found = find_spec(name)
        if found is None:
            return None  # no such module here: the import fails as for any missing module
        return ModuleSpec(
            fullname,
            _AliasLoader(name),
            origin=found.origin,
            is_package=found.submodule_search_locations is not None,
        )

    def __repr__(self) -> str:
        return f"<the alias {ALIAS} -> {TARGET}>"


class Alias:
    """The alias installed by `install_as_safetensors`: ``uninstall()`` (or leaving its
    ``with`` block) undoes it."""

    __slots__ = ("_finder", "_saved")

    def __init__(self, finder: _AliasFinder, saved: dict[str, ModuleType]) -> None:
        self._finder = finder
        self._saved = saved

    @property
    def installed(self) -> bool:
        return self._finder in sys.meta_path

    def uninstall(self) -> None:
        """Undo it: the finder goes, so do the aliases imported since, and any
        ``safetensors`` modules that `install_as_safetensors` replaced come back. (Names
        bound to the aliases in modules that imported them keep them.)"""
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        for name in _imported():
            del sys.modules[name]
        sys.modules.update(self._saved)
        self._saved = {}

    def __enter__(self) -> Alias:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.uninstall()

    def __repr__(self) -> str:
        return f"<Alias {ALIAS} -> {TARGET}{'' if self.installed else ' (uninstalled)'}>"


def _imported() -> list[str]:
    """The names of ``safetensors`` and its submodules in ``sys.modules``."""
    return [name for name in sys.modules if name == ALIAS or name.startswith(ALIAS + ".")]


def install_as_safetensors(*, replace: bool = False) -> Alias:
    """Make ``import safetensors`` import this project: ``safetensors``,
    ``safetensors.torch``, ``.numpy``, ``.flax``, ``.tensorflow``, ``.paddle`` and ``.mlx``
    become its modules of the reference's API (docs/coming-from-safetensors.md), so that code
    written for the ``safetensors`` package (transformers, diffusers, accelerate) runs
    unchanged, on any source this project reads.

    Call it before anything imports ``safetensors``. Each module is imported when it is
    first imported by its alias; one whose framework is not installed raises
    ModuleNotFoundError naming the extra to install. Calling it again while it is installed
    returns the same alias.

    Args:
        replace: When the ``safetensors`` package has been imported already: take its
            place in ``sys.modules`` anyway (modules that imported it keep the names they
            bound to it; `Alias.uninstall` puts it back). By default that is refused.

    Returns:
        An `Alias`: ``alias.uninstall()`` undoes it (a context manager too).

    Raises:
        RuntimeError: ``safetensors`` (or one of its submodules) was imported already, and
            `replace` is false.
    """
    for finder in sys.meta_path:
        if isinstance(finder, _AliasFinder):
            return finder.alias
    already = [name for name in _imported() if _target(name) is not None]
    if already and not replace:
        raise RuntimeError(
            f"{', '.join(sorted(already))} imported already: call "
            "safetensors_header.install_as_safetensors() before anything imports "
            "safetensors, or pass replace=True to take its place in sys.modules (modules "
            "that imported it keep it)"
        )
    saved = {name: sys.modules.pop(name) for name in already}
    finder = _AliasFinder()
    finder.alias = Alias(finder, saved)
    sys.meta_path.insert(0, finder)
    return finder.alias
