"""The ``crossmetric`` command line: benchmark, fit, evaluate, search and reproduce.

A thin front end: every step calls a library function (:mod:`crossmetric.protocols`,
:mod:`crossmetric.registry`, :mod:`crossmetric.datasets`, :mod:`crossmetric.metrics`,
:mod:`crossmetric.plotting`, :mod:`crossmetric.retrieval`). Bad input -- unreadable files,
wrong shapes, unknown method names, bad options -- ends with a one-line message on stderr and
exit code 2, never a traceback (set ``CROSSMETRIC_DEBUG=1`` to see one).

Examples
--------
::

    crossmetric benchmark                                  # every method, embedded digits
    crossmetric benchmark --methods euclidean,pcca --folds 5 --repeats 3 --out res/
    crossmetric benchmark --dataset mfeat:fou,pix --data-home ../shared/data/mfeat
    crossmetric fit cmml --x photos.npy --y sketches.npy --pairs train.csv --out cmml.joblib
    crossmetric evaluate cmml.joblib --x photos.npy --y sketches.npy --pairs test.csv
    crossmetric search cmml.joblib --database sketches.npy --queries photos.npy -k 10
    crossmetric reproduce --list
    crossmetric reproduce pcca-viper --data-home ../shared/data --out viper/
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

__all__ = ["main", "build_parser"]

_MODEL_FORMAT = "crossmetric-model"
_MODEL_VERSION = 1


class CLIError(Exception):
    """A user-facing error: printed on one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``crossmetric: error: ...``) and exit code 2."""

    def error(self, message: str):  # noqa: D401 - argparse hook
        raise CLIError(f"{message} (see '{self.prog} --help')")


# ------------------------------------------------------------------------------ helpers
def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _load_array(path: str, what: str, *, allow_images: bool = False) -> np.ndarray:
    from crossmetric.datasets import load_features

    try:
        return load_features(path, allow_images=allow_images)
    except ValueError as exc:
        raise CLIError(f"{what}: {exc}") from None


def _load_pairs(path: str):
    from crossmetric.datasets import load_pairs

    try:
        return load_pairs(path)
    except ValueError as exc:
        raise CLIError(f"--pairs: {exc}") from None


def _check_pair_rows(pairs: np.ndarray, n_x: int, n_y: int) -> None:
    if pairs[:, 0].max() >= n_x:
        raise CLIError(f"--pairs: column i refers to row {int(pairs[:, 0].max())}, but --x has "
                       f"only {n_x} rows.")
    if pairs[:, 1].max() >= n_y:
        raise CLIError(f"--pairs: column j refers to row {int(pairs[:, 1].max())}, but the "
                       f"second modality has only {n_y} rows.")


def _preprocessor(est, X: np.ndarray, Y: np.ndarray | None):
    cross = bool(getattr(est, "_cross_modal", True))
    if Y is None:
        return (X, X) if cross else X
    return (X, Y)


def _save_model(path: str, est, method: str) -> None:
    import joblib

    import crossmetric

    est.set_params(preprocessor=None)  # never store the training samples in the model file
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"--out: folder {folder!r} does not exist.")
    joblib.dump({"format": _MODEL_FORMAT, "version": _MODEL_VERSION, "method": method,
                 "crossmetric_version": crossmetric.__version__, "model": est}, path)


def _load_model(path: str):
    import joblib

    if not os.path.isfile(path):
        raise CLIError(f"MODEL: file {path!r} not found.")
    try:
        payload = joblib.load(path)
    except Exception as exc:  # pickle / zlib / EOF errors of a file that is no model
        raise CLIError(f"MODEL: {path!r} is not a crossmetric model file "
                       f"({type(exc).__name__}: {_one_line(exc)}).") from None
    if not isinstance(payload, dict) or payload.get("format") != _MODEL_FORMAT:
        raise CLIError(f"MODEL: {path!r} is not a crossmetric model file (written by "
                       "'crossmetric fit').")
    return payload["model"], payload.get("method", type(payload["model"]).__name__)


def _parse_params(items) -> dict:
    """``--param name=value`` (value read as JSON when possible, else a string)."""
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CLIError(f"--param expects name=value, got {item!r}.")
        try:
            out[name.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[name.strip()] = value
        if isinstance(out[name.strip()], list):
            out[name.strip()] = tuple(out[name.strip()])
    return out


# --------------------------------------------------------------------------- benchmark
def _load_dataset(spec: str, data_home: str | None):
    from crossmetric.datasets import MFEAT_VIEWS, load_digits_views, load_mfeat

    name, _, arg = spec.partition(":")
    name = name.strip().lower()
    if name == "digits":
        if arg:
            raise CLIError(f"--dataset digits takes no views, got {spec!r}.")
        return load_digits_views(), "digits (photo pixels vs sketch HOG)"
    if name == "mfeat":
        views = tuple(v.strip() for v in (arg or "fou,pix").split(","))
        if len(views) != 2 or any(v not in MFEAT_VIEWS for v in views):
            raise CLIError(f"--dataset mfeat:V1,V2 needs two views among "
                           f"{','.join(MFEAT_VIEWS)}, got {spec!r}.")
        home = data_home or os.environ.get("CROSSMETRIC_DATA")
        if not home:
            raise CLIError("--dataset mfeat needs --data-home DIR (the folder with mfeat-fou, "
                           "mfeat-pix, ...).")
        try:
            return load_mfeat(home, views), f"mfeat {views[0]} vs {views[1]}"
        except ValueError as exc:
            raise CLIError(f"--data-home: {exc}") from None
    raise CLIError(f"unknown --dataset {spec!r}; expected 'digits' or 'mfeat:V1,V2'.")


def _method_list(text: str | None) -> list[str]:
    from crossmetric.registry import METHODS

    if text is None:
        return [name for name, spec in METHODS.items() if spec.in_default]
    if text.strip().lower() == "all":
        return list(METHODS)
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    if not names:
        raise CLIError("--methods is empty.")
    unknown = [n for n in names if n not in METHODS]
    if unknown:
        raise CLIError(f"unknown method(s) {', '.join(unknown)}; expected a comma-separated "
                       f"list among {', '.join(METHODS)}.")
    return list(dict.fromkeys(names))


def cmd_benchmark(args) -> int:
    from crossmetric.plotting import plot_cmc, plot_roc
    from crossmetric.protocols import run_protocols
    from crossmetric.registry import METHODS, make_estimator, method_status

    if args.list:
        for name, spec in METHODS.items():
            status = method_status(name)
            print(f"{name:10s} {spec.display:10s} "
                  f"{'available' if status is None else 'NOT AVAILABLE: ' + status}")
            print(f"{'':10s} {spec.params}  -- {spec.note}")
            if spec.grid:
                print(f"{'':10s} --tune grid: {spec.grid}")
        return 0
    if args.tune_folds < 2:
        raise CLIError(f"--tune-folds must be >= 2, got {args.tune_folds}.")
    for opt in ("folds", "repeats"):
        if getattr(args, opt) < (2 if opt == "folds" else 1):
            raise CLIError(f"--{opt} must be >= {2 if opt == 'folds' else 1}, "
                           f"got {getattr(args, opt)}.")
    names = _method_list(args.methods)
    dataset, description = _load_dataset(args.dataset, args.data_home)
    estimators, pca, grids = {}, {}, {}
    for name in names:
        status = method_status(name)
        if status is not None:
            print(f"crossmetric: skipping {name}: not available ({status})", file=sys.stderr)
            continue
        estimators[METHODS[name].display] = make_estimator(name)
        if METHODS[name].pca_components is not None:
            pca[METHODS[name].display] = METHODS[name].pca_components
        if args.tune and METHODS[name].grid:
            grids[METHODS[name].display] = METHODS[name].grid
    if not estimators:
        raise CLIError("none of the requested methods is available.")
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"--out: cannot create {args.out!r}: {exc.strerror}.") from None
    protocols = ("verification", "identification") if args.protocol == "both" else (
        args.protocol,)
    print(f"crossmetric benchmark: {len(estimators)} method(s) on {description}, "
          f"{dataset['X'].shape[0]} objects, views of {dataset['X'].shape[1]} and "
          f"{dataset['Y'].shape[1]} features; identity = {args.level}; "
          f"{args.folds}-fold verification, {args.repeats} identification repeats",
          file=sys.stderr)
    t0 = time.perf_counter()
    try:
        result = run_protocols(
            estimators, dataset, protocols=protocols, n_folds=args.folds,
            n_repeats=args.repeats, n_negatives=args.n_negatives,
            max_train_positives=args.max_train_positives, level=args.level,
            pca_components=pca,
            n_jobs=args.n_jobs, random_state=args.seed, progress=not args.no_progress,
            on_error="record", param_grids=grids or None, tune_folds=args.tune_folds)
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None
    elapsed = time.perf_counter() - t0
    result.info.update(dataset=description, seconds=round(elapsed, 1), seed=args.seed)
    for meth, reason in result.skipped.items():
        print(f"crossmetric: skipped {meth}: {reason}", file=sys.stderr)
    for meth, msg in result.errors.items():
        print(f"crossmetric: {meth} failed: {_one_line(msg)}", file=sys.stderr)
    n_fits = args.folds * ("verification" in protocols) + args.repeats * (
        "identification" in protocols)
    for meth, counts in result.warnings.items():
        what = ", ".join(f"{cat} in {k}/{n_fits} fits" for cat, k in counts.items())
        print(f"crossmetric: note: {meth}: {what}", file=sys.stderr)
    print(result.table())
    print(f"\n{description}; mean ± std over {args.folds} folds (verification) and "
          f"{args.repeats} repeats (identification); {elapsed:.1f} s")
    notes = [f"{m}: each view reduced by PCA to {k} dims" for m, k in
             result.info.get("pca", {}).items()]
    if any(m.endswith("-C") for m in result.methods):
        notes.append("-C: single-modal learner on CCA-processed views (CCA fitted on the "
                     "training pairs, 32 dims), as the CML-AUC paper's -C rows")
    for note in notes:
        print(f"  {note}")
    if result.info.get("tuned"):
        from crossmetric.model_selection import describe_choices

        print(f"\nhyper-parameters chosen by {args.tune_folds}-fold inner cross-validation on "
              f"each split's training objects (folds grouped by "
              f"{result.info['tuning']['group']}); most frequent value (splits):")
        for meth, runs in result.info["tuned"].items():
            print(f"  {meth}: {describe_choices([r['params'] for r in runs])}")
    out = args.out
    result.to_csv(os.path.join(out, "results.csv"))
    result.to_json(os.path.join(out, "results.json"))
    rocs = {m: c["roc"] for m, c in result.curves.items() if "roc" in c}
    cmcs = {m: c["cmc"] for m, c in result.curves.items() if "cmc" in c}
    if rocs:
        plot_roc(rocs, fpr_range=(0.0, 0.1), title=f"ROC -- {description}",
                 path=os.path.join(out, "roc.png"))
    if cmcs:
        plot_cmc(cmcs, title=f"CMC -- {description}", path=os.path.join(out, "cmc.png"))
    print(f"wrote results.csv, results.json{', roc.png' if rocs else ''}"
          f"{', cmc.png' if cmcs else ''} to {out}", file=sys.stderr)
    return 0 if result.summary else 1


# ---------------------------------------------------------------------------------- fit
def cmd_fit(args) -> int:
    from crossmetric.registry import METHODS, make_estimator, method_status

    name = args.method.strip().lower()
    if name not in METHODS:
        raise CLIError(f"unknown method {args.method!r}; expected one of "
                       f"{', '.join(METHODS)}.")
    status = method_status(name)
    if status is not None:
        raise CLIError(f"method {name!r} is not available: {status}.")
    params = _parse_params(args.param)
    if args.seed is not None:
        params.setdefault("random_state", args.seed)
    try:
        est = make_estimator(name, **params)
    except TypeError as exc:
        raise CLIError(f"--param: {_one_line(exc)}") from None
    images = int(getattr(est, "_sample_ndim", 1)) > 1
    X = _load_array(args.x, "--x", allow_images=images)
    Y = _load_array(args.y, "--y", allow_images=images) if args.y else None
    pairs, y = _load_pairs(args.pairs)
    _check_pair_rows(pairs, X.shape[0], (Y if Y is not None else X).shape[0])
    est.set_params(preprocessor=_preprocessor(est, X, Y))
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est.fit(pairs, y)
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None
    elapsed = time.perf_counter() - t0
    for msg in dict.fromkeys(f"{w.category.__name__}: {_one_line(w.message)}" for w in caught):
        print(f"crossmetric: warning: {msg}", file=sys.stderr)
    train_auc = est.score(pairs, y)
    if args.convergence:
        curve = getattr(est, "loss_curve_", None)
        if curve is None or len(curve) == 0:
            print(f"crossmetric: {METHODS[name].display} is not iterative (no loss_curve_); "
                  "no convergence plot", file=sys.stderr)
        else:
            from crossmetric.plotting import plot_convergence

            plot_convergence({METHODS[name].display: curve}, path=args.convergence,
                             title=f"{METHODS[name].display} convergence")
    _save_model(args.out, est, name)
    print(f"fitted {METHODS[name].display} on {pairs.shape[0]} pairs in {elapsed:.2f} s "
          f"(training AUC {train_auc:.4f}); saved to {args.out}")
    return 0


# ----------------------------------------------------------------------------- evaluate
def cmd_evaluate(args) -> int:
    from crossmetric import metrics as M

    est, method = _load_model(args.model)
    images = int(getattr(est, "_sample_ndim", 1)) > 1
    X = _load_array(args.x, "--x", allow_images=images)
    Y = _load_array(args.y, "--y", allow_images=images) if args.y else None
    pairs, y = _load_pairs(args.pairs)
    _check_pair_rows(pairs, X.shape[0], (Y if Y is not None else X).shape[0])
    if not (y == 1).any() or not (y == -1).any():
        raise CLIError("--pairs: evaluation needs both +1 (same) and -1 (different) pairs.")
    est.set_params(preprocessor=_preprocessor(est, X, Y))
    try:
        d = est.pair_distance(pairs)
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None
    rep = M.verification_report(y, -d, fpr=args.fpr)
    rep["accuracy_at_threshold"] = float(np.mean(np.where(d <= est.threshold_, 1, -1) == y))
    rep["n_pairs"] = int(y.size)
    if args.json:
        print(json.dumps({"method": method, **rep}, indent=1))
        return 0
    labels = {"auc": "ROC AUC", "one_minus_eer": "1 - EER",
              "vr": f"VR@FPR={args.fpr:g}", "pauc": "pAUC [0, 0.1] (normalised)",
              "acc_median": "accuracy at median distance",
              "accuracy_at_threshold": "accuracy at the model's threshold",
              "n_pairs": "pairs"}
    print(f"{method} on {args.pairs}")
    for key, label in labels.items():
        v = rep[key]
        print(f"  {label:34s} {v if isinstance(v, int) else f'{v:.4f}'}")
    return 0


# ------------------------------------------------------------------------------- search
def _exhaustive_search(est, Q: np.ndarray, D: np.ndarray, k: int):
    from sklearn.utils import gen_batches

    k = min(k, D.shape[0])
    dist = np.empty((Q.shape[0], k))
    ids = np.empty((Q.shape[0], k), dtype=np.int64)
    rows = max(1, (1 << 22) // D.shape[0])
    for sl in gen_batches(Q.shape[0], rows):
        block = est.cross_distance(Q[sl], D)
        top = np.argpartition(block, k - 1, axis=1)[:, :k]
        order = np.argsort(np.take_along_axis(block, top, axis=1), axis=1, kind="stable")
        ids[sl] = np.take_along_axis(top, order, axis=1)
        dist[sl] = np.take_along_axis(block, ids[sl], axis=1)
    return dist, ids


def cmd_search(args) -> int:
    est, method = _load_model(args.model)
    if args.k < 1:
        raise CLIError(f"-k must be >= 1, got {args.k}.")
    images = int(getattr(est, "_sample_ndim", 1)) > 1
    D = _load_array(args.database, "--database", allow_images=images)
    Q = _load_array(args.queries, "--queries", allow_images=images)
    try:
        try:
            from crossmetric.retrieval import Index

            index = Index(est, kind=args.kind)
        except ValueError as exc:
            if "cross_distance" not in str(exc):
                raise
            print(f"crossmetric: {method} has no l2 embedding; exhaustive search with "
                  "cross_distance", file=sys.stderr)
            dist, ids = _exhaustive_search(est, Q, D, args.k)
        else:
            index.add(D)
            dist, ids = index.search(Q, args.k)
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None
    if args.out:
        ext = os.path.splitext(args.out)[1].lower()
        if ext == ".npz":
            np.savez(args.out, ids=ids, distances=dist)
        else:
            _write_search_csv(args.out, ids, dist)
        print(f"wrote the {ids.shape[1]} nearest database rows of {ids.shape[0]} queries to "
              f"{args.out}", file=sys.stderr)
    else:
        _write_search_csv(None, ids, dist)
    return 0


def _write_search_csv(path: str | None, ids: np.ndarray, dist: np.ndarray) -> None:
    fh = sys.stdout if path is None else open(path, "w", encoding="utf-8")
    try:
        fh.write("query,rank,id,distance\n")
        for q in range(ids.shape[0]):
            for r in range(ids.shape[1]):
                if ids[q, r] < 0:
                    continue
                fh.write(f"{q},{r + 1},{int(ids[q, r])},{float(dist[q, r]):.6g}\n")
    finally:
        if path is not None:
            fh.close()


# ------------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``crossmetric`` (sub-commands benchmark, fit, evaluate, search)."""
    p = _Parser(prog="crossmetric",
                description="Cross-modal and single-modal metric learning from pairs.")
    from crossmetric import __version__

    p.add_argument("--version", action="version", version=f"crossmetric {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    b = sub.add_parser("benchmark", help="compare methods under the papers' protocols",
                       description="Run methods under k-fold verification and repeated "
                                   "gallery/probe identification; print a table and write "
                                   "results.csv, results.json, roc.png, cmc.png.")
    b.add_argument("--dataset", default="digits",
                   help="'digits' (embedded, default) or 'mfeat:V1,V2' (e.g. mfeat:fou,pix)")
    b.add_argument("--data-home", default=None, help="folder of the mfeat files")
    b.add_argument("--methods", default=None,
                   help="comma-separated method names, or 'all' (default: every method "
                        "except the papers' extra baselines itml, nca, lmnn, mcc, prdc; "
                        "see --list)")
    b.add_argument("--folds", type=int, default=10,
                   help="verification folds (default 10, as LFW)")
    b.add_argument("--repeats", type=int, default=10,
                   help="identification repetitions (default 10, as VIPeR / CUFSF)")
    b.add_argument("--protocol", choices=("both", "verification", "identification"),
                   default="both")
    b.add_argument("--level", choices=("labels", "instance"), default="labels",
                   help="identity of a pair: the class label (default) or the object "
                        "(photo <-> sketch of the same image)")
    b.add_argument("--n-negatives", type=int, default=1,
                   help="negative training pairs per positive (default 1)")
    b.add_argument("--max-train-positives", type=int, default=1000,
                   help="positive training pairs per split (default 1000)")
    b.add_argument("--n-jobs", type=int, default=-1, help="parallel workers (default: all)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--out", default="crossmetric-results",
                   help="output folder (default ./crossmetric-results)")
    b.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    b.add_argument("--list", action="store_true", help="list the methods and their settings")
    b.add_argument("--tune", action="store_true",
                   help="choose each method's hyper-parameters from its registry grid by "
                        "inner cross-validation on every split's training objects (folds "
                        "grouped by identity); costs (grid size x tune folds + 1) fits per "
                        "split, so it is off by default")
    b.add_argument("--tune-folds", type=int, default=3,
                   help="inner cross-validation folds of --tune (default 3)")
    b.set_defaults(func=cmd_benchmark)

    f = sub.add_parser("fit", help="fit a method on labelled pairs and save the model")
    f.add_argument("method", help="method name (see 'crossmetric benchmark --list')")
    f.add_argument("--x", required=True, help="first-modality samples (.npy/.npz/.csv)")
    f.add_argument("--y", default=None, help="second-modality samples (cross-modal)")
    f.add_argument("--pairs", required=True, help=".csv with rows i,j,label (+1/-1)")
    f.add_argument("--out", required=True, help="model file to write (joblib)")
    f.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="override a constructor argument (repeatable)")
    f.add_argument("--seed", type=int, default=None, help="random_state of the learner")
    f.add_argument("--convergence", default=None, metavar="PNG",
                   help="also plot the objective per iteration (loss_curve_) to this file")
    f.set_defaults(func=cmd_fit)

    e = sub.add_parser("evaluate", help="verification measures of a saved model on pairs")
    e.add_argument("model")
    e.add_argument("--x", required=True)
    e.add_argument("--y", default=None)
    e.add_argument("--pairs", required=True)
    e.add_argument("--fpr", type=float, default=1e-3, help="VR operating point (default 1e-3)")
    e.add_argument("--json", action="store_true", help="print JSON")
    e.set_defaults(func=cmd_evaluate)

    s = sub.add_parser("search", help="k nearest database rows of each query")
    s.add_argument("model")
    s.add_argument("--database", required=True, help="database rows (second modality)")
    s.add_argument("--queries", required=True, help="queries (first modality)")
    s.add_argument("-k", type=int, default=10)
    s.add_argument("--kind", choices=("flat", "ivf", "ivfpq", "gmm"), default="flat")
    s.add_argument("--out", default=None, help="write .csv or .npz instead of stdout")
    s.set_defaults(func=cmd_search)

    r = sub.add_parser("reproduce", help="re-run a paper's experiment on its data and print "
                                         "the published numbers beside ours",
                       description="Named reproductions (see --list): our numbers, the "
                                   "paper's and the difference; writes results.csv, "
                                   "results.json and the figure into --out.")
    r.add_argument("name", nargs="?", help="reproduction name (see --list)")
    r.add_argument("--list", action="store_true", help="list the reproductions")
    r.add_argument("--data-home", default=None,
                   help="folder holding viper/ and pku_sketch/ (default: ../shared/data "
                        "relative to the current directory, if present)")
    r.add_argument("--splits", type=int, default=None,
                   help="random splits (default: the paper's, 10)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", default=None,
                   help="output folder (default ./crossmetric-reproduce/NAME)")
    r.add_argument("--n-jobs", type=int, default=-1,
                   help="parallel workers over the splits (default: all cores)")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
    r.set_defaults(func=cmd_reproduce)
    return p


