"""Moved to :mod:`crossmetric._solvers.early_stopping`; this old import path is the same module."""

import sys

from crossmetric._solvers import early_stopping as _module

sys.modules[__name__] = _module
