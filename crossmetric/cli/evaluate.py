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
from crossmetric.cli._pipeline import (
    _apply_pipeline,
    _check_image_options,
    _domain_names,
    _probe_swap,
    _SwappedSides,
    _use_model_settings,
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
    if getattr(args, "images", None) is not None:  # identification of the folder's identities
        _check_image_options(args, ("--x", "--y", "--key", "--pairs", "--probe-labels",
                                    "--gallery-labels", "--probe-images", "--gallery-images"))
        ident = True
    else:
        if hasattr(args, "images"):
            _check_image_options(args, ())
        if args.x is None:
            raise CLIError("evaluate needs the probes: --x FILE, or --images DIR --pattern "
                           "REGEX.")
        ident = args.probe_labels is not None or args.gallery_labels is not None
    if ident and args.images is None and (args.probe_labels is None or
                                          args.gallery_labels is None):
        raise CLIError("identification needs both --probe-labels and --gallery-labels.")
    verif = args.pairs is not None
    if not verif and not ident:
        raise CLIError("evaluate needs --pairs FILE (verification) or --probe-labels and "
                       "--gallery-labels (identification: --x probes, --y gallery).")
    pcams, gcams = getattr(args, "probe_cams", None), getattr(args, "gallery_cams", None)
    if (pcams is None) != (gcams is None):
        raise CLIError("camera ids need both --probe-cams and --gallery-cams.")
    if pcams is not None and not ident:
        raise CLIError("--probe-cams and --gallery-cams apply to identification: give "
                       "--probe-labels and --gallery-labels.")
    if args.scores is not None and verif and ident:
        raise CLIError("--scores writes the scores of one task: give it with --pairs or with "
                       "the identification labels, not both.")
    if getattr(args, "protocol", None) == "retrieval":
        _validate_retrieval(args, ident)
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
        "--images": getattr(args, "images", None),
        "--probe-labels": args.probe_labels, "--gallery-labels": args.gallery_labels,
        "--probe-images": args.probe_images, "--gallery-images": args.gallery_images,
        "--probe-cams": pcams, "--gallery-cams": gcams})
    return verif, ident


def _validate_retrieval(args, ident: bool) -> None:
    """``--protocol retrieval``: two modalities with their categories, nothing of the rank
    lists or of the re-id refinements."""
    if not ident or args.y is None:
        raise CLIError("--protocol retrieval needs --y and the categories of both sides: "
                       "--probe-labels (of --x rows) and --gallery-labels (of --y rows).")
    extra = [o for o, on in (("--same-set", args.same_set), ("--re-rank", args.re_rank),
                             ("--query-expansion", args.query_expansion is not None),
                             ("--show-ranks", args.show_ranks is not None),
                             ("--scores", args.scores is not None)) if on]
    if extra:
        raise CLIError(f"{', '.join(extra)} do(es) not apply to --protocol retrieval.")
    if args.map_k < 1:
        raise CLIError(f"--map-k must be >= 1, got {args.map_k}.")


def _retrieval(args, est, X, Y, pl, gl) -> dict:
    """Class-level retrieval both ways (:func:`crossmetric.protocols.measure_retrieval`)."""
    from crossmetric.protocols import measure_retrieval

    rep, curves, _ = measure_retrieval(est, X, Y, pl, gl, k=args.map_k)
    rep.update({"k": int(min(args.map_k, len(gl), len(pl))), "n_x": int(len(pl)),
                "n_y": int(len(gl))})
    rep["precision_recall"] = {key: {"recall": r, "precision": p}
                               for key, (r, p) in curves.items()}
    return rep


