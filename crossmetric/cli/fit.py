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


# ---------------------------------------------------------------------------------- fit
def _fit_pairs(args, est, X: np.ndarray, Y: np.ndarray | None):
    """Training pairs from --pairs, or drawn from --labels (make_pairs)."""
    if args.pairs is not None:
        pairs, y = _load_pairs(args.pairs)
        _check_pair_rows(pairs, X.shape[0], (Y if Y is not None else X).shape[0])
        return pairs, y
    from crossmetric.pairs import make_pairs

    labels = _load_label_file(args.labels, "--labels", X.shape[0])
    _check_identities(labels, "--labels")
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
    if (args.pairs is None) == (args.labels is None):
        raise CLIError("give exactly one of --pairs FILE (i,j,label rows) or --labels FILE "
                       "(one identity per row; pairs are drawn from it).")
    _check_int(args, "--n-negatives", 1)
    _check_int(args, "--seed", 0, 2**32 - 1)
    if args.labels is not None:
        _max_positives(args)
    _check_output_file(args.out, "--out")
    _check_output_file(args.convergence, "--convergence", (".png",))
    _check_outputs_not_inputs(
        {"--out": args.out, "--convergence": args.convergence},
        {"--x": args.x, "--y": args.y, "--pairs": args.pairs, "--labels": args.labels})
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


def _plot_convergence(est, display: str, path: str) -> None:
    curve = getattr(est, "loss_curve_", None)
    if curve is None or len(curve) == 0:
        print(f"crossmetric: {display} is not iterative (no loss_curve_); "
              "no convergence plot", file=sys.stderr)
        return
    from crossmetric.plotting import plot_convergence

    plot_convergence({display: curve}, path=path, title=f"{display} convergence")


def cmd_fit(args) -> int:
    from crossmetric.registry import METHODS

    name, est = _fit_estimator(args)
    display = METHODS[name].display
    images = int(getattr(est, "_sample_ndim", 1)) > 1
    X = _load_array(args.x, "--x", allow_images=images, key=args.key)
    Y = _load_array(args.y, "--y", allow_images=images, key=args.key) if args.y else None
    pairs, y = _fit_pairs(args, est, X, Y)
    est.set_params(preprocessor=_preprocessor(est, X, Y))
    elapsed = _fit_reporting_warnings(est, pairs, y, getattr(args, "on_conflict", "error"),
                                      "--pairs" if args.pairs is not None else "--labels")
    train_auc = est.score(pairs, y)
    if args.convergence:
        _plot_convergence(est, display, args.convergence)
    _save_model(args.out, est, name)
    print(f"fitted {display} on {pairs.shape[0]} pairs in {elapsed:.2f} s "
          f"(training AUC {train_auc:.4f}); saved to {args.out}")
    return 0
