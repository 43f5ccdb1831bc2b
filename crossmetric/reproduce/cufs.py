"""``cml-auc-cufs``: the CML-AUC paper's CUFSF protocol (Tables I-II) on CUFS.

CUFSF's photos are not public; CUFS (AR + XM2VTS parts, 418 persons, one photo and one sketch
each) is its nearest public stand-in (``../shared/data/cufs/README.md``). What this
reproduction takes from the paper (cml-auc §IV-A, §V-B) and what it chooses:

* **Descriptor**: dense SIFT on the aligned face at three scales
  (:class:`crossmetric.features.DenseSIFT`: 32 × 32 cells every 16 pixels on the 160 × 160 face
  and its 96 × 96 and 32 × 32 rescales, 13,696 features). The face is the 160 × 160 region of
  rows 60-219 and columns 20-179 of CUFS's 250 × 200 aligned images (eyes near row 115: the
  crop holds brows to chin), grey.
* **Splits**: random splits by person, ``N_TEST = 238`` test persons and 180 training persons
  -- the sizes of the CUFS literature split (CUFSF: 494 / 700). Every split is drawn by
  :func:`crossmetric.protocols.run_protocols`, which fits and measures every method (no loop
  of its own here).
* **Measures**: on each split the sketches of the test persons are the probes and their photos
  the gallery; rank-1 from the probe × gallery distances, and AUC, 1−EER and VR@FPR=0.1 % from
  *all* probe × gallery pairs of the test persons (``pair_measures``), so the four numbers of
  Tables I-II come from the same test persons.
* **PCA**: the paper reduces the features by PCA and reports 800 dimensions for 700 training
  persons (§V-C1: the measures grow with the dimension up to 800). Here each method gets the
  features reduced to ``pca_components`` by one PCA fitted on the split's training sketches
  and photos together (``pca_joint``: one descriptor, so one basis keeps sketch and photo
  coordinates comparable -- separate PCAs per modality drop the Euclidean rank-1 to chance);
  default 100, below the 360 training images.
* **Model selection**: with ``tune=True`` (default) each method's parameters are chosen from
  its paper grid (``MethodSpec.paper_grid``: CML-AUC's γ-then-μ selection of §V-B, CMML's
  latent dimension, the cross-validated regularisers of CCA and CDFE) by 3-fold inner
  cross-validation on the training persons only, scored by the validation persons' rank-1.
* **Single-modal methods** (Maha_AUC, ITML, LDML, LMNN, NCA, Euclidean = the paper's "PCA")
  compare sketch and photo coordinates directly: both modalities have the same descriptor, as
  in Table I's first rows ("original features").

The published numbers are CUFSF's (Tables I-II), printed beside ours as the paper's reference,
not as a like-for-like target: the sets differ.
"""

from __future__ import annotations

import numpy as np

from crossmetric.reproduce.published import PUBLISHED
from crossmetric.reproduce.results import GUARDED, ReproductionResult, _progress

__all__ = ["CML_AUC_CUFS_METHODS", "N_TEST", "cufs_features", "reproduce_cml_auc_cufs"]

#: test persons per split (the CUFS literature split's 238; 180 persons train)
N_TEST = 238

#: methods of Tables I-II that crossmetric has (registry names), in the tables' order
CML_AUC_CUFS_METHODS = ("euclidean", "ldml", "itml", "lmnn", "nca", "mahaauc", "csr", "kcsr",
                        "cca", "kcca", "cdfe", "mvda", "cmml", "cmlauc", "cmlpauc")

#: registry name -> row name of the paper's tables
_PAPER_NAME = {"euclidean": "PCA", "ldml": "LDML", "itml": "ITML", "lmnn": "LMNN",
               "nca": "NCA", "mahaauc": "Maha_AUC", "csr": "CSR", "kcsr": "KCSR", "cca": "CCA",
               "kcca": "KCCA", "cdfe": "CDFE", "mvda": "MvDA", "cmml": "CMML",
               "cmlauc": "CML_AUC", "cmlpauc": "CML_pAUC"}

#: our measure name -> (paper column, scale to percent)
_MEASURES = {"one_minus_eer": ("1-EER", 100.0), "vr": ("VR@0.1%", 100.0),
             "auc": ("AUC", 1.0), "rank1": ("rank-1", 100.0)}

#: the 160 x 160 face region of CUFS's 250 x 200 aligned images (rows, columns)
FACE_ROWS, FACE_COLS = slice(60, 220), slice(20, 180)


