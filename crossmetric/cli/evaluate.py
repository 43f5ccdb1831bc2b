"""``crossmetric evaluate MODEL``: verification and identification measures of a saved model."""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from crossmetric.cli._common import (
    CLIError,
    _check_output_file,
    _check_outputs_not_inputs,
    _check_pair_rows,
    _load_array,
    _load_label_file,
    _load_model,
    _load_pairs,
    _one_line,
    _preprocessor,
)
from crossmetric.persistence import atomic_open


# ----------------------------------------------------------------------------- evaluate
def _parse_ranks(text: str) -> tuple[int, ...]:
    try:
        ranks = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        ranks = ()
    if not ranks or min(ranks) < 1:
        raise CLIError(f"--ranks expects positive integers separated by commas (e.g. 1,5,10), "
                       f"got {text!r}.")
    return ranks


def _validate_evaluate(args) -> tuple[bool, bool]:
    ident = args.probe_labels is not None or args.gallery_labels is not None
    if ident and (args.probe_labels is None or args.gallery_labels is None):
        raise CLIError("identification needs both --probe-labels and --gallery-labels.")
    verif = args.pairs is not None
    if not verif and not ident:
        raise CLIError("evaluate needs --pairs FILE (verification) or --probe-labels and "
                       "--gallery-labels (identification: --x probes, --y gallery).")
    if args.scores is not None and verif and ident:
        raise CLIError("--scores writes the scores of one task: give it with --pairs or with "
                       "the identification labels, not both.")
    if not 0.0 < args.fpr < 1.0:
        raise CLIError(f"--fpr must be in (0, 1), got {args.fpr}.")
    _parse_ranks(args.ranks)
    _check_output_file(args.scores, "--scores", (".csv", ".npy"))
    if args.query_expansion is not None and args.query_expansion < 1:
        raise CLIError(f"--query-expansion must be >= 1, got {args.query_expansion}.")
    refine = args.re_rank or args.query_expansion is not None
    if not ident and (args.same_set or refine or args.show_ranks):
        raise CLIError("--same-set, --re-rank, --query-expansion and --show-ranks apply to "
                       "identification: give --probe-labels and --gallery-labels.")
    if getattr(args, "ranks_failures", False) and args.show_ranks is None:
        raise CLIError("--ranks-failures needs --show-ranks N.")
    if args.show_ranks is not None:
        if args.show_ranks < 1:
            raise CLIError(f"--show-ranks must be >= 1, got {args.show_ranks}.")
        if args.top_k < 1:
            raise CLIError(f"--top-k must be >= 1, got {args.top_k}.")
        _check_output_file(args.ranks_out, "--ranks-out", (".html",))
    if args.scores is not None and verif and args.scores.lower().endswith(".npy"):
        raise CLIError("--scores: verification scores are written as .csv (i,j,label,"
                       "distance,score).")
    outputs = {"--scores": args.scores}
    if args.show_ranks is not None:  # the page and the PNG beside it
        outputs.update({"--ranks-out": args.ranks_out,
                        "--ranks-out (its PNG)": os.path.splitext(args.ranks_out)[0] + ".png"})
    _check_outputs_not_inputs(outputs, {
        "MODEL": args.model, "--x": args.x, "--y": args.y, "--pairs": args.pairs,
        "--probe-labels": args.probe_labels, "--gallery-labels": args.gallery_labels,
        "--probe-images": args.probe_images, "--gallery-images": args.gallery_images})
    return verif, ident


def _identification(est, X: np.ndarray, G: np.ndarray, pl, gl, ranks, scores_path, *,
                    same_set: bool = False, re_rank: bool = False,
                    query_expansion: int | None = None):
    """The library's one identification measure
    (:func:`crossmetric.protocols.measure_identification`): the report and the distance matrix
    (None on the blockwise path)."""
    from crossmetric.protocols import measure_identification

    return measure_identification(est, X, G, pl, gl, ranks=ranks, same_set=same_set,
                                  re_rank=re_rank, query_expansion=query_expansion,
                                  scores_path=scores_path)


def _load_pictures(path: str, what: str) -> np.ndarray:
    """Pictures for --show-ranks: a .npy array (n, h, w) or (n, h, w, 1 | 3 | 4)."""
    if not path.lower().endswith(".npy") or not os.path.isfile(path):
        raise CLIError(f"{what}: expected an existing .npy file of images, got {path!r}.")
    from crossmetric._utils.array_files import check_array_file

    try:
        check_array_file(path)  # the declared size against the file's, before allocating
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise CLIError(f"{what}: {path!r} could not be read as .npy ({_one_line(exc)}).") \
            from None
    if arr.dtype.kind not in "uif" or not (arr.ndim == 3 or (arr.ndim == 4 and
                                                             arr.shape[3] in (1, 3, 4))):
        raise CLIError(f"{what}: expected numeric images of shape (n, h, w) or (n, h, w, 3), "
                       f"got {arr.dtype} {arr.shape}.")
    return arr


