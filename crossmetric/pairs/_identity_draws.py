"""The random draws of identities that every splitter shares (one place, no layer above it).

:mod:`crossmetric.protocols.splits` builds the outer and inner splits on them;
:func:`crossmetric.pairs.group_pair_folds` and the solvers' early-stopping hold-out call them
directly, so that those lower layers need not import the protocols.
"""

from __future__ import annotations

import numpy as np

__all__ = ["deal_identities", "hold_out_identities"]


def deal_identities(n_identities: int, n_folds: int, rng) -> np.ndarray:
    """The fold of every identity: a random permutation dealt round-robin into ``n_folds``
    parts of (nearly) equal identity count -- one draw, ``rng.permutation(n_identities)``.

    Used by :func:`crossmetric.protocols.verification_splits` (``split="identity"``) and
    :func:`crossmetric.pairs.group_pair_folds`.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.pairs._identity_draws import deal_identities
    >>> np.bincount(deal_identities(7, 3, np.random.RandomState(0))).tolist()
    [3, 2, 2]
    """
    return rng.permutation(int(n_identities)) % int(n_folds)


def hold_out_identities(identities, n_test: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """``n_test`` identities drawn at random for testing and the others, in drawn order --
    one draw, ``rng.permutation(len(identities))`` (the same as NumPy's legacy
    ``rng.choice(identities, n_test, replace=False)``).

    Used by :func:`crossmetric.protocols.identification_splits` (``split="identity"``),
    :func:`crossmetric.protocols.reid_splits`, the early-stopping hold-out and
    :func:`crossmetric.reproduce.pku.pku_splits`.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.pairs._identity_draws import hold_out_identities
    >>> test, train = hold_out_identities(np.arange(10), 3, np.random.RandomState(0))
    >>> test.size, train.size, np.intersect1d(test, train).size
    (3, 7, 0)
    """
    identities = np.asarray(identities)
    perm = rng.permutation(identities.size)
    return identities[perm[:n_test]], identities[perm[n_test:]]
