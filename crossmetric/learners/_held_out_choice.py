"""Settings of a closed form chosen on held-out training identities: ``n_components="auto"``
(and ``reg`` / ``alpha="auto"``) of CCA, PLS, KCCA, CDFE, MvDA and CSR.

A closed form has no start to keep and no iterations to stop: what decides whether it beats
the untrained distance is its size and ridge. Ten canonical directions keep too little of a
face descriptor (CUFS photo → sketch, HOG, 3 splits: CCA 85.1 % rank-1 at 10 components,
97.1 % at 64, the untrained distance 95.2 %), and the ridge that keeps CDFE or CSR from
collapsing moves by decades between data sets. :class:`HeldOutChoice` lets a parameter be
``"auto"``: the training identities are dealt into :data:`AUTO_FOLDS` folds
(:func:`~crossmetric._solvers.early_stopping.identity_folds`, the grouping of the iterative
learners' hold-out), every candidate of the class's ``_auto_grid``
(:mod:`crossmetric.learners._auto_grids`) is fitted on the other folds and scored on each
fold's identities by the iterative learners' measure (rank-1 of the first view's samples
against the second's, ties as misses:
:meth:`~crossmetric._solvers.early_stopping.EarlyStopping.score_matrix`), the scan is the one
of every selection (:func:`~crossmetric._solvers.selection_scan.scan_candidates`: the best mean
wins, a tie keeps the earlier, smaller candidate), and the chosen setting is refitted on all
the training pairs. Where the pairs do not describe identities (the rule of
``early_stopping="auto"``: 30 to 999 identities, all their same-identity pairs given) the
class's ``_auto_fallback`` is used: its former fixed default (also where the folds cannot be
drawn: a fold without a negative training pair). The choice is ours, not the
papers' (they cross-validate the ridge of CCA and CDFE, cmml §4, without saying how).

**Never worse than the untrained distance.** Where both views have the same features, the
untrained distance ``‖x − y‖²`` is the first candidate of the scan (:data:`UNTRAINED`), scored
on the same folds: when no setting of the closed form beats it on held-out identities (a tie
keeps it), the learner keeps it (``untrained_``), as an iterative learner keeps its start when
training does not beat it. It is a point of the learner's own towers: both the identity on an
orthonormal basis ``Q`` of the training samples' span, with the untrained distance of the part
outside it kept (``complement_scale_ = 1``, :mod:`crossmetric._solvers.span`), compared as they
are (no cosine), so ``pair_distance`` is the untrained distance exactly, in ``O(d · span)``
memory on wide views. Kernel learners, whose towers start from a kernel map, do not offer it.
CDFE keeps it on every split of CUFS (HOG, dense SIFT), VIPeR LOMO and PKU-Sketch (39.5 →
93.3 % rank-1 on CUFS HOG) and PLS on CUFS HOG (88.8 → 93.3 %); where a closed form beats the
untrained distance by a margin (VIPeR, CUFS dense SIFT) it is never kept.
"""

from __future__ import annotations

import copy
import itertools

import numpy as np

from crossmetric._base import squared_euclidean_matrix
from crossmetric._solvers.early_stopping import scan_identity_folds
from crossmetric._solvers.span import set_complement, tower_bases
from crossmetric.pairs._pair_data import PairData

__all__ = ["HeldOutChoice", "AUTO_FOLDS", "UNTRAINED"]

#: folds of the training identities each candidate is scored on (every identity once)
AUTO_FOLDS = 3
#: the scan's candidate (and ``chosen_params_``) that keeps the untrained distance
UNTRAINED = {"untrained": True}


def _component_cap(data: PairData, y: np.ndarray) -> int:
    """The most directions every closed form can take from these pairs: no more than the
    narrower view's features, the distinct samples of each side among the positive pairs, or
    the positive pairs less one. Larger ``"auto"`` candidates and fallbacks are cut to it (as
    the protocols cut a fixed ``n_components`` to the narrower view)."""
    pos = y == 1
    return max(1, min(data.X.shape[1], data.Y.shape[1], np.unique(data.ix[pos]).size,
                      np.unique(data.iy[pos]).size, int(pos.sum()) - 1))


def _is_auto(value) -> bool:
    return isinstance(value, str) and value == "auto"


