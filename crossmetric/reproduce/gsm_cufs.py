"""``gsm-cufs``: sketch → photo recognition on CUFS, the GSM paper's Table II protocol.

The GSM paper (§5.3, Table II) trains on 88 persons of CUFS's CUHK-student part and tests the
sketches of the other 100 against their photos (rank-1 "recognition rate": ET 71.0 %, MRF
96.0 %, MRF+ 99.0 %, the deep GSM 100.0 %). That part is not in ``../shared/data/cufs``; the AR
and XM2VTS parts are, with the photo-sketch literature's split. What this reproduction takes
from the paper and what stands in:

* **Split**: the fixed one of the data, ``train/`` (180 persons) trains, ``test/`` (238) tests;
  the test sketches are the probes, the test photos the gallery (CMC, rank-1 = Table II's
  recognition rate). ``n_splits`` > 1 repeats training on the same split with other seeds
  (the learners' seeds and the training negatives): mean ± std over seeds.
* **DeepGSM** (the paper's model, end to end on the images): the aligned 250 × 200 images
  (grey: the sketches are pencil drawings), shifted by up to 10 pixels during training (the
  paper crops 230 × 180 "at the center with a small random perturbation", i.e. ±10 pixels),
  30 persons a round (the paper's 30 individuals per iteration; one photo and one sketch
  each, so 30 × 30 pairs), the paper's network with r = 400 units; :data:`GSM_CUFS_DEEPGSM`
  holds the recipe, ``epochs`` its length and ``device`` where it runs.
* **GSM on features** (the paper's §5.5 (i) model on fixed features): the dense SIFT of the
  160 × 160 face (:func:`crossmetric.reproduce.cufs.cufs_features`, the CML-AUC descriptor),
  one PCA of both modalities fitted on the training images (``pca_components``), the
  registry's paper grid (``MethodSpec.paper_grid``: GSM's dimension, then μ, with our start
  at the untrained distance, ``init="identity"``, as one more candidate:
  :data:`crossmetric.registry.GSM_PAPER_GRID`) chosen by 3-fold inner cross-validation on the
  training persons (rank-1 of the held-out training persons; the PCA refitted on each inner
  training side) -- never on a test person.
* **GSM's affine Euclidean special case** (``structure="euclidean"``, the paper's Baseline-1,
  §5.5 (ii)), trained and selected the same way: the paper's claim that the generalized form
  beats its special cases, checked here.
* **Euclidean**: the squared distance of the same PCA features (the floor).

Every fit and measurement is :func:`crossmetric.protocols.reid.evaluate_reid` on one
:class:`crossmetric.protocols.Split` (the fixed split), the selection
:func:`crossmetric.protocols.model_selection.search_stages`: no loop of its own here.
"""

from __future__ import annotations

import math
import os
from functools import partial

import numpy as np
from sklearn.utils import check_random_state

from crossmetric.reproduce.published import PUBLISHED
from crossmetric.reproduce.results import GUARDED, ReproductionResult, _progress

__all__ = ["GSM_CUFS_METHODS", "GSM_CUFS_DEEPGSM", "cufs_fixed_split", "gsm_cufs_deepgsm",
           "reproduce_gsm_cufs"]

#: methods of ``gsm-cufs`` (``methods=`` picks some): ``gsm-guarded`` is GSM's paper run with
#: the library's start and held-out guard (:func:`crossmetric.registry.guarded_estimator`),
#: selected on the same grid, beside the paper's plain run
GSM_CUFS_METHODS = ("euclidean", "gsm", "gsm-guarded", "gsm-euclidean", "deepgsm")

#: DeepGSM's recipe for ``gsm-cufs`` (GSM §5.3 where the paper says, our choice otherwise):
#: 30 persons a round, one sketch (x) and one photo (y) each (the paper: 30 individuals per
#: iteration); r = 400 (the paper's network); up-to-10-pixel random shifts (the paper's
#: 250 × 200 → 230 × 180 crop "with a small random perturbation"); Adam at 1e-3 with a
#: cosine schedule over ``epochs`` passes of the training persons (the paper gives SGD with no
#: step sizes; Adam is the PKU-Sketch recipe's, :data:`crossmetric.reproduce.PKU_DEEPGSM`);
#: the paper's weight penalties λ = μ = 5e-4; ``tol=None``: a fixed schedule, no plateau test.
GSM_CUFS_DEEPGSM: dict = {
    "hidden_units": 400, "structure": "generalized", "n_identities": 30, "n_images_x": 1,
    "n_images_y": 1, "batch_mode": "sample", "optimizer": "adam", "learning_rate": 1e-3,
    "lr_schedule": "cosine", "weight_decay": 5e-4, "mu": 5e-4, "init": "default",
    "augment": 10, "test_flip": False, "early_stopping": False, "tol": None,
}

