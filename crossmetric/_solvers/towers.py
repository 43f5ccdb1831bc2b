"""How PCCA and CMML find their towers: one dispatch for the tied (PCCA) and two-tower (CMML)
cases.

:func:`fit_logistic_towers` checks the shared settings, then either hands the pairs to the
stochastic solvers (:func:`crossmetric._solvers.stochastic.fit_pair_towers`) or builds one
tower per side -- linear, Nyström features, or an exact kernel with the K⁻¹-preconditioned
direction -- holds out validation pairs for ``early_stopping``, starts from
:func:`~crossmetric._solvers.starting.initial_weights` rescaled to a mean ``D²`` of 1 and runs
:func:`~crossmetric._solvers.descent.solve`. :func:`store_towers` / :func:`embed_tower` set
and apply the fitted towers under one naming scheme (``components_``, ``dual_coef_`` +
``kernel_map_``, ``feature_map_`` + ``feature_components_``, with ``_x`` / ``_y`` for CMML).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from crossmetric._base import with_complement
from crossmetric._solvers.descent import SOLVERS, blas_threads, solve
from crossmetric._solvers.early_stopping import (
    check_early_stopping,
    choose_start,
    clear,
    embedding_monitor,
    fold_start_hits,
    split_pairs,
)
from crossmetric._solvers.logistic import PairLogisticObjective, Tower, TowerProblem
from crossmetric._solvers.span import complement_distances, set_complement, tower_bases
from crossmetric._solvers.starting import (
    FITTED,
    KISSME_START,
    build_starts,
    cca_start,
    check_init,
    closed_start_distances,
    fitted_towers,
    initial_weights,
    kissme_start,
    rescale_to_unit_distance,
    ridge_of,
    start_candidates,
)
from crossmetric._solvers.stochastic import (
    STOCHASTIC_SOLVERS,
    fit_pair_towers,
    refuse_early_stopping,
    stochastic_settings,
)
from crossmetric._utils.checks import (
    check_choice,
    check_n_components,
    check_positive_int,
    check_positive_scalar,
)
from crossmetric.kernels import (
    KernelMap,
    NystroemMap,
    check_kernel_approximation,
    check_kernel_input,
)
from crossmetric.pairs._pair_data import PairData

__all__ = ["fit_logistic_towers", "store_towers", "embed_tower"]

_TOWER_ATTRS = ("components", "dual_coef", "kernel_map", "feature_map", "feature_components")
#: what bounds n_components for one tied tower, by its kind
_TIED_BOUND = {"linear": "the number of features",
               "nystroem": "the number of Nyström landmarks",
               "kernel": "the number of distinct training samples"}


def _build_tower(est, S, kernel, gamma, nystroem: bool, rng):
    """``(Tower, map, kind)`` for one side's samples ``S``."""
    if kernel == "linear":
        return Tower(S), None, "linear"
    if nystroem:  # Nyström features feed a linear tower, centred (see NystroemMap)
        fm = NystroemMap(kernel, gamma=gamma, n_landmarks=est.n_landmarks,
                         random_state=rng, center=True).fit(S)
        return Tower(fm.transform(S)), fm, "nystroem"
    km = KernelMap(kernel, gamma=gamma).fit(S)
    return Tower(km.train_kernel(), preconditioned=bool(est.preconditioned)), km, "kernel"


