"""``crossmetric search MODEL``: the k nearest database rows of each query."""

from __future__ import annotations

import contextlib
import json
import os
import sys

import numpy as np

from crossmetric.cli._common import (
    CLIError,
    _check_output_file,
    _check_outputs_not_inputs,
    _load_array,
    _load_model,
    _one_line,
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
from crossmetric.retrieval import exhaustive_search


def _nearest(args, est, method: str, Q: np.ndarray, D: np.ndarray, k: int):
    """faiss (:class:`crossmetric.retrieval.Index`) where it applies, else the exhaustive
    search by ``cross_distance`` (no faiss installed, or a score that is not an l2 distance
    between embeddings)."""
    from crossmetric.retrieval import Index

    try:
        try:
            index = Index(est, kind=args.kind)
            index.add(D)
            return index.search(Q, k)
        except ImportError as exc:  # faiss, an optional dependency
            print(f"crossmetric: no faiss ({_one_line(exc)}); exhaustive search with "
                  "cross_distance", file=sys.stderr)
        except ValueError as exc:
            if "cross_distance" not in str(exc):
                raise
            print(f"crossmetric: {method} has no l2 embedding; exhaustive search with "
                  "cross_distance", file=sys.stderr)
        return exhaustive_search(est, Q, D, k)
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None


def _search_images(args, model, swap: bool):
    """``(queries, database, query files, database files)`` of ``--images``: the folder read
    as ``benchmark`` reads it, described with the model's settings; the probe domain's images
    are the queries, the other domain's the database (one domain: both)."""
    from crossmetric.cli._data import _describe_images, _load_image_folder

    _use_model_settings(args, model)
    bunch, descriptor, params = _load_image_folder(args)
    F = _describe_images(bunch.images, descriptor, params, progress=not args.quiet)
    files = np.asarray(bunch.filenames).astype(str)
    doms = np.asarray(bunch.domains).astype(str)
    values = np.unique(doms)
    if values.size == 1:
        return F, F, files, files
    if values.size != 2:
        raise CLIError(f"--images: the pattern's 'domain' takes {values.size} values; expected "
                       "the model's two sides (or one).")
    names = _domain_names(model)
    if set(values.tolist()) != set(names):
        print(f"crossmetric: note: the folder's domains {values[0]!r}, {values[1]!r} are not "
              f"the model's {names[0]!r}, {names[1]!r}; taken in that order", file=sys.stderr)
        names = (str(values[0]), str(values[1]))
    q = doms == names[1 if swap else 0]
    return F[q], F[~q], files[q], files[~q]


def _search_data(args, est, swap: bool):
    if args.images is not None:
        return _search_images(args, est, swap)
    images = int(getattr(est, "_sample_ndim", 1)) > 1
    if args.database is None or args.queries is None:
        raise CLIError("search needs --queries FILE and --database FILE, or --images DIR "
                       "--pattern REGEX.")
    D = _load_array(args.database, "--database", allow_images=images, key=args.key)
    Q = _load_array(args.queries, "--queries", allow_images=images, key=args.key)
    return Q, D, None, None


def cmd_search(args) -> int:
    if args.k < 1:
        raise CLIError(f"-k must be >= 1, got {args.k}.")
    _check_image_options(args, ("--database", "--queries", "--key"))
    _check_output_file(args.out, "--out", (".csv", ".npz"))
    _check_outputs_not_inputs({"--out": args.out}, {
        "MODEL": args.model, "--database": args.database, "--queries": args.queries,
        "--images": args.images})
    est, method = _load_model(args.model, args.trust_pickle)
    swap = _probe_swap(args, est)
    Q, D, q_files, d_files = _search_data(args, est, swap)
    what = ("--queries", "--database") if args.images is None else ("queries", "database")
    est, Q, D = _apply_pipeline(est, Q, D, swap, *what)
    k = args.k
    if k > D.shape[0]:
        print(f"crossmetric: -k {k} is larger than the database ({D.shape[0]} rows); "
              f"returning all {D.shape[0]} rows per query", file=sys.stderr)
        k = D.shape[0]
    if swap:  # queries of the model's second side: exact search by its distance
        try:
            dist, ids = exhaustive_search(_SwappedSides(est), Q, D, k)
        except ValueError as exc:
            raise CLIError(_one_line(exc)) from None
    else:
        dist, ids = _nearest(args, est, method, Q, D, k)
    files = None if q_files is None else (q_files, d_files)
    if args.out:
        ext = os.path.splitext(args.out)[1].lower()
        if ext == ".npz":
            extra = {} if files is None else {"query_files": q_files, "files": d_files}
            with atomic_open(args.out, "wb") as fh:
                np.savez(fh, ids=ids, distances=dist, **extra)
        else:
            _write_search_csv(args.out, ids, dist, files)
        print(f"wrote the {ids.shape[1]} nearest database rows of {ids.shape[0]} queries to "
              f"{args.out}", file=sys.stderr)
    elif args.json:
        print(json.dumps({"method": method, "k": int(ids.shape[1]), "results": [
            {"query": q, "ids": [int(i) for i in ids[q] if i >= 0],
             "distances": [float(d) for d, i in zip(dist[q], ids[q], strict=True) if i >= 0],
             **({} if files is None else {"query_file": str(q_files[q]), "files": [
                 str(d_files[i]) for i in ids[q] if i >= 0]})}
            for q in range(ids.shape[0])]}, indent=1))
    else:
        _write_search_csv(None, ids, dist, files)
    return 0


def _write_search_csv(path: str | None, ids: np.ndarray, dist: np.ndarray,
                      files=None) -> None:
    """Rows ``query,rank,id,distance`` (``files``: with ``query_file,file``, the images' paths
    relative to --images)."""
    with (contextlib.nullcontext(sys.stdout) if path is None
          else atomic_open(path, "w", encoding="utf-8")) as fh:
        if files is None:
            fh.write("query,rank,id,distance\n")
            for q in range(ids.shape[0]):
                fh.writelines(f"{q},{r + 1},{int(ids[q, r])},{float(dist[q, r]):.6g}\n"
                              for r in range(ids.shape[1]) if ids[q, r] >= 0)
            return
        import csv

        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["query", "rank", "id", "distance", "query_file", "file"])
        for q in range(ids.shape[0]):
            w.writerows([q, r + 1, int(ids[q, r]), f"{float(dist[q, r]):.6g}", files[0][q],
                         files[1][int(ids[q, r])]]
                        for r in range(ids.shape[1]) if ids[q, r] >= 0)
