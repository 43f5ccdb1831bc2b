"""Moved to :mod:`crossmetric._solvers`: the objective to :mod:`~crossmetric._solvers.logistic`,
the solvers to :mod:`~crossmetric._solvers.descent`, the starting points to
:mod:`~crossmetric._solvers.starting`. This old import path re-exports them."""

from crossmetric._solvers.descent import *  # noqa: F403
from crossmetric._solvers.descent import (  # noqa: F401
    SMALL_PROBLEM_FLOPS,
    SOLVERS,
    _Plateau,
    _print_header,
    _print_row,
    _warn_not_converged,
    blas_threads,
    solve,
)
from crossmetric._solvers.logistic import *  # noqa: F403
from crossmetric._solvers.starting import INITS, initial_weights, rescale_to_unit_distance  # noqa: F401