def _show_ranks(args, est, X, G, pl, gl, D, images: bool) -> list[str]:
    """``--show-ranks N``: the rank lists of the first N probes as HTML (+ PNG beside)."""
    from crossmetric import plotting
    from crossmetric.ranklists import write_rank_html

    if images:
        q_img, g_img = X, G
    else:
        if args.probe_images is None:
            raise CLIError("--show-ranks: the model takes features, so give the pictures: "
                           "--probe-images FILE.npy (and --gallery-images unless the gallery "
                           "is the probe set).")
        q_img = _load_pictures(args.probe_images, "--probe-images")
        g_img = (_load_pictures(args.gallery_images, "--gallery-images")
                 if args.gallery_images else q_img)
    if len(q_img) != X.shape[0] or len(g_img) != G.shape[0]:
        raise CLIError(f"--show-ranks: {len(q_img)} probe and {len(g_img)} gallery images "
                       f"for {X.shape[0]} probes and {G.shape[0]} gallery rows.")
    failures = bool(getattr(args, "ranks_failures", False))
    if failures:
        sel = _failing_probes(est, X, G, pl, gl, D, args.show_ranks, args.same_set)
        if sel.size == 0:
            print("crossmetric: note: --ranks-failures: every probe's first match is right; "
                  "no rank list written", file=sys.stderr)
            return []
    else:
        sel = np.arange(min(args.show_ranks, X.shape[0]))
    n = sel.size
    rows = np.array(D[sel], dtype=float) if D is not None else np.asarray(
        est.cross_distance(X[sel], G), dtype=float)
    k = args.top_k
    if args.same_set:  # own item after everything else, and never listed
        rows[np.arange(n), sel] = rows.max() + 1.0 + abs(rows.max())
        k = min(k, G.shape[0] - 1)
    html_path = args.ranks_out
    png_path = os.path.splitext(html_path)[0] + ".png"
    what = "probes whose first match is wrong" if failures else "probes"
    title = f"{os.path.basename(args.model)}: top {k} of the first {n} {what}"
    q_src = args.x if images else args.probe_images
    g_src = (args.y or args.x) if images else (args.gallery_images or args.probe_images)
    q_names = [f"{os.path.basename(q_src)} #{i}" for i in sel]
    g_names = [f"{os.path.basename(g_src)} #{j}" for j in range(len(g_img))]
    q_show = [q_img[i] for i in sel]
    write_rank_html(html_path, q_show, g_img, rows, pl[sel], gl, k=k, n_queries=n,
                    q_names=q_names, g_names=g_names, title=title)
    plotting.plot_rank_lists(q_show, g_img, rows, pl[sel], gl, k=k, n_queries=n,
                             q_names=q_names, g_names=g_names, title=title, path=png_path)
    return [html_path, png_path]


def _failing_probes(est, X, G, pl, gl, D, n: int, same_set: bool,
                    block: int = 1024) -> np.ndarray:
    """The first ``n`` probes whose nearest gallery item (their own left out with
    ``same_set``) has another identity, read block by block when there is no matrix."""
    found = []
    for start in range(0, X.shape[0], block):
        stop = min(start + block, X.shape[0])
        rows = np.array(D[start:stop], dtype=float) if D is not None else np.asarray(
            est.cross_distance(X[start:stop], G), dtype=float)
        if same_set:
            rows[np.arange(stop - start), np.arange(start, stop)] = np.inf
        wrong = np.flatnonzero(gl[np.argmin(rows, axis=1)] != pl[start:stop]) + start
        found.extend(wrong.tolist())
        if len(found) >= n:
            break
    return np.asarray(found[:n], dtype=np.int64)


def _verification_pairs(args, X: np.ndarray, Y: np.ndarray | None):
    pairs, y = _load_pairs(args.pairs)
    _check_pair_rows(pairs, X.shape[0], (Y if Y is not None else X).shape[0])
    if not (y == 1).any() or not (y == -1).any():
        raise CLIError("--pairs: evaluation needs both +1 (same) and -1 (different) pairs.")
    return pairs, y