def fit_logistic_towers(est, data, y, *, kernels, gammas, side_names, name: str):
    """Fit PCCA's tied tower (one kernel) or CMML's two towers; returns ``(Ws, maps)``.

    Reads ``beta``, ``solver``, ``init``, ``max_iter``, ``tol``, the early-stopping settings,
    ``random_state``, ``verbose``, ``kernel_approximation``, ``n_landmarks``,
    ``preconditioned``, ``n_components`` and the stochastic settings from ``est``, and sets
    ``loss_curve_``, ``n_iter_`` and the validation attributes on it. ``kernels`` and
    ``gammas`` hold one entry per tower (checked kernels), ``side_names`` name each side's
    samples in error messages.
    """
    beta = check_positive_scalar(est.beta, "beta")
    solver = check_choice(est.solver, "solver", SOLVERS + STOCHASTIC_SOLVERS)
    init = check_init(est.init)
    max_iter = check_positive_int(est.max_iter, "max_iter")
    tol = check_positive_scalar(est.tol, "tol", allow_zero=True)
    _, _, patience = check_early_stopping(est)
    rng = check_random_state(est.random_state)
    approximation = check_kernel_approximation(
        est.kernel_approximation, n_samples=max(data.X.shape[0], data.Y.shape[0]),
        learner=name)
    tied = len(kernels) == 1
    drop_towers(est, ("",) if tied else ("_x", "_y"))  # a refit with another kernel
    if solver in STOCHASTIC_SOLVERS:
        refuse_early_stopping(est, solver)
        settings = stochastic_settings(est)
        settings.update(max_iter=max_iter, tol=tol, rng=rng)
        if init == FITTED:
            raise ValueError(f"init=<fitted estimator> needs a full-batch solver, not "
                             f"solver={solver!r}.")
        if init == KISSME_START:
            raise ValueError(f"init='kissme' needs a full-batch solver, not solver={solver!r}.")
        start = est._paper_init if init in ("auto", "cca") else init
        Ws, maps, est.loss_curve_, est.n_iter_ = fit_pair_towers(
            data, y, tied=tied, kernels=kernels, gammas=gammas, approximation=approximation,
            n_landmarks=est.n_landmarks, n_components=est.n_components, beta=beta, init=start,
            solver=solver, name=name, **settings)
        est.init_ = start
        clear(est)
        return Ws, maps
    data, y, val = split_pairs(est, data, y, tied=tied)
    sides = [data.X] if tied else [data.X, data.Y]
    towers, maps, kinds = [], [], []
    for S, kernel, gamma, side in zip(sides, kernels, gammas, side_names, strict=True):
        check_kernel_input(S, kernel, side)
        tower, fmap, kind = _build_tower(est, S, kernel, gamma, approximation == "nystroem",
                                         rng)
        towers.append(tower)
        maps.append(fmap)
        kinds.append(kind)
    what = (_TIED_BOUND[kinds[0]] if tied
            else "features or kernel samples of both modalities together")
    if est.n_components is not None:
        k = check_n_components(est.n_components, sum(t.Phi.shape[1] for t in towers),
                               what=what)
    # linear towers on wide views: learned in the span of the training samples (exact for
    # the starts in it; the paper's own start, drawn over every feature, keeps the feature
    # space, as the paper fits it, unless full rank would form a d × d tower)
    joint = tied or data.X.shape[1] == data.Y.shape[1]
    in_span = all(kind == "linear" for kind in kinds) and (
        init not in ("random", "pca") or est.n_components is None)
    bases = tower_bases(sides, joint=joint) if in_span else [None] * len(towers)
    towers = [t if Q is None else Tower(S @ Q) for t, S, Q in zip(towers, sides, bases,
                                                                  strict=True)]
    if est.n_components is None:  # the untrained distance is a point of the model
        k = min(t.Phi.shape[1] for t in towers)
    complement = bases[0] if joint else None  # the part no training sample spans
    state = {"scale": 0.0}
    exact = [kind == "kernel" for kind in kinds]
    problem = TowerProblem(towers, PairLogisticObjective(data.ix, data.iy, y, beta,
                                                         len(data.X), len(data.Y)))
    monitor = None
    if val is not None:
        # a tied tower's held-out samples may still be two sides (probes and gallery)
        vsides = [val.data.X] if val.tied else [val.data.X, val.data.Y]
        vtowers = [Tower(_tower_input(S, maps[min(s, len(maps) - 1)],
                                      bases[min(s, len(bases) - 1)]))
                   for s, S in enumerate(vsides)]
        Dc = (None if complement is None else
              complement_distances(vsides[0], vsides[-1], complement))
        monitor = embedding_monitor(
            est, val, lambda Ws, side: vtowers[0 if side == "x" else 1].embed(
                Ws[0 if side == "x" or tied else 1]), lambda Ws: 1.0, y, beta,
            offset=None if Dc is None else (lambda: state["scale"] ** 2 * Dc))
    names = start_candidates(init, est._paper_init, cross=not tied, features=not any(exact),
                             equal_widths=joint, held_out=monitor is not None,
                             full_rank=k >= max(t.Phi.shape[1] for t in towers))
    if not tied and "nystroem" in kinds and KISSME_START in names:
        # each side its own feature map: no shared coordinates for one metric on x − y
        if init == KISSME_START:
            raise ValueError("init='kissme' needs linear towers on views of one width, not "
                             "Nyström features (each view has its own feature map).")
        names.remove(KISSME_START)
    with blas_threads(sum(t.Phi.size for t in towers) * k):
        starts = build_starts(names, lambda name: _start(
            problem, towers, k, name, exact, rng, data, y, (est.init, bases),
            est.random_state))
        scales = {name: _complement_scale(name, W0, k, complement)
                  for name, W0 in starts.items()}
        folds = {} if monitor is None else fold_start_hits(
            PairData(towers[0].Phi, towers[-1].Phi, data.ix, data.iy), y, starts,
            lambda name, fold, _: closed_start_distances(name, fold, k, est.random_state),
            tied=tied, random_state=est.random_state)
        est.init_, W0 = choose_start(monitor, starts,
                                     lambda name: state.update(scale=scales[name]), folds)
        state["scale"] = scales[est.init_]
        if monitor is not None:
            monitor.update(0, W0)
        Ws, est.loss_curve_, est.n_iter_ = solve(
            problem, W0, solver=solver, is_kernel=any(exact), max_iter=max_iter, tol=tol,
            verbose=est.verbose, name=name, monitor=monitor)
    if monitor is None:
        clear(est)
    else:
        monitor.record(est)
    Ws = [W if Q is None else W @ Q.T for W, Q in zip(Ws, bases, strict=True)]
    set_complement(est, state["scale"], complement)
    return Ws, maps