_DISPLAY = {"euclidean": "Euclidean (dense SIFT, PCA)", "gsm": "GSM (dense SIFT, PCA)",
            "gsm-guarded": "GSM guarded (dense SIFT, PCA)",
            "gsm-euclidean": "GSM affine Euclidean case (dense SIFT, PCA)",
            "deepgsm": "DeepGSM (images)"}


def gsm_cufs_deepgsm(*, epochs: int = 500, n_train: int = 180, device: str = "auto",
                     **overrides):
    """An unfitted :class:`crossmetric.DeepGSM` with :data:`GSM_CUFS_DEEPGSM`.

    ``epochs`` passes over ``n_train`` training persons set ``max_iter`` (rounds of
    ``n_identities`` persons); ``overrides`` replace recipe entries (smoke runs).
    """
    from crossmetric._utils.checks import check_positive_int
    from crossmetric.deep import DeepGSM

    epochs = check_positive_int(epochs, "epochs")
    params = {**GSM_CUFS_DEEPGSM, "device": device, **overrides}
    rounds = epochs * math.ceil(int(n_train) / int(params["n_identities"]))
    return DeepGSM(**{"max_iter": rounds, **params})


def cufs_fixed_split(labels, is_test, *, n_negatives: int = 10, random_state=None):
    """The fixed split as a :class:`crossmetric.protocols.Split` over stacked rows.

    Rows ``0 … n−1`` are the sketches of persons ``labels``, rows ``n … 2n−1`` their photos
    (the layout :func:`reproduce_gsm_cufs` stacks): training pairs join a training sketch and
    a training photo (every positive, ``n_negatives`` random negatives each); the test
    sketches are the probes and the test photos the gallery.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.reproduce.gsm_cufs import cufs_fixed_split
    >>> sp = cufs_fixed_split(np.array(["a", "b", "c", "d"]), [False, False, True, True],
    ...                       n_negatives=1, random_state=0)
    >>> sp.probe_rows.tolist(), sp.gallery_rows.tolist(), sorted(sp.train_y.tolist())
    ([2, 3], [6, 7], [-1, -1, 1, 1])
    """
    from crossmetric.pairs import make_pairs
    from crossmetric.protocols import Split

    labels, is_test = np.asarray(labels), np.asarray(is_test, dtype=bool)
    n = labels.size
    rng = check_random_state(random_state)
    tr = np.flatnonzero(~is_test)
    pairs, y = make_pairs(labels[tr], labels[tr], n_negatives=n_negatives, random_state=rng)
    pairs = np.c_[tr[pairs[:, 0]], n + tr[pairs[:, 1]]].astype(np.int64)
    te = np.flatnonzero(is_test)
    return Split("identification", 0, pairs, y, probe_rows=te, gallery_rows=n + te,
                 seed=int(rng.randint(2**31 - 1)))


def _joint_pca(k: int):
    """``prepare`` of :func:`crossmetric.protocols.model_selection.search_params`: the view step's
    one PCA of both modalities' training rows (same descriptor, so one basis keeps them
    comparable; :func:`crossmetric.protocols.views.pca_views` with ``joint=True``)."""
    from crossmetric.protocols.views import _pca_fit_views

    def prepare(X, Y, pairs, y, est):
        return _pca_fit_views(X, Y, pairs, k, joint=True)

    return prepare