def cufs_features(data_home) -> dict:
    """CUFS (all 418 persons) → dense SIFT of the grey 160 × 160 face.

    Returns
    -------
    dict
        ``X`` sketch descriptors, ``Y`` photo descriptors (row ``r`` of both = person
        ``labels[r]``), ``labels``, ``split`` (``"train"`` / ``"test"``: the person's part in
        the data's fixed split).
    """
    from crossmetric.datasets import load_cufs
    from crossmetric.features._dense_sift import DenseSIFT

    b = load_cufs(data_home, "all", color="gray")
    F = DenseSIFT().fit_transform(b.images[:, FACE_ROWS, FACE_COLS])
    sketch = np.flatnonzero(b.domains == "sketch")
    photo = np.flatnonzero(b.domains == "photo")
    sketch, photo = sketch[np.argsort(b.ids[sketch])], photo[np.argsort(b.ids[photo])]
    if not np.array_equal(b.ids[sketch], b.ids[photo]):
        raise ValueError("CUFS: every person needs one photo and one sketch.")
    return {"X": F[sketch], "Y": F[photo], "labels": b.ids[sketch], "split": b.split[sketch]}


def reproduce_cml_auc_cufs(data_home, *, n_splits: int = 10, seed: int = 0,
                           verbose: bool = True, methods=None, n_jobs: int | None = None,
                           tune: bool = True, pca_components: int = 100,
                           guarded: bool = True):
    """CML-AUC Tables I-II on CUFS (see the module docstring for every choice).

    Parameters
    ----------
    data_home : path
        Folder holding ``cufs/``.
    n_splits : int, default=10
        Random person splits (the paper: 10).
    seed : int, default=0
    verbose : bool, default=True
    methods : sequence of str, optional
        Registry names (default :data:`CML_AUC_CUFS_METHODS`).
    n_jobs : int, optional
        Parallel (method, split) fits.
    tune : bool, default=True
        Choose each method's paper-grid parameters on the training persons (rank-1 of 3 inner
        folds grouped by person).
    pca_components : int, default=100
    guarded : bool, default=True
        Also run each iterative learner (CMML, CML_AUC, CML_pAUC, Maha_AUC, LDML) with the
        library's start and held-out guard (:func:`crossmetric.registry.guarded_estimator`)
        and the same paper grid, on the same splits, as the row "NAME guarded" beside the
        paper's plain run (which keeps the paper's start and optimisation).

    Returns
    -------
    ReproductionResult
    """
    from crossmetric.protocols import run_protocols
    from crossmetric.registry import METHODS, guarded_estimator, make_estimator

    names = list(CML_AUC_CUFS_METHODS if methods is None else methods)
    unknown = [m for m in names if m not in _PAPER_NAME]
    if unknown:
        raise ValueError(f"methods: {unknown[0]!r} is not a method of cml-auc-cufs; expected "
                         f"some of {', '.join(CML_AUC_CUFS_METHODS)}.")
    _progress(verbose, "cml-auc-cufs: dense SIFT of 836 CUFS faces")
    data = cufs_features(data_home)
    estimators = {METHODS[m].display: make_estimator(m, paper=True) for m in names}
    paper_grids = {METHODS[m].display: METHODS[m].search_grid("paper", with_start=False)
                   for m in names}
    rows = []  # (method, row name): each paper run, its guarded run beside it
    for m in names:
        rows.append((m, METHODS[m].display))
        twin = guarded_estimator(m) if guarded else None  # the library's start and guard
        if twin is not None:
            shown = f"{METHODS[m].display} {GUARDED}"
            estimators[shown], paper_grids[shown] = twin, paper_grids[METHODS[m].display]
            rows.append((m, shown))
    grids = {shown: g for shown, g in paper_grids.items() if g} if tune else None
    _progress(verbose, f"cml-auc-cufs: {len(names)} methods x {n_splits} splits "
                       f"({N_TEST} test persons each), PCA-{pca_components}"
                       + (", paper grids tuned by rank-1 on training persons" if tune else ""))
    res = run_protocols(estimators, data, protocols=("identification",), n_repeats=n_splits,
                        test_size=N_TEST, n_negatives=10, max_train_positives=None,
                        pca_components=pca_components, fpr=1e-3, max_rank=20,
                        random_state=seed, n_jobs=n_jobs, on_error="record",
                        param_grids=grids, tune_scoring="rank1", pair_measures=True,
                        pca_joint=True)
    pub = PUBLISHED["cml-auc-cufs"]
    out = ReproductionResult("cml-auc-cufs", pub["source"])
    for m, shown in rows:
        paper = None if shown.endswith(GUARDED) else pub["rows"].get(_PAPER_NAME[m])
        if shown in res.errors:
            out.add("CUFS", shown, "rank-1", [], note=f"failed: {res.errors[shown]}")
            continue
        for k, (col, scale) in enumerate(_MEASURES.values()):
            meas = list(_MEASURES)[k]
            vals = [scale * r["value"] for r in res.records
                    if r["method"] == shown and r["measure"] == meas]
            out.add("CUFS", shown, col, vals, None if paper is None else paper[k])
    out.extra.update({
        "cmc": {m: 100 * np.asarray(c["cmc"]) for m, c in res.curves.items() if "cmc" in c},
        "tuned": res.info.get("tuned", {}), "warnings": res.warnings,
        "pca_components": pca_components, "n_test": N_TEST, "errors": res.errors})
    return out
