"""The starts and the held-out guard of LDML and CLML on a basis of their training samples.

LDML's ``L`` (and each of CLML's local ``L_s``) acts on all ``d`` features; its paper starts
from the leading principal axes, a truncation of the untrained distance. Here the map acts on
the coordinates ``Bᵀ x`` of an orthonormal basis ``B`` of the training samples -- their top
``n_components`` principal axes, or their span when ``n_components`` is ``None`` -- and the
model keeps ``c² ‖(I − B Bᵀ)(x − y)‖²`` with ``c`` fixed by the start
(:class:`crossmetric._solvers.span.BasisForm`):

* ``"identity"`` -- ``L = c I`` and the rest kept at ``c``: the untrained distance ``c² ‖x −
  y‖²``, ``c`` such that the median training-pair distance is 1 (the library's start);
* ``"pca"`` -- ``L = c I`` on the principal axes and nothing kept: the paper's start;
* ``"kissme"`` -- ``L = c L_K`` with ``L_Kᵀ L_K`` KISSME's metric of the training pairs on the
  basis coordinates (:func:`crossmetric._solvers.starting.kissme_start`), nothing kept: the
  closed form of one metric (the library's start).

``init="auto"`` scores them on the held-out identities (:mod:`crossmetric._solvers.early_stopping`)
and trains from the best; training changes ``L`` only, the kept part is fixed (neither
trained nor penalised). On the span of the samples (``n_components=None``) the identity
start's fit equals the plain full-space fit from the identity when ``alpha=0``: the gradient
of the pair loss lies in that span. (With ``alpha > 0`` the plain fit also shrinks ``L``
outside the span, L-BFGS in a few steps: the untrained distance there is lost.)
"""

from __future__ import annotations

import numpy as np

from crossmetric._base import squared_euclidean_matrix, squared_euclidean_rows
from crossmetric._solvers.descent import fit_lbfgs
from crossmetric._solvers.early_stopping import (
    choose_start,
    embedding_monitor,
    fold_start_hits,
)
from crossmetric._solvers.logistic import PairLogisticObjective
from crossmetric._solvers.span import basis_form, complement_distances, set_complement
from crossmetric._solvers.starting import (
    KISSME_START,
    build_starts,
    check_init,
    closed_start_distances,
    kissme_start,
    start_candidates,
)
from crossmetric.pairs._pair_data import PairData

__all__ = ["uses_basis", "basis_starts", "fit_in_basis", "store_in_basis"]


def uses_basis(est, val, n_components: int | None, X: np.ndarray) -> bool:
    """Whether a fit runs on a basis of the training samples ``X``: the ``"identity"`` start
    (always), ``"auto"`` with held-out identities, and ``"auto"`` at full rank
    (``n_components=None``) on samples fewer than their features (the plain identity start,
    exactly, in the span)."""
    init = est.init
    if not isinstance(init, str):
        return False
    if init in ("identity", KISSME_START) or (init == "auto" and val is not None):
        return True
    # (the training rows are distinct: fewer than the features, they span a subspace)
    return init == "auto" and n_components is None and X.shape[0] < X.shape[1]


def basis_starts(est, X, i, j, y, n_components, held_out: bool):
    """``(form, starts, folds)``: the :class:`~crossmetric._solvers.span.BasisForm` of the
    samples ``X`` (already divided by the learner's input scale) and pairs ``(i, j)`` labelled
    ``y``, the named starts in order of preference, each ``(L0, c, b0)`` (``L0``: p × k), and
    with a hold-out their scores on identity folds of these pairs
    (:func:`~crossmetric._solvers.early_stopping.fold_start_hits`: the untrained distance of
    the samples as they are, KISSME's on a basis of each fold's own training samples)."""
    form = basis_form(X, i, j, n_components)
    k = form.coords.shape[1]
    p = k if n_components is None else int(n_components)
    paper = "pca" if n_components is not None else "identity"
    names = start_candidates(check_init(est.init, ("auto", "identity", "kissme")), paper,
                             cross=False, features=True, equal_widths=True, held_out=held_out)

    def start(name):
        if name == KISSME_START:
            L = kissme_start(PairData(form.coords, form.coords, i, j), y, p)
            if L is None:
                return None
        else:
            L = np.eye(p, k)
        D = squared_euclidean_rows(form.coords[i] @ L.T, form.coords[j] @ L.T)
        if name == "identity":
            D = D + form.rest
        med = float(np.median(D))
        c = 1.0 / np.sqrt(med) if med > 0 else 1.0
        return c * L, c if name == "identity" else 0.0, float(med * c * c)

    starts = build_starts(names, start)

    def fold_distances(name, fold, _):
        train, y_train, validation = fold
        V = validation.data
        if name == "identity":  # all of it: the basis part and the rest kept
            return squared_euclidean_matrix(V.X, V.Y)
        # the others on a basis of the fold's own training samples, as the learner's
        B = basis_form(train.X, train.ix, train.iy, n_components).basis
        if B is not None:
            Xb = train.X @ B
            train = train._replace(X=Xb, Y=Xb)
            validation = validation._replace(data=V._replace(X=V.X @ B, Y=V.Y @ B))
        return closed_start_distances(name, (train, y_train, validation), p)

    folds = fold_start_hits(PairData(X, X, i, j), y, starts, fold_distances, tied=True,
                            random_state=est.random_state) if held_out else {}
    return form, starts, folds


def fit_in_basis(est, form, starts, folds, i, j, y, val, unit: float, *, pack, loss_grad,
                 embed):
    """Choose the start on the held-out samples of ``val`` (divided by ``unit`` to the units
    of ``form``) and the identity ``folds`` of :func:`basis_starts`, and train from it
    (L-BFGS, guarded).

    ``pack(L0, b0)`` is the learner's parameter vector at a start (threshold last);
    ``loss_grad(theta, objective)`` its objective on the basis coordinates; ``embed(theta,
    V, side)`` embeds the held-out samples of ``side`` ("x": probes, "y": gallery) given on
    the basis coordinates ``V``. Returns ``(theta, c)`` and sets ``init_``."""
    n = form.coords.shape[0]
    thetas = {name: pack(L0, b0) for name, (L0, _, b0) in starts.items()}
    scales = {name: c for name, (_, c, _) in starts.items()}
    state = {"c": 0.0}
    monitor = None
    if val is not None:
        B = form.basis
        V = {"x": val.data.X / unit, "y": val.data.Y / unit}
        Vb = {side: S if B is None else S @ B for side, S in V.items()}
        Dc = None if B is None else complement_distances(V["x"], V["y"], B)
        monitor = embedding_monitor(
            est, val, lambda t, side: embed(t, Vb[side], side), lambda t: t[-1], y,
            offset=None if Dc is None else (lambda: state["c"] ** 2 * Dc))
    est.init_, theta0 = choose_start(monitor, thetas,
                                     lambda name: state.update(c=scales[name]), folds)
    c = scales[est.init_]
    state["c"] = c
    objective = PairLogisticObjective(i, j, y, 1.0, n, n,
                                      offset=None if c == 0 else c * c * form.rest)
    theta = fit_lbfgs(est, lambda t: loss_grad(t, objective), theta0, monitor)
    return theta, c


def store_in_basis(est, components: np.ndarray, form, c: float, scale: float) -> np.ndarray:
    """Maps learned on the basis coordinates of samples divided by ``scale``, as maps of raw
    samples (``… × d``), and the kept part of the untrained distance (``complement_*_``)."""
    B = form.basis
    set_complement(est, c / scale if B is not None else 0.0, B)
    return (components if B is None else components @ B.T) / scale
