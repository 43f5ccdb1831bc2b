"""``crossmetric fit METHOD``: fit a registry method on labelled pairs and save the model."""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np

from crossmetric.cli._common import (
    CLIError,
    _check_identities,
    _check_int,
    _check_output_file,
    _check_outputs_not_inputs,
    _check_pair_rows,
    _load_array,
    _load_label_file,
    _load_pairs,
    _one_line,
    _parse_params,
    _preprocessor,
    _save_model,
)
from crossmetric.cli._pipeline import (
    _check_image_options,
    _descriptor_settings,
    _hold_out,
    _identity_scores,
    _report_hold_out,
    _size_tuple,
)


# ---------------------------------------------------------------------------------- fit
def _fit_pairs(args, est, X: np.ndarray, Y: np.ndarray | None, labels=None):
    """Training pairs from --pairs, or drawn from --labels (make_pairs); ``labels``: the
    identities of an image folder's rows instead of --labels."""
    if args.pairs is not None:
        pairs, y = _load_pairs(args.pairs)
        _check_pair_rows(pairs, X.shape[0], (Y if Y is not None else X).shape[0])
        return pairs, y
    from crossmetric.pairs import make_pairs

    if labels is None:
        labels = _load_label_file(args.labels, "--labels", X.shape[0])
    _check_identities(labels, "--labels" if getattr(args, "images", None) is None
                      else "--images")
    if Y is not None and Y.shape[0] != X.shape[0]:
        raise CLIError(f"--labels with --y needs row-aligned files: --x has {X.shape[0]} rows, "
                       f"--y {Y.shape[0]}.")
    cross = Y is not None or bool(getattr(est, "_cross_modal", True))
    cap = _max_positives(args)
    if cap is not None:
        from crossmetric.pairs import count_positive_pairs

        n_pos = count_positive_pairs(labels, labels if cross else None)
        if n_pos > cap:
            print(f"crossmetric: note: --labels: {n_pos} positive pairs exist; {cap} drawn at "
                  f"random (--max-positives; 'all' takes every one)", file=sys.stderr)
    try:
        return make_pairs(labels, labels if cross else None, n_negatives=args.n_negatives,
                          max_positives=cap,
                          random_state=args.seed if args.seed is not None else 0)
    except ValueError as exc:
        raise CLIError(f"--labels: {_one_line(exc)}") from None


def _max_positives(args) -> int | None:
    """``--max-positives N|all`` (default :data:`crossmetric.pairs.DEFAULT_MAX_POSITIVES`);
    ``None``: every positive."""
    from crossmetric.pairs import DEFAULT_MAX_POSITIVES

    text = getattr(args, "max_positives", None)
    if text is None:
        return DEFAULT_MAX_POSITIVES
    if str(text).strip().lower() == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise CLIError(f"--max-positives must be a positive integer or 'all', got {text!r}.")
    return value


def _fit_estimator(args):
    """``(name, unfitted learner)`` of ``METHOD --param ... --seed``, options checked first."""
    from crossmetric.registry import _spec, make_estimator, method_status

    try:   # the registry's message, with its "did you mean"
        name = _spec(args.method).name
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None
    images = getattr(args, "images", None)
    _check_image_options(args, ("--x", "--y", "--key", "--pairs", "--labels"))
    if images is None and args.x is None:
        raise CLIError("give the samples: --x FILE [--y FILE], or --images DIR --pattern "
                       "REGEX.")
    if images is None and (args.pairs is None) == (args.labels is None):
        raise CLIError("give exactly one of --pairs FILE (i,j,label rows) or --labels FILE "
                       "(one identity per row; pairs are drawn from it).")
    if getattr(args, "validation_fraction", None) is not None and not \
            0.0 < args.validation_fraction < 0.5:
        raise CLIError(f"--validation-fraction must be in (0, 0.5), got "
                       f"{args.validation_fraction}.")
    _check_int(args, "--n-negatives", 1)
    _check_int(args, "--seed", 0, 2**32 - 1)
    if args.labels is not None:
        _max_positives(args)
    _check_output_file(args.out, "--out")
    _check_output_file(args.convergence, "--convergence", (".png",))
    _check_outputs_not_inputs(
        {"--out": args.out, "--convergence": args.convergence},
        {"--x": args.x, "--y": args.y, "--pairs": args.pairs, "--labels": args.labels,
         "--images": images})
    _pca_setting(args, name)  # --pca checked before any data is read
    status = method_status(name)
    if status is not None:
        raise CLIError(f"method {name!r} is not available: {status}.")
    params = _parse_params(name, args.param)
    try:
        est = make_estimator(name, **params)
    except TypeError as exc:
        if not params:  # not the user's options: a fault of the registry entry
            raise
        raise CLIError(f"--param: {_one_line(exc)}") from None
    _apply_seed(est, name, args.seed, params)
    return name, est