def _print_retrieval(method: str, rep: dict) -> None:
    print(f"{method}: {rep['n_x']} x items and {rep['n_y']} y items, each querying the other "
          "side (class-level retrieval, relevant = same category)")
    for key, label in (("map_x2y", "mAP x->y"), ("map_y2x", "mAP y->x"),
                       ("map_mean", "mAP (mean of both)"),
                       ("map_at_k_x2y", f"mAP@{rep['k']} x->y"),
                       ("map_at_k_y2x", f"mAP@{rep['k']} y->x")):
        print(f"  {label:34s} {100 * rep[key]:.2f} %")
    for key in ("pr_x2y", "pr_y2x"):
        pr = rep["precision_recall"][key]
        pts = " ".join(f"{p:.2f}" for p in pr["precision"])
        print(f"  {'precision at recall 0,.1..1 ' + key[3:].replace('2', '->'):34s} {pts}")


def _identification(est, X: np.ndarray, G: np.ndarray, pl, gl, ranks, scores_path, *,
                    same_set: bool = False, re_rank: bool = False,
                    query_expansion: int | None = None, cams=None, distance=None):
    """The library's one identification measure
    (:func:`crossmetric.protocols.measure_identification`): the report and the distance matrix
    (None on the blockwise path). ``cams``: (probe cameras, gallery cameras) or None."""
    from crossmetric.protocols import measure_identification

    pc, gc = (None, None) if cams is None else cams
    return measure_identification(est, X, G, pl, gl, ranks=ranks, same_set=same_set,
                                  re_rank=re_rank, query_expansion=query_expansion,
                                  scores_path=scores_path, probe_cams=pc, gallery_cams=gc,
                                  distance=distance)


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


def _show_ranks(args, est, X, G, pl, gl, D, images: bool, pictures=None,
                cams=None) -> list[str]:
    """``--show-ranks N``: the rank lists of the first N probes as HTML (+ PNG beside);
    ``pictures``: the probes' and the gallery's images (``--images``); ``cams``: (probe,
    gallery) cameras, whose same-identity same-camera gallery items are not listed, as the
    measure leaves them out."""
    from crossmetric import plotting
    from crossmetric.ranklists import write_rank_html

    if pictures is not None:
        q_img, g_img = pictures
    elif images:
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
        sel = _failing_probes(est, X, G, pl, gl, D, args.show_ranks, args.same_set, cams)
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
    if cams is not None:  # never listed either: the gallery items the camera rule leaves out
        left_out = _camera_left_out(pl, gl, cams, sel)
        rows[left_out] = rows.max() + 1.0 + abs(rows.max())
        k = min(k, int((~left_out).sum(axis=1).min()))
    html_path = args.ranks_out
    png_path = os.path.splitext(html_path)[0] + ".png"
    what = "probes whose first match is wrong" if failures else "probes"
    title = f"{os.path.basename(args.model)}: top {k} of the first {n} {what}"
    q_src = args.x if images else args.probe_images
    g_src = (args.y or args.x) if images else (args.gallery_images or args.probe_images)
    if pictures is not None:
        q_src = g_src = args.images
    q_names = [f"{os.path.basename(q_src)} #{i}" for i in sel]
    g_names = [f"{os.path.basename(g_src)} #{j}" for j in range(len(g_img))]
    q_show = [q_img[i] for i in sel]
    write_rank_html(html_path, q_show, g_img, rows, pl[sel], gl, k=k, n_queries=n,
                    q_names=q_names, g_names=g_names, title=title)
    plotting.plot_rank_lists(q_show, g_img, rows, pl[sel], gl, k=k, n_queries=n,
                             q_names=q_names, g_names=g_names, title=title, path=png_path)
    return [html_path, png_path]


def _camera_left_out(pl, gl, cams, probes: np.ndarray) -> np.ndarray:
    """``(probes, gallery)`` mask of the gallery items of each probe's identity under its own
    camera: the Market-1501 / torchreid rule leaves them out of the probe's ranking."""
    pc, gc = cams
    return ((np.asarray(pl)[probes][:, None] == np.asarray(gl)[None, :])
            & (np.asarray(pc)[probes][:, None] == np.asarray(gc)[None, :]))


