"""Seed ensembles: one pair learner trained from several random starts, distances averaged.

A learner trained by stochastic optimisation from few identities (DeepGSM from scratch on
150 persons, say) lands in a different solution for every seed, and the rank-1 of one run
varies by several points with the seed alone. Averaging the learned distances of a few
independently seeded runs removes much of that variance; it is the usual remedy for it, and
costs one training per member.
"""

from __future__ import annotations

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from crossmetric._base import PairDecisionMixin
from crossmetric._utils.checks import check_pair_labels, check_positive_int
from crossmetric.learners._threshold import best_threshold

__all__ = ["SeedEnsemble", "member_seeds"]


def member_seeds(random_state, n_members: int) -> list[int]:
    """The ``random_state`` of each member.

    Member 0 gets ``random_state`` itself when it is an int (so that its model is the one
    ``clone(estimator).set_params(random_state=random_state)`` fits alone); otherwise one int
    is drawn from ``random_state``. Member ``i ≥ 1`` gets an int from ``SeedSequence((s, i))``,
    ``s`` being member 0's seed.
    """
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        s = int(random_state)
    else:
        s = int(check_random_state(random_state).randint(2**31 - 1))
    return [s] + [int(np.random.SeedSequence((s, i)).generate_state(1)[0] >> 1)
                  for i in range(1, n_members)]


def _fit_member(estimator, seed, pairs, y, fit_params):
    return clone(estimator).set_params(random_state=seed).fit(pairs, y, **fit_params)


class SeedEnsemble(PairDecisionMixin, BaseEstimator):
    """The mean learned distance of ``n_members`` copies of a pair learner, each seeded anew.

    ``pair_score``, ``decision_function``, ``predict``, ``score`` and ``calibrate_threshold``
    act on the mean distance, as a single learner's do on its own
    (:class:`crossmetric._base.PairDecisionMixin`).

    Parameters
    ----------
    estimator : pair learner
        Any crossmetric pair learner with a ``random_state`` parameter (its ``preprocessor``
        is used as set). Cloned for every member, never fitted in place.
    n_members : int, default=3
    random_state : int, RandomState instance or None, default=None
        Seeds of the members (:func:`member_seeds`): with an int, member 0 is the estimator
        fitted with that ``random_state``, so the ensemble's first member is the single model.
    n_jobs : int or None, default=None
        Members trained in parallel with joblib (``None``: one after the other; a learner
        that is itself multi-threaded, as DeepGSM on a CPU, gains little from more).

    Attributes
    ----------
    estimators_ : list
        The fitted members.
    seeds_ : list of int
    threshold_ : float
        Accuracy-optimal cut on the mean distance of the training pairs (the middle of the
        gap when the training pairs are separated), as the members calibrate theirs.
    classes_ : ndarray [-1, 1]

    Notes
    -----
    Distances are averaged, not embeddings: an ensemble has no single ``transform_x`` (each
    member's embedding is in ``estimators_[i]``). A GSM-type or squared-Euclidean distance of
    the members' concatenated embeddings, suitably scaled, equals the mean, but that does not
    hold for every learner, so no embedding is offered.

    Examples
    --------
    >>> from crossmetric import GSM, SeedEnsemble, make_pairs
    >>> from crossmetric.datasets import make_cross_modal
    >>> d = make_cross_modal(120, n_classes=6, random_state=0)
    >>> pairs, y = make_pairs(d.labels, d.labels, max_positives=300, random_state=0)
    >>> gsm = GSM(n_components=4, preprocessor=(d.X, d.Y))
    >>> ens = SeedEnsemble(gsm, n_members=3, random_state=0).fit(pairs, y)
    >>> ens.seeds_[0]  # member 0 is GSM(random_state=0) itself
    0
    >>> ens.cross_distance(d.X[:2], d.Y[:3]).shape
    (2, 3)
    """

    def __init__(self, estimator, *, n_members: int = 3, random_state=None, n_jobs=None):
        self.estimator = estimator
        self.n_members = n_members
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, pairs, y, **fit_params):
        """Fit every member on the same pairs (``fit_params``, e.g. DeepGSM's ``groups``,
        are passed to each).

        Returns
        -------
        self
        """
        check_positive_int(self.n_members, "n_members")
        if "random_state" not in self.estimator.get_params():
            raise ValueError(f"estimator must have a random_state parameter to seed the "
                             f"members; {type(self.estimator).__name__} has none.")
        y = check_pair_labels(y)
        self.seeds_ = member_seeds(self.random_state, int(self.n_members))
        self.estimators_ = Parallel(n_jobs=self.n_jobs)(
            delayed(_fit_member)(self.estimator, s, pairs, y, fit_params) for s in self.seeds_)
        self.classes_ = np.array([-1, 1])
        self.threshold_ = float(best_threshold(self.pair_distance(pairs), y, "accuracy"))
        return self

    # ------------------------------------------------------------------- distances
    def pair_distance(self, pairs) -> np.ndarray:
        """Mean over the members of their ``pair_distance`` (smaller = more alike)."""
        check_is_fitted(self)
        return np.mean([m.pair_distance(pairs) for m in self.estimators_], axis=0)

    def cross_distance(self, X, Y, **kwargs) -> np.ndarray:
        """Mean over the members of their ``cross_distance(X, Y)``, shape (n_x, n_y)."""
        check_is_fitted(self)
        out = self.estimators_[0].cross_distance(X, Y, **kwargs)
        for m in self.estimators_[1:]:
            out += m.cross_distance(X, Y, **kwargs)
        return out / len(self.estimators_)
