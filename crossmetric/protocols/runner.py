"""The protocol runner: every named estimator on every split (joblib), gathered into a
:class:`~crossmetric.protocols.results.BenchmarkResult`."""

from __future__ import annotations

import inspect
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
from sklearn.model_selection import ParameterGrid
from sklearn.utils import check_random_state

from crossmetric import metrics as M
from crossmetric._utils.atomic_io import json_ready
from crossmetric._utils.checks import as_float_array, check_pair_labels, check_positive_int
from crossmetric.protocols.evaluate import (
    RANKS,
    ROC_GRID,
    _verification_extras,
    fit_on_pairs,
    measure_identification,
    measure_retrieval,
    measure_verification,
    seeded_clone,
)
from crossmetric.protocols.options import RunOptions, TuneOptions
from crossmetric.protocols.results import BenchmarkResult, _summarise
from crossmetric.protocols.splits import (
    Split,
    fixed_split,
    given_identification_splits,
    identification_splits,
    kfold_pairs,
    verification_splits,
)
from crossmetric.protocols.views import (
    _is_cross_modal,
    _prepare_views,
    _uses_images,
    method_view_pca,
)

__all__ = ["run_protocols", "run_pair_folds"]


def _identity_groups(est, options) -> dict:
    """``groups=(labels, labels)`` for a learner whose ``fit`` takes identity labels.

    DeepGSM builds its batches from identities (GSM §4.2); from sampled class-level pairs it
    could only infer fragments of the classes (connected components), and would treat two
    images of one class as a negative. Only the labels of the rows that the training pairs
    use are read by such a learner.
    """
    labels = RunOptions.of(options).labels
    if labels is None or "groups" not in inspect.signature(est.fit).parameters:
        return {}
    return {"groups": (labels, labels)}


def _camera_ids(dataset: Mapping, n_rows: int) -> tuple | None:
    """``(cameras of the X rows, cameras of the Y rows)`` of ``dataset["cams"]`` (and
    ``dataset["cams_y"]``), or None without camera ids."""
    if dataset.get("cams") is None:
        if dataset.get("cams_y") is not None:
            raise ValueError("dataset['cams_y'] needs dataset['cams'] (the cameras of the X "
                             "rows).")
        return None
    cams = tuple(np.asarray(dataset[k] if dataset.get(k) is not None else dataset["cams"])
                 for k in ("cams", "cams_y"))
    for key, c in zip(("cams", "cams_y"), cams, strict=True):
        if c.shape != (n_rows,):
            raise ValueError(f"dataset[{key!r}] must give one camera per row ({n_rows}), got "
                             f"shape {c.shape}.")
    if cams[0].dtype.kind != cams[1].dtype.kind:
        cams = tuple(c.astype(str) for c in cams)
    return cams


def _run_split(name: str, estimator, X: np.ndarray, Y: np.ndarray, split: Split,
               options) -> dict:
    """Fit a clone of ``estimator`` on one split and measure it (runs in a worker).

    The fit and the measures are the evaluation unit's (:func:`fit_on_pairs`,
    :func:`measure_verification`, :func:`measure_identification`); ``options`` is a
    :class:`RunOptions` (or a mapping of its fields).
    """
    opts = RunOptions.of(options)
    est = seeded_clone(estimator, split.seed)
    tuned = None
    t0 = time.perf_counter()
    if opts.tune is not None:
        tuned = _tune_split(est, X, Y, split, opts)
        est.set_params(**tuned.best_params)
    tune_seconds = time.perf_counter() - t0
    Xs, Ys = _prepare_views(X, Y, split.train_pairs, split.train_y, est, opts)
    fitted = fit_on_pairs(est, split.train_pairs, split.train_y, preprocessor=(Xs, Ys),
                          groups=_identity_groups(est, opts).get("groups"),
                          clone_estimator=False)
    out: dict = {"method": name, "protocol": split.protocol, "split": split.index,
                 "measures": {"fit_seconds": fitted.fit_seconds},
                 "warnings": fitted.warnings, "training": _training_record(est, Xs, Ys, X, Y)}
    if tuned is not None:
        out["tuned"] = {"protocol": split.protocol, "split": split.index,
                        "params": tuned.best_params, "scoring": tuned.scoring,
                        "cv_score": tuned.best_score, "seconds": tune_seconds,
                        # every candidate's inner score: how close the choice was
                        "candidates": [{"stage": c.get("stage", 0), "params": c["params"],
                                        "mean_score": c["mean_score"],
                                        "std_score": c["std_score"]}
                                       for c in tuned.candidates]}
        if tuned.scoring == "auc":
            out["tuned"]["cv_auc"] = tuned.best_score
    if split.protocol == "verification":
        d = est.pair_distance(split.test_pairs)
        rep = measure_verification(est, split.test_pairs, split.test_y, fpr=opts.fpr,
                                   fpr_range=opts.fpr_range, distance=d)
        out["measures"].update(rep)
        out["measures"].update(_verification_extras(est, Xs, Ys, split, opts))
        fpr, tpr, _ = M.roc(split.test_y, -d)
        out["roc"] = np.interp(ROC_GRID, fpr, tpr)
    elif split.protocol == "retrieval":
        rows = split.probe_rows
        rep, curves, _ = measure_retrieval(est, Xs[rows], Ys[rows], opts.labels[rows],
                                           opts.labels[rows], k=opts.retrieval_k)
        out["measures"].update(rep)
        out["curves"] = curves
    else:
        pl, gl = opts.labels[split.probe_rows], opts.labels[split.gallery_rows]
        cams = {} if opts.cams is None else {"probe_cams": opts.cams[0][split.probe_rows],
                                             "gallery_cams": opts.cams[1][split.gallery_rows]}
        D = None
        if opts.probe == "y":   # probes: the gallery rows of Y, gallery: the probe rows of X
            D = np.asarray(est.cross_distance(Xs[split.probe_rows],
                                              Ys[split.gallery_rows])).T
            pl, gl = gl, pl
            if cams:
                cams = {"probe_cams": cams["gallery_cams"], "gallery_cams": cams["probe_cams"]}
        rep, D = measure_identification(
            est, Xs[split.probe_rows], Ys[split.gallery_rows], pl, gl, ranks=RANKS,
            re_rank=opts.re_rank, query_expansion=opts.query_expansion,
            max_rank=opts.max_rank, blockwise=False, distance=D, **cams)
        out["cmc"] = np.asarray(rep["cmc"])
        out["measures"].update({k: rep[k] for k in (*(f"rank{r}" for r in RANKS), "map",
                                                    "nn_accuracy")})
        if opts.pair_measures:
            # every probe x gallery pair of the test identities, scored as verification pairs
            same = np.where(pl[:, None] == gl[None, :], 1, -1).ravel()
            out["measures"].update(M.verification_report(
                same, -D.ravel(), fpr=opts.fpr, fpr_range=opts.fpr_range))
    return out


