"""Old module paths that keep working after their code moved (imports and monkeypatching).

Two cases, one helper each:

* A whole module (or package) moved: :data:`MOVED_MODULES` maps its old path to the new one,
  and :func:`install` (run by ``import crossmetric``) puts a finder on ``sys.meta_path`` that
  answers an import of the old path -- ``import crossmetric.pcca``, ``from crossmetric import
  pcca``, ``from crossmetric.pcca import _private``, ``importlib.import_module``, a submodule of a
  moved package such as ``crossmetric.baselines._latent``, and the class paths that old pickles
  name -- with the module object of the new path itself. ``sys.modules`` then holds one object
  under both names, so ``monkeypatch.setattr(crossmetric.pcca, "x", v)`` changes what the moved
  code reads. No file remains at the old path.
* Some names of a module moved elsewhere while the module stayed: see below.

A module whose names moved elsewhere imports them back (``from new import name``), so reading
``old.name`` and ``from old import name`` work. Assigning ``old.name = value`` (what
``monkeypatch.setattr(old, "name", value)`` does) would only rebind the old module's copy,
while the moved code reads the new module's globals: :func:`forward_assignments` makes such an
assignment also rebind the name in every module of ``targets`` that holds it, so a test or a
benchmark that patches a flag or a helper through the old path still changes what runs.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types

__all__ = ["MOVED_MODULES", "current_path", "install", "forward_assignments"]

#: old module path -> module path it moved to (issue 21); submodules follow their package
MOVED_MODULES = {
    # learners/: one paper (or one family of baselines) per module
    "crossmetric.pcca": "crossmetric.learners.pcca",
    "crossmetric.cmml": "crossmetric.learners.cmml",
    "crossmetric.ldml": "crossmetric.learners.ldml",
    "crossmetric.auc": "crossmetric.learners.auc",
    "crossmetric.clml": "crossmetric.learners.clml",
    "crossmetric._local_metrics": "crossmetric.learners._local_metrics",
    "crossmetric.gsm": "crossmetric.learners.gsm",
    "crossmetric._gsm_training": "crossmetric.learners._gsm_training",
    "crossmetric._gsm_measure": "crossmetric.learners._gsm_measure",
    "crossmetric.baselines": "crossmetric.learners.baselines",
    "crossmetric.discriminant": "crossmetric.learners.discriminant",
    "crossmetric.dml_eig": "crossmetric.learners.dml_eig",
    "crossmetric.itml": "crossmetric.learners.itml",
    "crossmetric.neighbours": "crossmetric.learners.neighbours",
    "crossmetric.prdc": "crossmetric.learners.prdc",
    "crossmetric.multiview": "crossmetric.learners.multiview",
    "crossmetric.supervised": "crossmetric.learners.supervised",
    "crossmetric.ensemble": "crossmetric.learners.ensemble",
    # features/: the image descriptors (crossmetric.features itself kept its path)
    "crossmetric._dense_sift": "crossmetric.features._dense_sift",
    "crossmetric._local_patterns": "crossmetric.features._local_patterns",
    "crossmetric._patch_color_sift": "crossmetric.features._patch_color_sift",
    # _solvers/: the solver layer
    "crossmetric._stochastic": "crossmetric._solvers.stochastic",
    "crossmetric._early_stopping": "crossmetric._solvers.early_stopping",
}


def current_path(name: str) -> str:
    """The path ``name`` (a module, or ``module.QualName``) has now; unmoved names unchanged.

    Examples
    --------
    >>> current_path("crossmetric.baselines._latent.CCA")
    'crossmetric.learners.baselines._latent.CCA'
    >>> current_path("crossmetric.pairs")
    'crossmetric.pairs'
    """
    head = name
    while head:
        new = MOVED_MODULES.get(head)
        if new is not None:
            return new + name[len(head):]
        head = head.rpartition(".")[0]
    return name


class _AliasLoader(importlib.abc.Loader):
    """Loads an old path by importing the new one and handing back that very module."""

    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module) -> None:
        # the import system has just set module.__spec__ to the alias's spec: give it back
        module.__spec__ = self._spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    """``sys.meta_path`` entry answering the old paths of :data:`MOVED_MODULES`."""

    def find_spec(self, fullname, path=None, target=None):
        new = current_path(fullname)
        if new == fullname:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(new))


def install() -> None:
    """Put the finder of the old module paths first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        # first: an old submodule path (crossmetric.baselines._latent) must not be found as a
        # file under the moved package's __path__ and run a second time
        sys.meta_path.insert(0, _AliasFinder())


class _ForwardingModule(types.ModuleType):
    """A module whose attribute assignments also reach the modules its names came from."""

    def __setattr__(self, name: str, value) -> None:
        for target in self._targets_of(name):
            setattr(target, name, value)
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        for target in self._targets_of(name):
            delattr(target, name)
        super().__delattr__(name)

    def _targets_of(self, name: str):
        if name.startswith("__") and name.endswith("__"):  # __spec__, __path__: its own
            return ()
        return [t for t in self.__dict__.get("_forward_targets", ()) if name in vars(t)]


def forward_assignments(module_name: str, *targets: types.ModuleType) -> None:
    """Make ``setattr(module, name, v)`` also set ``name`` in each of ``targets`` holding it.

    Examples
    --------
    >>> import types, sys
    >>> new = types.ModuleType("new"); new.FLAG = True
    >>> old = sys.modules["old_example"] = types.ModuleType("old_example"); old.FLAG = new.FLAG
    >>> forward_assignments("old_example", new)
    >>> old.FLAG = False
    >>> new.FLAG
    False
    >>> del sys.modules["old_example"]
    """
    module = sys.modules[module_name]
    targets = tuple(t for t in targets if t is not module)
    module.__class__ = _ForwardingModule
    module.__dict__["_forward_targets"] = targets