def _failing_probes(est, X, G, pl, gl, D, n: int, same_set: bool, cams=None,
                    block: int = 1024) -> np.ndarray:
    """The first ``n`` probes whose nearest gallery item (their own left out with
    ``same_set``, and the same-identity same-camera items with ``cams``) has another
    identity, read block by block when there is no matrix."""
    found = []
    for start in range(0, X.shape[0], block):
        stop = min(start + block, X.shape[0])
        rows = np.array(D[start:stop], dtype=float) if D is not None else np.asarray(
            est.cross_distance(X[start:stop], G), dtype=float)
        if same_set:
            rows[np.arange(stop - start), np.arange(start, stop)] = np.inf
        if cams is not None:
            rows[_camera_left_out(pl, gl, cams, np.arange(start, stop))] = np.inf
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


def _load_cams(path: str, what: str, n_rows: int) -> np.ndarray:
    """Cameras from a label file (text, .npy) or the ``cams`` array of an .npz file (the
    embeddings ``crossmetric features`` writes for a --pattern with a 'cam' group)."""
    if not path.lower().endswith(".npz"):
        return _load_label_file(path, what, n_rows)
    from crossmetric.datasets import load_labels

    try:
        cams = load_labels(path, key="cams", what="file")
    except ValueError as exc:
        raise CLIError(f"{what}: {_one_line(exc)} (an .npz file gives its 'cams' array)") \
            from None
    if cams.shape[0] != n_rows:
        raise CLIError(f"{what}: {path!r} has {cams.shape[0]} cameras, but the features have "
                       f"{n_rows} rows (one camera per row expected).")
    return cams


def _camera_ids(args, n_probes: int, n_gallery: int):
    """``(probe cameras, gallery cameras)`` of --probe-cams / --gallery-cams, or None."""
    if getattr(args, "probe_cams", None) is None:
        return None
    pc = _load_cams(args.probe_cams, "--probe-cams", n_probes)
    gc = _load_cams(args.gallery_cams, "--gallery-cams", n_gallery)
    if pc.dtype.kind != gc.dtype.kind:
        pc, gc = pc.astype(str), gc.astype(str)
    return pc, gc


def _verification(args, est, pairs: np.ndarray, y: np.ndarray, swap: bool = False) -> dict:
    """The verification measures of the pairs
    (:func:`crossmetric.protocols.measure_verification`) and --scores, written atomically;
    ``swap``: the pairs' first column indexes the model's second side."""
    from crossmetric.protocols import measure_verification

    d = np.asarray(est.pair_distance(pairs[:, ::-1] if swap else pairs))
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
    if "n_skipped" in rep:
        print(f"  (camera ids: gallery items of the probe's identity and camera left out; "
              f"{rep['n_skipped']} probes without another match skipped)")
    if args.same_set or args.re_rank or args.query_expansion is not None:
        opts = [o for o, on in (("same set: own item left out", args.same_set),
                                ("k-reciprocal re-ranking", args.re_rank),
                                (f"query expansion k={args.query_expansion}",
                                 args.query_expansion is not None)) if on]
        print(f"  ({'; '.join(opts)})")


def _evaluate_images(args, model, swap: bool):
    """``(probes, gallery, labels, pictures)`` of ``--images``: the folder read and described
    as ``benchmark`` does (the model's descriptor settings), the probe domain's rows against
    the other's (one domain: the gallery is the probe set, own item left out)."""
    from crossmetric.cli._data import _image_folder_dataset

    _use_model_settings(args, model)
    data, description = _image_folder_dataset(args, progress=not args.quiet)
    print(f"crossmetric evaluate: {description}", file=sys.stderr)
    if data.Y is None:
        args.same_set = True
        return data.X, None, data.labels, None
    sides = [(data.X, data.images_x), (data.Y, data.images_y)]
    names = _domain_names(model)
    if set(data.domain_names) == set(names):
        if data.domain_names[0] != names[0]:
            sides.reverse()
    else:
        print(f"crossmetric: note: the folder's domains {data.domain_names[0]!r}, "
              f"{data.domain_names[1]!r} are not the model's {names[0]!r}, {names[1]!r}; "
              "taken in that order", file=sys.stderr)
    if swap:
        sides.reverse()
    return sides[0][0], sides[1][0], data.labels, (sides[0][1], sides[1][1])