def _training_record(est, Xs, Ys, X, Y) -> dict:
    """What a split's fit started from and kept: the views' width (when the protocol reduced
    them), the start (``init_``), the kept check (``best_iteration_``; 0: the start), the
    iterations run and the settings a closed form chose on held-out identities
    (``chosen_params_``), for the learners that have them."""
    record = {}
    if Xs.shape[1] != X.shape[1] or Ys.shape[1] != Y.shape[1]:
        record["view_dims"] = [int(Xs.shape[1]), int(Ys.shape[1])]
    for attr, key in (("init_", "init"), ("best_iteration_", "best_iteration"),
                      ("n_iter_", "n_iter"), ("n_components", "n_components")):
        value = getattr(est, attr, None)
        if isinstance(value, str | int | np.integer) and not isinstance(value, bool):
            record[key] = value if isinstance(value, str) else int(value)
    chosen = getattr(est, "chosen_params_", None)  # a closed form's "auto" settings
    if chosen:
        record["chosen"] = json_ready(chosen)
    return record


def _with_progress(outputs, names: list[str]):
    """Yield ``outputs`` under a tqdm bar that names the method being fitted next."""
    from tqdm.auto import tqdm

    with tqdm(total=len(names), desc="benchmark", unit="fit") as bar:
        if names:
            bar.set_postfix_str(names[0], refresh=False)
        for i, out in enumerate(outputs):
            if i + 1 < len(names):
                bar.set_postfix_str(names[i + 1], refresh=False)
            bar.update(1)
            yield out


def _reported(outputs, on_output):
    """Yield ``outputs``, each handed to ``on_output`` first (in this process)."""
    for out in outputs:
        on_output(out)
        yield out


def _gathered(outputs, todo: list, runner, on_output, on_error: str) -> list:
    """The outputs as a list. A worker process that dies (a segmentation fault, the system's
    out-of-memory kill) stops joblib's pool; with ``on_error="record"`` the units not yet
    returned are then run one at a time, each in a worker of its own, so that the unit that
    kills its process is recorded as its method's failure and the others go on."""
    from joblib.externals.loky.process_executor import TerminatedWorkerError

    got: list = []
    try:
        got.extend(outputs)
    except TerminatedWorkerError:
        if on_error != "record":
            raise
        for task in todo[len(got):]:
            out = _in_own_worker(runner, task)
            if on_output is not None:
                on_output(out)
            got.append(out)
    return got


def _in_own_worker(runner, task) -> dict:
    """One unit in a worker process; its death is the unit's error."""
    from joblib import Parallel, delayed
    from joblib.externals.loky.process_executor import TerminatedWorkerError

    shown, est, data, sp, opts = task
    try:
        return Parallel(n_jobs=2, backend="loky")(
            [delayed(runner)(shown, est, data[0], data[1], sp, opts)])[0]
    except TerminatedWorkerError as exc:
        import re

        codes = re.search(r"exit codes of the workers are \{([^}]*)\}", str(exc))
        why = f" ({codes.group(1)})" if codes else ""
        return {"method": shown, "protocol": sp.protocol, "split": sp.index,
                "error": f"TerminatedWorkerError: the worker process fitting it died{why}"}


