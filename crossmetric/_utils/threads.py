"""BLAS thread limits for the many small linear-algebra calls of the solvers.

:func:`threadpoolctl.threadpool_limits` looks up every library the process has loaded on each
call (about 1-2 ms with PyTorch and two OpenBLAS builds loaded); a fit of a tower learner makes
thousands of such calls (its span bases' QR, its closed-form starts' folds). The controller
here looks them up once per process and only sets the limits afterwards (20 µs).
"""

from __future__ import annotations

from functools import lru_cache

import numpy  # noqa: F401  -- NumPy's and SciPy's BLAS loaded before the controller looks
import scipy.linalg  # noqa: F401
from threadpoolctl import ThreadpoolController

__all__ = ["blas_limit"]


@lru_cache(maxsize=1)
def _controller() -> ThreadpoolController:
    return ThreadpoolController()


def blas_limit(limits: int | None):
    """Context manager: at most ``limits`` BLAS threads inside (``None``: as they are).

    Examples
    --------
    >>> from crossmetric._utils.threads import blas_limit
    >>> with blas_limit(1):
    ...     pass
    """
    return _controller().limit(limits=limits, user_api="blas")