def _tower_input(S, fmap, Q):
    """A side's samples as its tower sees them: through its feature map, or on the span
    coordinates of its training samples."""
    if fmap is not None:
        return fmap.transform(S)
    return S if Q is None else S @ Q


def _complement_scale(name: str, W0, k: int, Q) -> float:
    """The weight ``s`` of the untrained distance outside the training span
    (:mod:`crossmetric._solvers.span`): the identity start's scale when the towers hold every
    span coordinate, else 0 (the other starts lie in the span)."""
    if name != "identity" or Q is None or k < Q.shape[1]:
        return 0.0
    return float(np.linalg.norm(W0[0][0]))


def _start(problem, towers, k: int, name: str, exact, rng, data, y, fitted,
           random_state=None):
    """The rescaled starting weights of one named start (see
    :func:`~crossmetric._solvers.starting.start_candidates`; ``fitted``: ``(estimator,
    span bases)`` for :data:`~crossmetric._solvers.starting.FITTED`, its towers on the span
    coordinates, ``k`` rows; ``random_state``: the learner's, for the closed form's size).
    The untrained distance, the closed form and a fitted estimator keep the two towers'
    relative scale (only their common scale moves to a mean ``D²`` of 1), so that their
    ranking of the pairs is exactly theirs."""
    if name == FITTED:
        estimator, bases = fitted
        W0 = []
        for W, Q, t in zip(fitted_towers(estimator, len(towers) == 2), bases, towers,
                           strict=True):
            if W.shape[1] != (Q.shape[0] if Q is not None else t.Phi.shape[1]):
                raise ValueError(f"init: the fitted {type(estimator).__name__} has "
                                 f"{W.shape[1]} features per tower, the data "
                                 f"{Q.shape[0] if Q is not None else t.Phi.shape[1]}.")
            W = W if Q is None else W @ Q
            out = np.zeros((k, W.shape[1]))
            out[:min(k, W.shape[0])] = W[:k]
            W0.append(out)
        return rescale_to_unit_distance(problem, W0, balance=False)
    if name == KISSME_START:
        Phi_y = towers[-1].Phi if len(towers) == 2 else towers[0].Phi
        L = kissme_start(PairData(towers[0].Phi, Phi_y, data.ix, data.iy), y, k)
        if L is None:
            return None
        return rescale_to_unit_distance(problem, [L.copy() for _ in towers], balance=False)
    if name.startswith("cca"):
        W0 = list(cca_start(towers[0].Phi, towers[1].Phi, data.ix, data.iy, y, k,
                            ridge_of(name), random_state=random_state))
    else:
        W0 = [initial_weights(t.Phi, k, name, rng, e) for t, e in zip(towers, exact,
                                                                     strict=True)]
    return rescale_to_unit_distance(problem, W0, balance=name in ("random", "pca"))


def drop_towers(est, suffixes) -> None:
    """Remove the fitted towers of every side (``suffixes``: ``("",)`` or ``("_x", "_y")``)."""
    for suffix in suffixes:
        for attr in _TOWER_ATTRS:
            est.__dict__.pop(f"{attr}{suffix}_", None)


def store_towers(est, Ws, maps, suffixes) -> None:
    """Set each side's fitted tower: ``components{s}_`` (linear), ``dual_coef{s}_`` and
    ``kernel_map{s}_`` (exact kernel) or ``feature_map{s}_`` and ``feature_components{s}_``
    (Nyström), ``s`` the side's suffix."""
    drop_towers(est, suffixes)
    for suffix, W, fmap in zip(suffixes, Ws, maps, strict=True):
        if fmap is None:
            setattr(est, f"components{suffix}_", W)
        elif isinstance(fmap, NystroemMap):
            setattr(est, f"feature_map{suffix}_", fmap)
            setattr(est, f"feature_components{suffix}_", W)
        else:
            setattr(est, f"dual_coef{suffix}_", W)
            setattr(est, f"kernel_map{suffix}_", fmap)


def embed_tower(est, S: np.ndarray, suffix: str) -> np.ndarray:
    """One side's fitted tower applied to samples ``S`` (with the untrained coordinates of
    the part outside the training span appended, scaled, when the model keeps them:
    :mod:`crossmetric._solvers.span`)."""
    return with_complement(est, _embed_learned(est, S, suffix), S)


def _embed_learned(est, S: np.ndarray, suffix: str) -> np.ndarray:
    fmap = getattr(est, f"feature_map{suffix}_", None)
    if fmap is not None:
        return fmap.transform(S) @ getattr(est, f"feature_components{suffix}_").T
    kmap = getattr(est, f"kernel_map{suffix}_", None)
    if kmap is None:
        return S @ getattr(est, f"components{suffix}_").T
    return kmap.transform(S) @ getattr(est, f"dual_coef{suffix}_").T