def _tune_split(est, X: np.ndarray, Y: np.ndarray, split: Split, options):
    """Inner cross-validation on the split's training objects only, each stage with the
    learner's current settings as a candidate (``keep_current``: never worse on the inner folds
    than the defaults).

    The outer training pairs of :func:`run_protocols` join row ``r`` of ``X`` and ``Y`` for
    objects of the training part; only those objects are handed to
    :func:`crossmetric.protocols.model_selection.search_params`, which redoes the preprocessing of
    :func:`_prepare_views` on each inner training side.
    """
    from crossmetric.protocols.model_selection import search_stages

    opts = RunOptions.of(options)
    tune = opts.tune
    rows = np.unique(split.train_pairs)
    return search_stages(
        est, tune.grid, X[rows], Y[rows], opts.labels[rows],
        n_splits=tune.n_splits, group=tune.group, n_negatives=tune.n_negatives,
        max_positives=tune.max_positives, scoring=tune.scoring,
        prepare=lambda Xa, Ya, p, y, e: _prepare_views(Xa, Ya, p, y, e, opts),
        random_state=split.seed, keep_current=True)


def _expected_cost(task) -> tuple[bool, int]:
    """What orders the units longest first: a learner that iterates (``max_iter``) before a
    closed form, then the number of candidates of its ``--tune`` search (1 without)."""
    _, est, _, _, opts = task
    grid = opts.tune.grid if opts.tune is not None else None
    stages = [] if grid is None else [grid] if isinstance(grid, Mapping) else list(grid)
    n_candidates = sum(len(ParameterGrid(stage)) for stage in stages) if stages else 1
    return "max_iter" in est.get_params(deep=False), n_candidates


def _longest_first(todo: list) -> list:
    """The units in the order the workers take them: the longest expected first
    (:func:`_expected_cost`; ties in the given order), so that a long unit does not start last
    and leave the other workers idle while it runs (longest-processing-time-first
    scheduling); :func:`_execute` puts the results back in task order."""
    return sorted(todo, key=_expected_cost, reverse=True) if len(todo) > 1 else todo


def _run_safely(name, estimator, X, Y, split, options):
    try:
        return _run_split(name, estimator, X, Y, split, options)
    except Exception as exc:  # recorded, reported by the caller
        return {"method": name, "protocol": split.protocol, "split": split.index,
                "error": f"{type(exc).__name__}: {exc}"}