def _evaluate_data(args, est, swap: bool, images: bool):
    """``(X, Y, labels, pictures)``: --images, or the feature files (labels None)."""
    if getattr(args, "images", None) is not None:
        return _evaluate_images(args, est, swap)
    X = _load_array(args.x, "--x", allow_images=images, key=args.key)
    Y = _load_array(args.y, "--y", allow_images=images, key=args.key) if args.y else None
    return X, Y, None, None


def cmd_evaluate(args) -> int:
    verif, ident = _validate_evaluate(args)
    ranks = _parse_ranks(args.ranks)
    est, method = _load_model(args.model, args.trust_pickle)
    swap = _probe_swap(args, est)
    if swap and (args.re_rank or args.query_expansion is not None):
        raise CLIError("--re-rank and --query-expansion rank the model's first side against "
                       "its second; leave them out with --probe-domain "
                       f"{args.probe_domain}.")
    images = int(getattr(est, "_sample_ndim", 1)) > 1
    X, Y, labels, pictures = _evaluate_data(args, est, swap, images)
    est, X, Y = _apply_pipeline(est, X, Y, swap, "--x" if args.images is None else "probes",
                                "--y" if args.images is None else "gallery")
    report: dict = {"method": method}
    if verif:
        pairs, y = _verification_pairs(args, X, Y)
    if ident:
        if labels is not None:
            G, pl, gl = (Y if Y is not None else X), labels, labels
        else:
            G, pl, gl = _identification_sets(args, X, Y)
        beyond = [r for r in ranks if r > len(gl)]
        if beyond and getattr(args, "protocol", None) != "retrieval":
            print(f"crossmetric: note: --ranks {','.join(map(str, beyond))}: beyond the "
                  f"gallery's {len(gl)} items; reported as rank {len(gl)}", file=sys.stderr)
        cams = _camera_ids(args, X.shape[0], G.shape[0])
    est.set_params(preprocessor=(Y, X) if swap and Y is not None else
                   _preprocessor(est, X, Y))
    try:
        if verif:
            report.update(_verification(args, est, pairs, y, swap))
        if ident and getattr(args, "protocol", None) == "retrieval":
            report["retrieval"] = _retrieval(args, _SwappedSides(est) if swap else est,
                                             X, G, pl, gl)
        elif ident:
            report["identification"], D = _identification(
                est, X, G, pl, gl, ranks, args.scores, same_set=args.same_set,
                re_rank=args.re_rank, query_expansion=args.query_expansion, cams=cams,
                distance=_SwappedSides(est).cross_distance(X, G) if swap else None)
            if args.show_ranks:
                report["rank_lists"] = _show_ranks(args, est, X, G, pl, gl, D, images,
                                                   pictures, cams)
    except ValueError as exc:  # --scores is written atomically: an older file stays intact
        raise CLIError(_one_line(exc)) from None
    if args.json:
        from crossmetric.persistence import json_ready

        print(json.dumps(json_ready(report), indent=1))
        return 0
    if verif:
        _print_verification(method, args, report)
    if "retrieval" in report:
        _print_retrieval(method, report["retrieval"])
    elif ident:
        _print_identification(method, args, report["identification"], ranks)
    if report.get("rank_lists"):
        print(f"wrote rank lists to {', '.join(report['rank_lists'])}", file=sys.stderr)
    if args.scores:
        print(f"wrote per-pair scores to {args.scores}", file=sys.stderr)
    return 0