def reproduce_gsm_cufs(data_home, *, n_splits: int = 1, seed: int = 0, verbose: bool = True,
                       methods=None, device: str = "auto", epochs: int = 500,
                       pca_components: int = 100, n_negatives: int = 10,
                       tune: bool = True, gsm_params=None, deepgsm_params=None,
                       image_size=(200, 250),
                       n_persons=None) -> ReproductionResult:
    """GSM Table II protocol on CUFS (see the module docstring for every choice).

    Parameters
    ----------
    data_home : path
        Folder holding ``cufs/``.
    n_splits : int, default=1
        Trainings on the fixed split, each from its own seed (drawn from ``seed``).
    seed : int, default=0
    verbose : bool, default=True
    methods : sequence of str, optional
        Some of :data:`GSM_CUFS_METHODS` (default all).
    device : str, default="auto"
        DeepGSM's device (``"cuda"``, ``"cpu"``; ``"auto"``: CUDA when available).
    epochs : int, default=500
        DeepGSM's training length in passes over the training persons.
    pca_components : int, default=100
        The joint PCA of the dense SIFT features (Euclidean and GSM).
    n_negatives : int, default=10
        Negative training pairs per positive for GSM on features (DeepGSM draws its own
        all-pairs rounds).
    tune : bool, default=True
        Choose GSM's paper grid on the training persons (else the registry's settings).
    gsm_params : dict, optional
        Replaces the registry's GSM settings (e.g. ``max_iter`` for smoke runs; noted).
    deepgsm_params : dict, optional
        Replaces entries of :data:`GSM_CUFS_DEEPGSM` (smoke runs; the notes say so).
    image_size : (width, height), default=(200, 250)
        DeepGSM's input (the stored size; smaller for smoke runs).
    n_persons : (int, int), optional
        Use only this many training and test persons (drawn from ``seed``): smoke runs.

    Returns
    -------
    ReproductionResult
    """
    from crossmetric._utils.checks import check_positive_int
    from crossmetric.protocols.model_selection import search_stages
    from crossmetric.protocols.reid import evaluate_reid
    from crossmetric.registry import gsm_paper_grid, guarded_estimator, make_estimator
    from crossmetric.reproduce.cufs import cufs_features

    names = list(GSM_CUFS_METHODS if methods is None else
                 ([methods] if isinstance(methods, str) else methods))
    unknown = [m for m in names if m not in GSM_CUFS_METHODS]
    if unknown or not names:
        raise ValueError(f"methods: {(unknown or names)!r} is not a choice of gsm-cufs; "
                         f"expected some of {', '.join(GSM_CUFS_METHODS)}.")
    n_splits = check_positive_int(n_splits, "n_splits")
    pca_components = check_positive_int(pca_components, "pca_components")
    rng = check_random_state(seed)
    if names == ["deepgsm"]:     # no descriptor needed (and no OpenCV)
        data = _cufs_persons(data_home)
    else:
        _progress(verbose, "gsm-cufs: dense SIFT of the CUFS faces")
        data = cufs_features(data_home)
    labels, is_test = data["labels"], data["split"] == "test"
    keep = np.ones(labels.size, bool)
    if n_persons is not None:
        n_tr, n_te = (check_positive_int(v, "n_persons", minimum=2) for v in n_persons)
        keep[:] = False
        for part, k in ((~is_test, n_tr), (is_test, n_te)):
            rows = np.flatnonzero(part)
            keep[rng.choice(rows, min(k, rows.size), replace=False)] = True
    labels, is_test = labels[keep], is_test[keep]
    Fx, Fy = (None, None) if data["X"] is None else (data["X"][keep], data["Y"][keep])
    n_train = int((~is_test).sum())
    images = None
    if "deepgsm" in names:
        images = _cufs_images(data_home, labels, image_size)
    pub = PUBLISHED["gsm-cufs"]
    res = ReproductionResult("gsm-cufs", pub["source"])
    res.extra.update({"load_avg_start": round(os.getloadavg()[0], 2), "n_train": n_train,
                      "n_test": int(is_test.sum()), "pca_components": pca_components,
                      "epochs": epochs, "device": device})
    scores = {m: [] for m in names}
    cmcs, tuned, notes, warned = {m: [] for m in names}, [], {}, {}
    ids = np.r_[labels, labels]
    # the split is fixed (only the seeds vary): its training persons and their PCA once
    tr = np.flatnonzero(~is_test)
    prepare, Z = _joint_pca(pca_components), None
    if Fx is not None:
        Z = np.vstack(prepare(Fx, Fy, np.c_[tr, tr], None, None))
    for k in range(n_splits):
        split = cufs_fixed_split(labels, is_test, n_negatives=n_negatives, random_state=rng)
        for name in names:
            if name == "euclidean":
                est, V = None, Z
            elif name in ("gsm", "gsm-guarded", "gsm-euclidean"):
                structure = "euclidean" if name == "gsm-euclidean" else "generalized"
                make = guarded_estimator if name == f"gsm-{GUARDED}" else partial(
                    make_estimator, paper=True)
                est = make("gsm", random_state=split.seed, structure=structure,
                           **(gsm_params or {}))
                V = Z
                grid = gsm_paper_grid(structure)
                if tune and grid:
                    # the training persons only: rows of the training sketches and photos
                    found = search_stages(est, grid, Fx[tr], Fy[tr], labels[tr], n_splits=3,
                                          group="identity", n_negatives=n_negatives,
                                          max_positives=None, scoring="rank1",
                                          prepare=prepare, random_state=split.seed)
                    est.set_params(**found.best_params)
                    tuned.append({"method": name, "split": k, "params": found.best_params,
                                  "cv_rank1": found.best_score})
            else:
                est = gsm_cufs_deepgsm(epochs=epochs, n_train=n_train, device=device,
                                       random_state=split.seed, **(deepgsm_params or {}))
                V = images
            _progress(verbose, f"gsm-cufs: seed {k + 1}/{n_splits}, {_DISPLAY[name]}")
            out = evaluate_reid(est, V, ids, split, max_rank=20)
            scores[name].append([100 * out[f"rank{r}"] for r in (1, 5, 10, 20)]
                                + [100 * out["map"], out["fit_seconds"]])
            cmcs[name].append(100 * np.asarray(out["cmc"]))
            for w in out["warnings"]:
                warned.setdefault(name, set()).add(w)
    if deepgsm_params and "deepgsm" in names:
        notes["deepgsm"] = f"GSM_CUFS_DEEPGSM overridden: {deepgsm_params}"
    for name in ("gsm", "gsm-guarded", "gsm-euclidean"):
        if gsm_params and name in names:
            notes[name] = f"registry settings overridden: {gsm_params}"
    for name, ws in warned.items():
        notes[name] = "; ".join(filter(None, [notes.get(name), "warned: " + ", ".join(
            sorted(ws))]))
    setting = f"{res.extra['n_test']} test"
    for name in names:
        vals = np.asarray(scores[name])
        paper = pub["rows"]["GSM (deep)"] if name == "deepgsm" else None
        for j, meas in enumerate(("rank-1", "rank-5", "rank-10", "rank-20", "mAP")):
            res.add(setting, _DISPLAY[name], meas, vals[:, j],
                    paper if meas == "rank-1" else None, note=notes.get(name, ""))
        res.extra.setdefault("seconds", {})[name] = float(vals[:, 5].sum())
        res.extra.setdefault("per_split", {})[_DISPLAY[name]] = {
            "rank-1": [round(float(v), 2) for v in vals[:, 0]]}
    for method, value in pub["rows"].items():   # Table II, on the CUHK-student part
        if method != "GSM (deep)":
            res.add("paper's part", f"{method} (published)", "rank-1", [], value,
                    note="CUHK-student part, not this data")
    res.extra["cmc"] = {_DISPLAY[m]: np.mean(c, axis=0) for m, c in cmcs.items()}
    res.extra["tuned"] = tuned
    res.extra["load_avg_end"] = round(os.getloadavg()[0], 2)
    return res


def _cufs_persons(data_home) -> dict:
    """The persons of :func:`crossmetric.reproduce.cufs.cufs_features` (same order) and their
    part of the split, without the descriptor (``X = Y = None``)."""
    from crossmetric.datasets import load_cufs

    b = load_cufs(data_home, "all", size=(8, 10), color="gray")
    sketch = np.flatnonzero(b.domains == "sketch")
    sketch = sketch[np.argsort(b.ids[sketch])]
    return {"X": None, "Y": None, "labels": b.ids[sketch], "split": b.split[sketch]}


def _cufs_images(data_home, labels, size):
    """Grey CUFS images at ``size`` (w, h), stacked as sketches of ``labels`` then photos."""
    from crossmetric.datasets import load_cufs

    b = load_cufs(data_home, "all", size=tuple(size), color="gray")
    rows = {key: r for r, key in enumerate(zip(b.ids.tolist(), b.domains.tolist(),
                                               strict=True))}
    order = [rows[(p, "sketch")] for p in labels] + [rows[(p, "photo")] for p in labels]
    return b.images[order]