def run_protocols(estimators: Mapping, dataset: Mapping, *,
                  protocols: Sequence[str] = ("verification", "identification"),
                  n_folds: int = 10, n_repeats: int = 10, n_negatives: int = 1,
                  max_train_positives: int | None = 1000,
                  max_test_positives: int | None = 1000, test_size: float | int = 0.3,
                  level: str = "labels", split: str = "auto", unequal_dims: str = "cca",
                  cca_components: int = 32, pca_components=None, max_rank: int = 20,
                  fpr: float = 1e-3,
                  fpr_range=(0.0, 0.1), n_jobs: int | None = None, random_state=0,
                  progress: bool = False, on_error: str = "raise",
                  param_grids: Mapping | None = None, tune_folds: int = 3,
                  tune_scoring: str = "auc", re_rank=False,
                  query_expansion: int | None = None,
                  pair_measures: bool = False, pca_joint: bool = False, probe: str = "x",
                  train_rows=None, retrieval_k: int = 50,
                  on_output=None, completed: Mapping | None = None) -> BenchmarkResult:
    """Run named estimators under the verification and identification protocols.

    Parameters
    ----------
    estimators : mapping name -> unfitted pair learner
        Each is cloned for every split; its ``preprocessor`` is set to the split's ``(X, Y)``
        and it is fitted on index pairs. An estimator whose ``random_state`` is ``None`` gets
        a seed drawn from ``random_state`` for each split.
    dataset : Bunch / mapping
        ``X``, ``Y`` (row-aligned views), ``labels``; optionally ``instance`` and ``images_x``,
        ``images_y`` (used by image learners such as ``DeepGSM``; a dataset without images
        records them in ``skipped``). Without ``Y`` (missing or ``None``) the data has one
        modality: verification pairs are drawn within ``X`` and identification uses a
        single-shot gallery (:func:`identification_splits` with ``cross_modal=False``).
        Re-identification data may also carry ``cams``, the camera of every row (of ``X``;
        ``cams_y`` for the rows of ``Y`` when they differ): identification then leaves out,
        for each probe, the gallery items of its identity *and* camera (the Market-1501 /
        torchreid rule, :func:`crossmetric.metrics.evaluate_rank`); and ``reid_split``, the
        data set's own split (``"train"`` / ``"query"`` / ``"gallery"`` per row, e.g. the
        ``split`` of :func:`crossmetric.datasets.load_market1501`): identification then
        measures its queries against its gallery in each of the ``n_repeats`` repetitions,
        after training on pairs drawn among its training rows
        (:func:`~crossmetric.protocols.given_identification_splits`; no verification).
    protocols : sequence of {"verification", "identification", "retrieval"}
        ``"retrieval"``: class-level cross-modal retrieval (Rasiwasia et al. 2010): every
        test item of ``X`` ranks all test items of ``Y`` and vice versa, relevant = same
        label; measures ``map_x2y``, ``map_y2x``, ``map_mean``, ``map_at_k_x2y``,
        ``map_at_k_y2x`` (:func:`~crossmetric.protocols.measure_retrieval`) and the mean
        precision-recall curves ``curves[name]["pr_x2y"]`` / ``["pr_y2x"]``. It needs two
        modalities. Its split is ``train_rows`` when given, else ``n_repeats`` draws of
        ``test_size`` of the rows stratified by label (every category on both sides).
    n_folds : int, default=10
        Verification folds (:func:`verification_splits`).
    n_repeats : int, default=10
        Identification repetitions (:func:`identification_splits`).
    n_negatives : int, default=1
        Negative training pairs per positive (the papers' n⁻).
    max_train_positives, max_test_positives : int or None
        Caps on the positives drawn per split (class-level labels make quadratically many);
        1000 each by default, as `crossmetric benchmark` (the CLI takes its defaults from here).
    test_size : float or int, default=0.3
        Identification test set (fraction or count of identities / rows).
    level : {"labels", "instance"}, default="labels"
        Identity used to form pairs and matches: ``labels`` (e.g. digit class) or ``instance``
        (object id: photo ↔ sketch of the same image).
    split : {"auto", "identity", "sample"}
        Passed to both split functions.
    unequal_dims : {"cca", "skip"}, default="cca"
        What to do with a single-modal learner when ``X`` and ``Y`` have different widths:
        ``"cca"`` fits :class:`CCAProjection` (``cca_components``) on each split's positive
        training pairs and runs the learner on the projected views, reported as ``name-C``
        (the CML-AUC paper's "-C" setting); ``"skip"`` records it in ``skipped``.
    pca_components : int, "auto", mapping name -> int, or None
        Reduce each view by PCA to this many dimensions before fitting (fitted per split on the
        rows the training pairs use): for every feature learner (int) or for the named ones
        (mapping). The CML-AUC paper reduces its features by PCA before metric learning
        (§IV-A). Applied before the ``"cca"`` step. Image learners are unaffected.
        ``"auto"``: every feature learner's views are reduced to the split's training
        identities minus one when they are wider
        (:func:`~crossmetric.protocols.views.bounded_dimension`), except the untrained
        :class:`~crossmetric.Euclidean` distance, which is measured on the views as given, and
        PCCA / CMML, whose linear towers work in the span of the training samples and keep
        the untrained distance of the rest (:mod:`crossmetric._solvers.span`). A
        learner's ``n_components`` above the reduced width is capped, and the cap noted in
        ``result.info["notes"]``.
    max_rank : int, default=20
        Length of the CMC curves.
    fpr, fpr_range :
        VR@FPR operating point and pAUC window.
    n_jobs : int or None
        joblib workers; the active joblib backend is used (``joblib.parallel_config``), so
        ``with parallel_config(backend="dask"):`` runs the splits on a Dask cluster.
    random_state : int, RandomState or None, default=0
    progress : bool, default=False
        tqdm progress bar over the (method, split) units.
    on_error : {"raise", "record"}, default="raise"
        ``"record"``: a failing method is reported in ``errors`` and left out of the table
        (also one whose joblib worker process dies: the units left are then run one worker
        each, so that the others go on).
    param_grids : mapping name -> grid or list of grids, optional
        Hyper-parameter search (:func:`crossmetric.protocols.model_selection.search_stages`): for
        every split, the named estimators' parameters are chosen from their grid by ``tune_folds``-
        fold inner cross-validation on the split's training objects only -- folds grouped by
        identity when the outer split is by identity, else disjoint stratified sets of objects
        (as ``split`` decides) -- and the winner is fitted on all training pairs. A list of
        grids is searched stage after stage, each stage's winner fixed for the next (the
        papers' sequential selections, ``MethodSpec.paper_grid``). The choices are in
        ``result.info["tuned"]`` (``{method: [{protocol, split, params, scoring, cv_score,
        seconds, candidates}]}``, plus ``cv_auc`` when ``tune_scoring="auc"``;
        ``candidates``: every candidate's ``stage``, ``params`` and inner ``mean_score`` /
        ``std_score`` over the folds, so a reader sees by how much the choice won).
    tune_folds : int, default=3
    tune_scoring : {"auc", "rank1", "map"}, default="auc"
        Validation measure of the search
        (:func:`crossmetric.protocols.model_selection.search_params`): pair AUC, or identification
        rank-1 / mAP on the validation identities.
    re_rank : bool or dict, default=False
        Identification: re-rank each split's probe-to-gallery distances by k-reciprocal
        encoding (:func:`crossmetric.metrics.re_ranking`; a dict passes ``k1``, ``k2``,
        ``lambda_value``) before measuring. See :func:`crossmetric.protocols.reid.refine_distances`
        for the models it applies to.
    query_expansion : int, optional
        Identification: average query expansion with this many gallery neighbours first.
    pair_measures : bool, default=False
        Identification also reports the verification measures (``auc``, ``one_minus_eer``,
        ``vr``, ``pauc``, ``acc_median``) over every probe × gallery pair of the split's test
        identities, so that one split gives all of CML-AUC §IV-A's measures (AUC, 1−EER,
        VR@0.1 %, rank-1) on the same test persons. Not with the verification protocol,
        whose measures have the same names.
    pca_joint : bool or "auto", default=False
        With ``pca_components``: one PCA fitted on the training rows of both views together
        instead of one per view -- for two views in one feature space (one descriptor of a
        sketch and of a photo, of camera A and camera B), where per-view PCAs would give
        coordinates that do not correspond. Needs views of equal width; ``"auto"``: joint when
        they have one width.
    probe : {"x", "y"}, default="x"
        Identification: the modality of the probes. ``"x"``: test rows of ``X`` search a
        gallery of ``Y`` rows (as before); ``"y"``: test rows of ``Y`` search the ``X`` rows
        (sketch → photo on a photo / sketch set). Not with ``re_rank`` / ``query_expansion``,
        nor with one modality.
    train_rows : array-like, optional
        A fixed split instead of drawn ones (a published split, e.g. from
        :func:`crossmetric.protocols.split_files.read_split_file`): a boolean mask of the
        training rows or their indices. Every protocol then runs once on it
        (:func:`~crossmetric.protocols.fixed_split`); ``n_folds``, ``n_repeats`` and
        ``test_size`` are not used.
    retrieval_k : int, default=50
        List length of the retrieval protocol's mAP@k.
    on_output : callable, optional
        ``on_output(output)``, called in the calling process with each (method, split)
        output as it arrives (a dict with ``method``, ``protocol``, ``split`` and either
        ``measures`` or ``error``): ``crossmetric benchmark`` writes each as a record at once,
        so that a stopped run can be resumed. The worker processes never call it.
    completed : mapping, optional
        ``{(method, protocol, split): output}`` of an earlier, stopped run with the same
        arguments (outputs given to its ``on_output``): these units are not run again and
        their outputs are used as they are, so the result equals that of a run never stopped.

    Returns
    -------
    BenchmarkResult

    Examples
    --------
    >>> from crossmetric import Euclidean, PCCA
    >>> from crossmetric.datasets import make_cross_modal
    >>> from crossmetric.protocols import run_protocols
    >>> data = make_cross_modal(150, n_classes=15, n_features_x=6, n_features_y=6,
    ...                         random_state=0)
    >>> res = run_protocols({"Euclidean": Euclidean(), "PCCA": PCCA(n_components=4)}, data,
    ...                     n_folds=2, n_repeats=1)
    >>> res.methods
    ['Euclidean', 'PCCA']
    >>> bool(res.value("PCCA", "auc") > res.value("Euclidean", "auc"))
    True
    """

    for p in protocols:
        if p not in ("verification", "identification", "retrieval"):
            raise ValueError(f"protocols must name 'verification', 'identification' and/or "
                             f"'retrieval', got {p!r}.")
    if probe not in ("x", "y"):
        raise ValueError(f"probe must be 'x' or 'y', got {probe!r}.")
    retrieval_k = check_positive_int(retrieval_k, "retrieval_k")
    if on_error not in ("raise", "record"):
        raise ValueError(f"on_error must be 'raise' or 'record', got {on_error!r}.")
    if unequal_dims not in ("cca", "skip"):
        raise ValueError(f"unequal_dims must be 'cca' or 'skip', got {unequal_dims!r}.")
    if level not in ("labels", "instance"):
        raise ValueError(f"level must be 'labels' or 'instance', got {level!r}.")
    if not estimators:
        raise ValueError("estimators is empty; give at least one name -> estimator.")
    for key in ("X", "labels"):
        if key not in dataset:
            raise ValueError(f"dataset must provide {key!r}.")
    X = as_float_array(dataset["X"], "dataset X", ndim=2)
    # no Y: one modality -- pairs and matches are drawn within X (documented above)
    cross_modal = dataset.get("Y") is not None
    Y = as_float_array(dataset["Y"], "dataset Y", ndim=2) if cross_modal else X
    if level == "instance" and "instance" not in dataset:
        raise ValueError("level='instance' needs dataset['instance'].")
    labels = np.asarray(dataset["labels"] if level == "labels" else dataset["instance"])
    if not (X.shape[0] == Y.shape[0] == labels.shape[0]):
        raise ValueError(f"dataset X, Y and labels must have the same number of rows, got "
                         f"{X.shape[0]}, {Y.shape[0]}, {labels.shape[0]}.")
    cams = _camera_ids(dataset, X.shape[0])
    given = dataset.get("reid_split")
    if given is not None and "verification" in protocols:
        raise ValueError("dataset['reid_split'] is a query / gallery split: the verification "
                         "protocol does not apply; run protocols=('identification',).")
    if given is not None and train_rows is not None:
        raise ValueError("train_rows: dataset['reid_split'] is the data set's own split; give "
                         "one of them, not both.")
    images = None
    if "images_x" in dataset and "images_y" in dataset:
        # uint8 images stay uint8 (an image learner scales them to [0, 1] itself)
        images = tuple(np.asarray(dataset[k]) if np.asarray(dataset[k]).dtype == np.uint8
                       else as_float_array(dataset[k], f"dataset {k}")
                       for k in ("images_x", "images_y"))
    if probe == "y" and not cross_modal:
        raise ValueError("probe='y' needs two modalities (dataset Y); one-modality data has "
                         "one side.")
    if probe == "y" and (re_rank or query_expansion is not None):
        raise ValueError("probe='y' does not combine with re_rank / query_expansion; swap "
                         "the views instead.")
    if "retrieval" in protocols and not cross_modal:
        raise ValueError("protocol 'retrieval' needs two modalities (dataset Y).")
    rng = check_random_state(random_state)
    result = BenchmarkResult()
    result.info = {"n_samples": int(X.shape[0]), "dims": [int(X.shape[1]), int(Y.shape[1])],
                   "cross_modal": cross_modal,
                   "level": level, "n_folds": n_folds, "n_repeats": n_repeats,
                   "protocols": list(protocols)}

    if probe != "x":
        result.info["probe"] = probe
    if train_rows is None and {"identification", "retrieval"} & set(protocols):
        result.info["test_size"] = test_size
    if "retrieval" in protocols:
        result.info["retrieval_k"] = retrieval_k
    splits: list[Split] = []
    if train_rows is not None:
        result.info["fixed_split"] = True
        splits = [fixed_split(labels, train_rows, protocol=p, cross_modal=cross_modal,
                              n_negatives=n_negatives, max_train_positives=max_train_positives,
                              max_test_positives=max_test_positives, random_state=rng)
                  for p in protocols]
    if "verification" in protocols and train_rows is None:
        splits += verification_splits(labels, n_folds, cross_modal=cross_modal,
                                      n_negatives=n_negatives,
                                      max_train_positives=max_train_positives,
                                      max_test_positives=max_test_positives, split=split,
                                      random_state=rng)
    if "identification" in protocols and given is not None:
        splits += given_identification_splits(labels, given, n_repeats,
                                              cross_modal=cross_modal, n_negatives=n_negatives,
                                              max_train_positives=max_train_positives,
                                              random_state=rng)
    elif "identification" in protocols and train_rows is None:
        splits += identification_splits(labels, n_repeats, test_size=test_size,
                                         cross_modal=cross_modal,
                                         n_negatives=n_negatives,
                                         max_train_positives=max_train_positives,
                                         split=split, random_state=rng)
    if "retrieval" in protocols and train_rows is None:
        # categories, not identities: every category on both sides of each draw
        splits += [replace(sp, protocol="retrieval") for sp in identification_splits(
            labels, n_repeats, test_size=test_size, cross_modal=True,
            n_negatives=n_negatives, max_train_positives=max_train_positives,
            split="sample", random_state=rng)]
    if query_expansion is not None:
        query_expansion = check_positive_int(query_expansion, "query_expansion")
    from crossmetric._retrieval.refine import _re_rank_params

    _re_rank_params(re_rank)  # a bad value fails here, not in every worker
    if pair_measures and "verification" in protocols:
        raise ValueError("pair_measures gives identification the verification measures' "
                         "names; run it with protocols=('identification',).")
    if pca_joint is True and X.shape[1] != Y.shape[1]:
        raise ValueError(f"pca_joint needs views of equal width, got {X.shape[1]} and "
                         f"{Y.shape[1]} features.")
    base_options = RunOptions(fpr=fpr, fpr_range=fpr_range, max_rank=max_rank, labels=labels,
                              cca_components=cca_components, re_rank=re_rank,
                              query_expansion=query_expansion,
                              pair_measures=bool(pair_measures), cams=cams,
                              pca_joint=pca_joint if pca_joint == "auto" else bool(pca_joint),
                              probe=probe, retrieval_k=retrieval_k)
    grids = {}
    if param_grids:
        n_ids = np.unique(labels).size
        group = split if split != "auto" else ("identity" if n_ids >= max(20, 2 * n_folds)
                                               else "sample")
        tune_folds = check_positive_int(tune_folds, "tune_folds", minimum=2)
        from crossmetric.protocols.model_selection import SCORINGS

        if tune_scoring not in SCORINGS:
            raise ValueError(f"tune_scoring must be one of {', '.join(SCORINGS)}, got "
                             f"{tune_scoring!r}.")
        for name, grid in param_grids.items():
            if name not in estimators:
                raise ValueError(f"param_grids names {name!r}, which is not in estimators.")
            if grid:
                grids[name] = TuneOptions(grid=grid, n_splits=tune_folds, group=group,
                                          n_negatives=n_negatives, scoring=tune_scoring,
                                          max_positives=max_train_positives)
        result.info["tuning"] = {"folds": tune_folds, "group": group, "scoring": tune_scoring,
                                 "grids": {k: v.grid for k, v in grids.items()}}
    return _execute(result, estimators, X, Y, images, splits, base_options,
                    pca_components=pca_components, unequal_dims=unequal_dims, n_jobs=n_jobs,
                    progress=progress, on_error=on_error, grids=grids, on_output=on_output,
                    completed=completed)


