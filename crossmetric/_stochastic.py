"""Moved to :mod:`crossmetric._solvers.stochastic`; this old import path is the same module."""

import sys

from crossmetric._solvers import stochastic as _module

sys.modules[__name__] = _module
