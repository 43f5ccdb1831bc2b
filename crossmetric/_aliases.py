"""Old module paths that keep working after their code moved (imports and monkeypatching).

A module whose names moved elsewhere imports them back (``from new import name``), so reading
``old.name`` and ``from old import name`` work. Assigning ``old.name = value`` (what
``monkeypatch.setattr(old, "name", value)`` does) would only rebind the old module's copy,
while the moved code reads the new module's globals: :func:`forward_assignments` makes such an
assignment also rebind the name in every module of ``targets`` that holds it, so a test or a
benchmark that patches a flag or a helper through the old path still changes what runs.
"""

from __future__ import annotations

import sys
import types

__all__ = ["forward_assignments"]


class _ForwardingModule(types.ModuleType):
    """A module whose attribute assignments also reach the modules its names came from."""

    def __setattr__(self, name: str, value) -> None:
        for target in self.__dict__.get("_forward_targets", ()):
            if name in vars(target):
                setattr(target, name, value)
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        for target in self.__dict__.get("_forward_targets", ()):
            if name in vars(target):
                delattr(target, name)
        super().__delattr__(name)


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