def _execute(result: BenchmarkResult, estimators: Mapping, X: np.ndarray, Y: np.ndarray,
             images, splits: list[Split], base_options: RunOptions, *, pca_components,
             unequal_dims: str, n_jobs, progress: bool, on_error: str,
             grids: Mapping | None = None, on_output=None,
             completed: Mapping | None = None) -> BenchmarkResult:
    """Fit every estimator on every split (joblib) and gather the results (``on_output``,
    ``completed``: see :func:`run_protocols`)."""
    from joblib import Parallel, delayed

    tasks = []
    for name, est in estimators.items():
        shown, opts, data = name, base_options, (X, Y)
        if grids and name in grids:
            opts = replace(opts, tune=grids[name])
        if _uses_images(est):
            if images is None:
                result.skipped[name] = "needs images (dataset has no images_x / images_y)"
                continue
            data = images
        else:
            k = (pca_components.get(name) if isinstance(pca_components, Mapping)
                 else pca_components)
            if isinstance(k, str) and k == "auto":
                # the untrained distance is measured on the views as given, and linear towers
                # reduce wide views to their span themselves, exactly (method_view_pca)
                if getattr(est, "_reduces_to_span", False):
                    result.info.setdefault("reduced_inside", []).append(name)
                elif method_view_pca(est, k) == "auto":
                    opts = replace(opts, pca="auto")
                    result.info.setdefault("pca", {})[name] = "auto"
            elif k is not None:
                opts = replace(opts, pca=check_positive_int(k, f"pca_components[{name!r}]"))
                result.info.setdefault("pca", {})[name] = opts.pca
        # single-modal learners compare the two views coordinate by coordinate: views of
        # different origin and width go through the CCA step (PCA alone would not align them)
        if not _uses_images(est) and not _is_cross_modal(est) and X.shape[1] != Y.shape[1]:
            if unequal_dims == "skip":
                result.skipped[name] = (f"single-modal learner, views have {X.shape[1]} and "
                                        f"{Y.shape[1]} features")
                continue
            shown, opts = f"{name}-C", replace(opts, cca=True)
        result.methods.append(shown)
        for sp in splits:
            tasks.append((shown, est, data, sp, opts))

    runner = _run_safely if on_error == "record" else _run_split
    keys = [(t[0], t[3].protocol, t[3].index) for t in tasks]   # (method, protocol, split)
    done = {k: completed[k] for k in keys if k in completed} if completed else {}
    todo = _longest_first([t for t, k in zip(tasks, keys, strict=True) if k not in done])
    jobs = (delayed(runner)(shown, est, data[0], data[1], sp, opts)
            for shown, est, data, sp, opts in todo)
    parallel = Parallel(n_jobs=n_jobs, return_as="generator")
    with warnings.catch_warnings():
        # loky restarts a worker whose memory grew (e.g. after importing torch) and says so;
        # the jobs are resubmitted, results are unaffected
        warnings.filterwarnings("ignore", message="A worker stopped while some jobs")
        outputs = parallel(jobs)
        if progress:
            outputs = _with_progress(outputs, [t[0] for t in todo])
        if on_output is not None:
            outputs = _reported(outputs, on_output)
        outputs = iter(_gathered(outputs, todo, runner, on_output, on_error))
    # in task order: the outputs of an earlier run where given, else this run's
    ran = {(t[0], t[3].protocol, t[3].index): next(outputs) for t in todo}
    outputs = [done[k] if k in done else ran[k] for k in keys]

    rocs: dict[str, list] = {}
    cmcs: dict[str, list] = {}
    prs: dict[str, dict] = {}
    for out in outputs:
        meth = out["method"]
        if "error" in out:
            result.errors.setdefault(meth, out["error"])
            continue
        if "tuned" in out:
            result.info.setdefault("tuned", {}).setdefault(meth, []).append(out["tuned"])
        if out.get("training"):
            result.info.setdefault("training", {}).setdefault(meth, []).append(
                {"protocol": out["protocol"], "split": out["split"], **out["training"]})
        for cat in out.get("warnings", ()):
            counts = result.warnings.setdefault(meth, {})
            counts[cat] = counts.get(cat, 0) + 1
        for meas, val in out["measures"].items():
            result.records.append({"method": meth, "protocol": out["protocol"],
                                   "split": out["split"], "measure": meas,
                                   "value": float(val)})
        if "roc" in out:
            rocs.setdefault(meth, []).append(out["roc"])
        if "cmc" in out:
            cmcs.setdefault(meth, []).append(out["cmc"])
        for key, (rec, prec) in out.get("curves", {}).items():
            prs.setdefault(meth, {}).setdefault(key, (rec, []))[1].append(prec)
    for meth in result.errors:
        result.records = [r for r in result.records if r["method"] != meth]
    for meth in result.methods:
        if meth in result.errors:
            continue
        c: dict = {}
        if meth in rocs:
            c["roc"] = (ROC_GRID.copy(), np.mean(rocs[meth], axis=0))
            c["roc_std"] = _curve_std(rocs[meth])
        if meth in cmcs:
            c["cmc"] = np.mean(cmcs[meth], axis=0)
            c["cmc_std"] = _curve_std(cmcs[meth])
        for key, (rec, precs) in prs.get(meth, {}).items():   # retrieval: mean PR curves
            c[key] = (np.asarray(rec), np.mean(precs, axis=0))
        result.curves[meth] = c
    result.summary = _summarise(result.records, result.methods)
    return result


