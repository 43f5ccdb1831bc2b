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


def cmd_search(args) -> int:
    if args.k < 1:
        raise CLIError(f"-k must be >= 1, got {args.k}.")
    _check_output_file(args.out, "--out", (".csv", ".npz"))
    _check_outputs_not_inputs({"--out": args.out}, {
        "MODEL": args.model, "--database": args.database, "--queries": args.queries})
    est, method = _load_model(args.model, args.trust_pickle)
    images = int(getattr(est, "_sample_ndim", 1)) > 1
    D = _load_array(args.database, "--database", allow_images=images, key=args.key)
    Q = _load_array(args.queries, "--queries", allow_images=images, key=args.key)
    k = args.k
    if k > D.shape[0]:
        print(f"crossmetric: -k {k} is larger than the database ({D.shape[0]} rows); "
              f"returning all {D.shape[0]} rows per query", file=sys.stderr)
        k = D.shape[0]
    dist, ids = _nearest(args, est, method, Q, D, k)
    if args.out:
        ext = os.path.splitext(args.out)[1].lower()
        if ext == ".npz":
            with atomic_open(args.out, "wb") as fh:
                np.savez(fh, ids=ids, distances=dist)
        else:
            _write_search_csv(args.out, ids, dist)
        print(f"wrote the {ids.shape[1]} nearest database rows of {ids.shape[0]} queries to "
              f"{args.out}", file=sys.stderr)
    elif args.json:
        print(json.dumps({"method": method, "k": int(ids.shape[1]), "results": [
            {"query": q, "ids": [int(i) for i in ids[q] if i >= 0],
             "distances": [float(d) for d, i in zip(dist[q], ids[q], strict=True) if i >= 0]}
            for q in range(ids.shape[0])]}, indent=1))
    else:
        _write_search_csv(None, ids, dist)
    return 0


def _write_search_csv(path: str | None, ids: np.ndarray, dist: np.ndarray) -> None:
    with (contextlib.nullcontext(sys.stdout) if path is None
          else atomic_open(path, "w", encoding="utf-8")) as fh:
        fh.write("query,rank,id,distance\n")
        for q in range(ids.shape[0]):
            fh.writelines(f"{q},{r + 1},{int(ids[q, r])},{float(dist[q, r]):.6g}\n"
                          for r in range(ids.shape[1]) if ids[q, r] >= 0)