def cmd_reproduce(args) -> int:
    """``crossmetric reproduce NAME``: run a named reproduction, print and write its table."""
    from crossmetric.reproduce import list_reproductions, run_reproduction

    if args.list:
        for name, desc in list_reproductions().items():
            print(f"{name:<24} {desc}")
        return 0
    if not args.name:
        raise CLIError("reproduce: give a reproduction NAME or --list")
    if args.name not in list_reproductions():
        raise CLIError(f"reproduce: unknown reproduction {args.name!r}; expected one of "
                       f"{', '.join(list_reproductions())}")
    if args.data_home is not None and not os.path.isdir(args.data_home):
        raise CLIError(f"--data-home: {args.data_home!r} is not a directory")
    if args.splits is not None and args.splits < 1:
        raise CLIError(f"--splits must be >= 1, got {args.splits}")
    out = args.out or os.path.join("crossmetric-reproduce", args.name)
    result = run_reproduction(args.name, args.data_home, n_splits=args.splits, out=out,
                              seed=args.seed, verbose=not args.quiet, n_jobs=args.n_jobs)
    print(result.table())
    print(f"({result.seconds:.1f} s; wrote {', '.join(result.files)})")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 2 bad input, 1 failure)."""
    parser = build_parser()
    debug = bool(os.environ.get("CROSSMETRIC_DEBUG"))
    try:
        args = parser.parse_args(argv)
        if getattr(args, "func", None) is None:
            parser.print_help(sys.stderr)
            return 2
        return int(args.func(args))
    except SystemExit as exc:  # --help / --version
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    except CLIError as exc:
        if debug:
            raise
        print(f"crossmetric: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        if debug:
            raise
        print(f"crossmetric: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("crossmetric: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not bad input: still one line unless debugging
        if debug:
            raise
        print(f"crossmetric: internal error: {type(exc).__name__}: {_one_line(exc)} "
              "(set CROSSMETRIC_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1