def _curve_std(curves: list) -> np.ndarray:
    """Pointwise std over the splits' curves (ddof=1, as the summary's; 0 for one split)."""
    a = np.asarray(curves, dtype=float)
    return a.std(axis=0, ddof=1) if a.shape[0] > 1 else np.zeros(a.shape[1:])


def run_pair_folds(estimators: Mapping, X, Y=None, *, pairs, y, folds=None,
                   n_folds: int = 10, unequal_dims: str = "cca", cca_components: int = 32,
                   pca_components=None, fpr: float = 1e-3, fpr_range=(0.0, 0.1),
                   n_jobs: int | None = None, random_state=0, progress: bool = False,
                   on_error: str = "raise", on_output=None,
                   completed: Mapping | None = None) -> BenchmarkResult:
    """k-fold verification on a fixed set of labelled pairs (LFW's restricted setting).

    Every estimator (cloned per fold) is trained on the pairs of k − 1 folds and scored on the
    held-out fold; measures are mean ± std (and standard error) over the folds.

    Parameters
    ----------
    estimators : mapping name -> unfitted pair learner
    X : array-like (n_x, d_x)
        Samples that column 0 of ``pairs`` indexes.
    Y : array-like (n_y, d_y), optional
        Samples that column 1 indexes; ``None``: ``X`` (single-modal data such as LFW).
    pairs : int array (n_pairs, 2)
    y : array (n_pairs,) of +1 / -1
    folds : array (n_pairs,), optional
        Predefined fold of every pair (``read_lfw_pairs(...).fold``); else ``n_folds``
        stratified random folds (:func:`kfold_pairs`).
    unequal_dims, cca_components, pca_components, fpr, fpr_range, n_jobs, random_state, \
progress, on_error, on_output, completed :
        As in :func:`run_protocols`.

    Returns
    -------
    BenchmarkResult

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric import Euclidean, make_pairs
    >>> from crossmetric.protocols import run_pair_folds
    >>> rng = np.random.RandomState(0)
    >>> labels = np.repeat(np.arange(10), 4)
    >>> X = labels[:, None] + 0.3 * rng.randn(40, 2)
    >>> pairs, y = make_pairs(labels, random_state=0)
    >>> res = run_pair_folds({"Euclidean": Euclidean()}, X, pairs=pairs, y=y, n_folds=3)
    >>> bool(res.value("Euclidean", "auc") > 0.9), res.info["n_folds"]
    (True, 3)
    """
    if not estimators:
        raise ValueError("estimators is empty; give at least one name -> estimator.")
    if on_error not in ("raise", "record"):
        raise ValueError(f"on_error must be 'raise' or 'record', got {on_error!r}.")
    X = as_float_array(X, "X", ndim=2)
    Y = X if Y is None else as_float_array(Y, "Y", ndim=2)
    P = np.asarray(pairs)
    if P.ndim != 2 or P.shape[1] != 2 or P.dtype.kind not in "iu":
        raise ValueError(f"pairs must be an integer array (n_pairs, 2), got shape {P.shape} "
                         f"and dtype {P.dtype}.")
    y = check_pair_labels(y, P.shape[0])
    for col, n, name in ((0, X.shape[0], "X"), (1, Y.shape[0], "Y")):
        if P[:, col].min() < 0 or P[:, col].max() >= n:
            raise ValueError(f"pairs[:, {col}] must index rows of {name} (0..{n - 1}).")
    rng = check_random_state(random_state)
    splits = []
    for k, (tr, te) in enumerate(kfold_pairs(y, n_folds, folds=folds, random_state=rng)):
        splits.append(Split("verification", k, P[tr], y[tr], test_pairs=P[te], test_y=y[te],
                            seed=int(rng.randint(2**31 - 1))))
    result = BenchmarkResult()
    result.info = {"n_pairs": int(P.shape[0]), "dims": [int(X.shape[1]), int(Y.shape[1])],
                   "n_folds": len(splits), "protocols": ["verification"]}
    options = RunOptions(fpr=fpr, fpr_range=fpr_range, max_rank=1, labels=None,
                         cca_components=cca_components)
    return _execute(result, estimators, X, Y, None, splits, options,
                    pca_components=pca_components, unequal_dims=unequal_dims, n_jobs=n_jobs,
                    progress=progress, on_error=on_error, on_output=on_output,
                    completed=completed)