def _apply_seed(est, name: str, seed: int | None, params: dict) -> None:
    """``--seed`` as the learner's ``random_state`` (a ``--param random_state=...`` wins); a
    deterministic learner, which has no ``random_state``, ignores it with a note."""
    if seed is None or "random_state" in params:
        return
    if "random_state" in est.get_params(deep=False):
        est.set_params(random_state=seed)
        return
    from crossmetric.registry import METHODS

    print(f"crossmetric: note: {METHODS[name].display} is deterministic (no random_state); "
          f"--seed {seed} is ignored", file=sys.stderr)


def _conflict_message(exc, pairs: np.ndarray, y: np.ndarray, source: str) -> str:
    """The one line of a :class:`~crossmetric.pairs.PairConflictError` in the terms of the
    command line: the two rows of the --pairs file (or of the drawn pairs)."""
    rows = []
    for p in (exc.first, exc.second):
        rows.append(f"{int(pairs[p, 0])},{int(pairs[p, 1])},{int(y[p])}")
    if source == "--pairs":
        return (f"--pairs: data rows {exc.first + 1} ({rows[0]}) and {exc.second + 1} "
                f"({rows[1]}) join the same two samples with opposite labels; remove one, "
                "or give --on-conflict drop (leave such pairs out) or --on-conflict keep "
                "(fit them as given).")
    return f"{source}: {_one_line(exc)}"


def _fit_reporting_warnings(est, pairs: np.ndarray, y: np.ndarray,
                            on_conflict: str = "error", source: str = "--pairs") -> float:
    """Fit; each distinct warning printed once on stderr; returns the seconds taken.

    ``on_conflict``: what the fit does with pairs of the same samples labelled both +1 and
    -1 (:func:`crossmetric.pairs.pair_conflicts`); ``source`` names where the pairs came from
    in the message that refuses them.
    """
    from crossmetric.pairs import PairConflictError, pair_conflicts

    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught, pair_conflicts(on_conflict):
            warnings.simplefilter("always")
            est.fit(pairs, y)
    except PairConflictError as exc:
        raise CLIError(_conflict_message(exc, pairs, y, source)) from None
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None
    elapsed = time.perf_counter() - t0
    for msg in dict.fromkeys(f"{w.category.__name__}: {_one_line(w.message)}" for w in caught):
        print(f"crossmetric: warning: {msg}", file=sys.stderr)
    return elapsed


def _refuse_conflicts(est, X, Y, pairs, y, source: str) -> None:
    """Pairs of the same two samples labelled +1 and -1 among all the pairs given, before
    some are held out (:func:`crossmetric.pairs._pair_data.resolve_conflicts`, as the learners'
    ``fit`` checks them)."""
    from crossmetric.pairs._pair_data import (
        PairConflictError,
        PairData,
        canonical_pairs,
        resolve_conflicts,
    )

    tied = Y is None and not bool(getattr(est, "_cross_modal", True))
    data = PairData(X, X if Y is None else Y, pairs[:, 0], pairs[:, 1])
    try:
        resolve_conflicts(canonical_pairs(data, tied), y, tied, "error")
    except PairConflictError as exc:
        raise CLIError(_conflict_message(exc, pairs, y, source)) from None


def _plot_convergence(est, display: str, path: str) -> None:
    curve = getattr(est, "loss_curve_", None)
    if curve is None or len(curve) == 0:
        print(f"crossmetric: {display} is not iterative (no loss_curve_); "
              "no convergence plot", file=sys.stderr)
        return
    from crossmetric.plotting import plot_convergence

    plot_convergence({display: curve}, path=path, title=f"{display} convergence")


def _fit_data(args, est):
    """``(X, Y, labels, domain names, descriptor settings)``: the feature files, or the image
    folder read and described as ``benchmark`` does (a progress bar unless --quiet)."""
    images = int(getattr(est, "_sample_ndim", 1)) > 1
    if getattr(args, "images", None) is None:
        X = _load_array(args.x, "--x", allow_images=images, key=args.key)
        Y = _load_array(args.y, "--y", allow_images=images, key=args.key) if args.y else None
        names = (args.x_name or "x", args.y_name or "y") if hasattr(args, "x_name") else None
        return X, Y, None, names, {}
    from crossmetric.cli._data import _image_folder_dataset

    if images:
        raise CLIError(f"--images: {args.method} learns from the pixels; give them as --x "
                       "FILE.npy of images (crossmetric features --help for a folder).")
    args.descriptor, args.descriptor_params = _descriptor_settings(args)
    data, description = _image_folder_dataset(args, progress=not args.quiet)
    print(f"crossmetric fit: {description}", file=sys.stderr)
    names = data.domain_names or (args.x_name or "x", args.y_name or "y")
    settings = {"descriptor": args.descriptor or "hog",
                "descriptor_params": args.descriptor_params,
                "size": _size_tuple(args.size)}
    return data.X, data.Y, data.labels, names, settings