class HeldOutChoice:
    """Mixin of a closed-form pair learner: parameters set to ``"auto"`` are chosen on held-out
    training identities (see the module docstring).

    A class declares ``_auto_grid`` (parameter → candidate values, in order of preference) and
    ``_auto_fallback`` (parameter → the value used without identities to hold out); a class
    whose towers can hold the untrained distance sets ``_holds_untrained`` and implements
    ``_set_untrained(components)`` (both towers ``x ↦ components x``, no centring). After
    ``fit``, ``chosen_params_`` holds the values used for the ``"auto"`` parameters (or
    :data:`UNTRAINED`), ``untrained_`` whether the untrained distance was kept, and
    ``selection_scores_`` each candidate's mean held-out rank-1 (``None`` without a choice).
    """

    _auto_grid: dict = {}
    _auto_fallback: dict = {}
    _holds_untrained = False

    def _auto_names(self) -> list[str]:
        return [name for name in self._auto_grid if _is_auto(getattr(self, name))]

    def _auto_values(self, name: str, data: PairData, y: np.ndarray) -> tuple:
        """The candidates of ``name`` on these pairs (its ``_auto_grid`` entry; a class whose
        candidates scale with the data, as KCCA's bandwidths, overrides this)."""
        return tuple(self._auto_grid[name])

    def _with(self, params: dict):
        """A shallow copy of this learner with ``params`` set (the data are not copied)."""
        twin = copy.copy(self)
        for name, value in params.items():
            setattr(twin, name, value)
        return twin

    def _fit_settings(self, data: PairData, y: np.ndarray) -> None:
        self.untrained_ = False  # a refit starts from the learner's own towers
        set_complement(self, 0.0, None)
        names = self._auto_names()
        if not names:
            self._fit(data, y)  # type: ignore[attr-defined]
            return
        cap = _component_cap(data, y)

        def cut(name, value):  # a size within what the pairs allow
            return min(value, cap) if name == "n_components" else value

        candidates = [tuple(dict.fromkeys(cut(n, v) for v in self._auto_values(n, data, y)))
                      for n in names]
        grid = [dict(zip(names, values, strict=True))
                for values in itertools.product(*candidates)]
        if self._holds_untrained and data.X.shape[1] == data.Y.shape[1]:
            grid.insert(0, dict(UNTRAINED))
        scan = scan_identity_folds(data, y, grid, self._held_out_distances,
                                   tied=not self._cross_modal,  # type: ignore[attr-defined]
                                   n_folds=AUTO_FOLDS,
                                   random_state=getattr(self, "random_state", None))
        chosen = (scan.params[scan.best_index] if scan is not None else
                  {n: cut(n, self._auto_fallback[n]) for n in names})
        if chosen == UNTRAINED:
            self._keep_untrained(data, y)
            self.untrained_ = True
        else:
            fitted = self._with(chosen)
            fitted._fit(data, y)
            own = set(self.get_params(deep=False))  # type: ignore[attr-defined]
            for key, value in vars(fitted).items():
                if key not in own:
                    setattr(self, key, value)
        self.chosen_params_ = dict(chosen)
        self.selection_scores_ = None if scan is None else [
            {"params": c["params"], "rank1": c["mean_score"]} for c in scan.candidates()]

    def _keep_untrained(self, data: PairData, y: np.ndarray) -> None:
        """Both towers the identity on the span of the training samples, the untrained distance
        kept outside it: ``pair_distance`` is ``‖x − y‖²``. What an earlier fit of the learner
        left (its correlations, eigenvalues, ...) is dropped: it describes no part of this
        model."""
        for key in [k for k in vars(self) if k.endswith("_") and not k.startswith(
                ("_", "n_features_in"))]:
            delattr(self, key)
        Q = tower_bases([data.X[np.unique(data.ix)], data.Y[np.unique(data.iy)]], joint=True)[0]
        d = data.X.shape[1]
        self._set_untrained(np.eye(d) if Q is None else Q.T)  # type: ignore[attr-defined]
        set_complement(self, 0.0 if Q is None else 1.0, Q)

    def _held_out_distances(self, params: dict, fold) -> np.ndarray:
        """The distances between one fold's held-out samples of the learner fitted with
        ``params`` on the fold's training pairs (the untrained distance for
        :data:`UNTRAINED`)."""
        train, y_train, validation = fold
        V = validation.data
        if params == UNTRAINED:
            return squared_euclidean_matrix(V.X, V.Y)
        est = self._with(params)
        est._fit(train, y_train)
        return est._matrix_distance(est._embed_x(V.X), est._embed_y(V.Y))