def _identification_sets(args, X: np.ndarray, Y: np.ndarray | None):
    """``(gallery, probe labels, gallery labels)``; the gallery is --y, else the probes."""
    G = Y if Y is not None else X
    if args.same_set and G.shape[0] != X.shape[0]:
        raise CLIError(f"--same-set: the gallery must be the probe set itself (row i = "
                       f"probe i), got {X.shape[0]} probes and {G.shape[0]} gallery rows.")
    pl = _load_label_file(args.probe_labels, "--probe-labels", X.shape[0])
    gl = _load_label_file(args.gallery_labels, "--gallery-labels", G.shape[0])
    if pl.dtype.kind != gl.dtype.kind:
        pl, gl = pl.astype(str), gl.astype(str)
    if not np.isin(pl, gl).any():
        raise CLIError("--gallery-labels: no probe identity is in the gallery; expected the "
                       "gallery to hold the identities of the probes (--probe-labels).")
    return G, pl, gl


def _verification(args, est, pairs: np.ndarray, y: np.ndarray) -> dict:
    """The verification measures of the pairs
    (:func:`crossmetric.protocols.measure_verification`) and --scores, written atomically."""
    from crossmetric.protocols import measure_verification

    d = np.asarray(est.pair_distance(pairs))
    rep = measure_verification(est, pairs, y, fpr=args.fpr, distance=d)
    rep["n_pairs"] = int(y.size)
    if args.scores:
        with atomic_open(args.scores, "w", encoding="utf-8") as fh:
            fh.write("i,j,label,distance,score\n")
            fh.writelines(f"{int(a)},{int(b)},{int(lab)},{dist:.8g},{-dist:.8g}\n"
                          for (a, b), lab, dist in zip(pairs, y, d, strict=True))
    return rep


def _print_verification(method: str, args, report: dict) -> None:
    labels = {"auc": "ROC AUC", "one_minus_eer": "1 - EER",
              "vr": f"VR@FPR={args.fpr:g}", "pauc": "pAUC [0, 0.1] (normalised)",
              "acc_median": "accuracy at median distance",
              "accuracy_at_threshold": "accuracy at the model's threshold",
              "n_pairs": "pairs"}
    print(f"{method} on {args.pairs} (verification)")
    for key, label in labels.items():
        v = report[key]
        print(f"  {label:34s} {v if isinstance(v, int) else f'{v:.4f}'}")


def _print_identification(method: str, args, rep: dict, ranks) -> None:
    print(f"{method}: {rep['n_probes']} probes against a gallery of {rep['n_gallery']} "
          "(identification)")
    for r in ranks:
        print(f"  {'rank-' + str(r):34s} {100 * rep[f'rank{r}']:.2f} %")
    print(f"  {'mAP':34s} {100 * rep['map']:.2f} %")
    if args.same_set or args.re_rank or args.query_expansion is not None:
        opts = [o for o, on in (("same set: own item left out", args.same_set),
                                ("k-reciprocal re-ranking", args.re_rank),
                                (f"query expansion k={args.query_expansion}",
                                 args.query_expansion is not None)) if on]
        print(f"  ({'; '.join(opts)})")


def cmd_evaluate(args) -> int:
    verif, ident = _validate_evaluate(args)
    ranks = _parse_ranks(args.ranks)
    est, method = _load_model(args.model, args.trust_pickle)
    images = int(getattr(est, "_sample_ndim", 1)) > 1
    X = _load_array(args.x, "--x", allow_images=images, key=args.key)
    Y = _load_array(args.y, "--y", allow_images=images, key=args.key) if args.y else None
    report: dict = {"method": method}
    if verif:
        pairs, y = _verification_pairs(args, X, Y)
    if ident:
        G, pl, gl = _identification_sets(args, X, Y)
        beyond = [r for r in ranks if r > len(gl)]
        if beyond:
            print(f"crossmetric: note: --ranks {','.join(map(str, beyond))}: beyond the "
                  f"gallery's {len(gl)} items; reported as rank {len(gl)}", file=sys.stderr)
    est.set_params(preprocessor=_preprocessor(est, X, Y))
    try:
        if verif:
            report.update(_verification(args, est, pairs, y))
        if ident:
            report["identification"], D = _identification(
                est, X, G, pl, gl, ranks, args.scores, same_set=args.same_set,
                re_rank=args.re_rank, query_expansion=args.query_expansion)
            if args.show_ranks:
                report["rank_lists"] = _show_ranks(args, est, X, G, pl, gl, D, images)
    except ValueError as exc:  # --scores is written atomically: an older file stays intact
        raise CLIError(_one_line(exc)) from None
    if args.json:
        from crossmetric.persistence import json_ready

        print(json.dumps(json_ready(report), indent=1))
        return 0
    if verif:
        _print_verification(method, args, report)
    if ident:
        _print_identification(method, args, report["identification"], ranks)
    if report.get("rank_lists"):
        print(f"wrote rank lists to {', '.join(report['rank_lists'])}", file=sys.stderr)
    if args.scores:
        print(f"wrote per-pair scores to {args.scores}", file=sys.stderr)
    return 0