def _pca_setting(args, name: str):
    """``--pca``: ``auto`` (default: the registry's width, else the training identities minus
    one where the views are wider), ``none`` or a width."""
    from crossmetric.registry import METHODS

    text = str(getattr(args, "pca", None) or "auto").strip().lower()
    if text == "auto":
        spec = METHODS[name].pca_components
        return spec if spec is not None else "auto"
    if text == "none":
        return None
    if not text.isdigit() or int(text) < 1:
        raise CLIError(f"--pca expects auto, none or a positive width, got {args.pca!r}.")
    return int(text)


def _fit_pipeline(args, name: str, est, X, Y, pairs, y, names, settings):
    """Fit the learner behind the view step (:class:`ViewPipeline`) on the pairs outside the
    held-out identities; returns ``(model, seconds, train mask, validation mask)``."""
    from crossmetric.protocols.pipeline import ViewPipeline
    from crossmetric.protocols.views import cap_n_components_to_views
    from crossmetric.registry import METHODS

    for note in cap_n_components_to_views({METHODS[name].display: est}, X, Y):
        print(note, file=sys.stderr)
    tied = Y is None
    source = "--pairs" if args.pairs is not None else "--labels"
    if getattr(args, "on_conflict", "error") == "error":
        _refuse_conflicts(est, X, Y, pairs, y, source)  # on every pair given, held out or not
    split, args.hold_out_note = _hold_out(args, pairs, y, X.shape[0],
                                          X.shape[0] if tied else Y.shape[0], tied)
    train = np.ones(y.size, dtype=bool) if split is None else split[0]
    model = ViewPipeline(est, pca=_pca_setting(args, name), domain_names=names,
                         preprocessor=_preprocessor(est, X, Y), **settings)
    elapsed = _fit_reporting_warnings(model, pairs[train], y[train],
                                      getattr(args, "on_conflict", "error"),
                                      source)
    red = model.reduction_
    if red is not None and red.pca_x is not None:
        widths = sorted({int(red.pca_x.n_components_), int(red.pca_y.n_components_)})
        print(f"crossmetric fit: views of {X.shape[1]} features reduced by PCA (fitted on the "
              f"training side{', one PCA for both views' if red.pca_x is red.pca_y else ''}) "
              f"to {' / '.join(map(str, widths))} dims", file=sys.stderr)
    return model, elapsed, train, (None if split is None else split[1])


def cmd_fit(args) -> int:
    from crossmetric.registry import METHODS

    name, est = _fit_estimator(args)
    display = METHODS[name].display
    X, Y, labels, names, settings = _fit_data(args, est)
    pairs, y = _fit_pairs(args, est, X, Y, labels)
    if int(getattr(est, "_sample_ndim", 1)) > 1:  # a learner of pixels: no view step
        est.set_params(preprocessor=_preprocessor(est, X, Y))
        elapsed = _fit_reporting_warnings(est, pairs, y, getattr(args, "on_conflict", "error"),
                                          "--pairs" if args.pairs is not None else "--labels")
        model, learner, train, val = est, est, np.ones(y.size, dtype=bool), None
    else:
        model, elapsed, train, val = _fit_pipeline(args, name, est, X, Y, pairs, y, names,
                                                   settings)
        learner = model.learner_
    train_auc = learner.score(pairs[train], y[train])
    lines = []
    if model is not est:
        tied = Y is None
        Yv = X if tied else Y
        lines = _report_hold_out(
            _identity_scores(model, X, Yv, pairs[train], y[train], tied, args.seed),
            None if val is None else _identity_scores(model, X, Yv, pairs[val], y[val], tied,
                                                      args.seed))
    if args.convergence:
        _plot_convergence(learner, display, args.convergence)
    _save_model(args.out, model, name)
    print(f"fitted {display} on {int(train.sum())} pairs in {elapsed:.2f} s "
          f"(training AUC {train_auc:.4f}); saved to {args.out}")
    for line in lines:
        print(line)
    if getattr(args, "hold_out_note", None):
        print(f"  no held-out identities: {args.hold_out_note}")
    return 0
