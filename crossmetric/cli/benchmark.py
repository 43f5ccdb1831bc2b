"""``crossmetric benchmark``: methods under the papers' protocols; table and result files."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

import numpy as np

from crossmetric.cli._common import (
    CLIError,
    _check_int,
    _check_output_dir,
    _load_array,
    _one_line,
    _parse_size,
)
from crossmetric.cli._data import _load_named_dataset, _own_dataset
from crossmetric.cli._resume import check_resume, open_records, run_settings, stopped_note
from crossmetric.protocols.result_files import RESULT_FILES, write_result_files


def _method_list(text: str | None) -> list[str]:
    """``--methods``: :func:`crossmetric.registry.select_methods` with the option's messages."""
    from crossmetric.registry import select_methods

    if text is not None and text.strip().lower() != "all" and not text.replace(",", "").strip():
        raise CLIError("--methods is empty.")
    try:
        return select_methods(text)
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None


def _check_param_methods(params, names: list[str]) -> None:
    """Every ``--param METHOD.NAME=VALUE`` names a method of ``--methods`` (one for another
    method would be silently unused)."""
    from crossmetric.config import parse_param

    for item in params or ():
        method = parse_param(item)[0]
        if method not in names:
            raise CLIError(f"--param {item!r}: method {method!r} is not in --methods "
                           f"({','.join(names)}); add it there or leave this --param out.")


def _method_kind(name: str) -> tuple[str, str | None]:
    """:func:`crossmetric.registry.method_kind` (the former private name)."""
    from crossmetric.registry import method_kind

    return method_kind(name)


def _print_method_list() -> None:
    from crossmetric.registry import METHODS

    print("method     name        kind                      settings")
    for name, spec in METHODS.items():
        kind, reason = _method_kind(name)
        print(f"{name:10s} {spec.display:11s} {kind:25s} "
              f"{'' if reason is None else 'NOT AVAILABLE: ' + reason}")
        print(f"{'':10s} {spec.params}  -- {spec.note}")
        if spec.grid:
            print(f"{'':10s} --tune grid: {spec.grid}")
        if spec.paper_grid:
            print(f"{'':10s} --tune paper: {' then '.join(map(str, spec.paper_grid))}")
    print("\nsingle-modal learners on two views of different widths run on CCA-aligned views "
          "(shown as NAME-C)")


def _cap_components(estimators: dict, X: np.ndarray, Y: np.ndarray | None) -> None:
    """The registry's ``n_components`` capped at the narrowest view of the user's data
    (:func:`crossmetric.protocols.views.cap_n_components_to_views`), each change noted on stderr."""
    from crossmetric.protocols.views import cap_n_components_to_views

    for note in cap_n_components_to_views(estimators, X, Y):
        print(note, file=sys.stderr)


def _check_data_source(args) -> None:
    """One data source, and only the options that go with it."""
    sources = [n for n, v in (("--dataset", args.dataset), ("--x", args.x),
                              ("--images", args.images), ("--lfw-pairs", args.lfw_pairs))
               if v is not None]
    if args.lfw_pairs is not None:
        if args.x is None or args.image_list is None:
            raise CLIError("--lfw-pairs needs --x FEATURES and --image-list NAMES (the image "
                           "name of each feature row, e.g. Aaron_Peirsol_0001.jpg).")
        if args.y is not None or args.labels is not None:
            raise CLIError("--lfw-pairs takes its pairs and labels from pairs.txt; leave out "
                           "--y and --labels.")
        if args.protocol == "identification":
            raise CLIError("--lfw-pairs is a verification protocol; --protocol "
                           "identification does not apply.")
        sources.remove("--x")  # --lfw-pairs reads its features from --x
    if len(sources) > 1:
        raise CLIError(f"give one data source, not {' and '.join(sources)}.")
    if args.x is None:
        for opt in ("y", "labels", "instance", "key", "image_list"):
            if getattr(args, opt) is not None:
                raise CLIError(f"--{opt.replace('_', '-')} needs --x.")


def _validate_benchmark(args) -> None:
    """Every option checked before any data is read or any folder created."""
    _check_int(args, "--folds", 2)
    _check_int(args, "--repeats", 1)
    _check_int(args, "--n-negatives", 1)
    _check_int(args, "--max-train-positives", 1)
    _check_int(args, "--tune-folds", 2)
    _check_int(args, "--plot-top", 1)
    if args.tune and args.lfw_pairs is not None:
        raise CLIError("--tune is not available with --lfw-pairs (fixed pairs carry no "
                       "identities to group inner folds by).")
    _check_int(args, "--seed", 0, 2**32 - 1)
    _check_int(args, "--n-jobs", -(os.cpu_count() or 1) - 1, nonzero=True)
    _check_data_source(args)
    if args.images is None and args.pattern is not None:
        raise CLIError("--pattern needs --images DIR.")
    from crossmetric.datasets.reid_layouts import _LAYOUT_NAMES

    image_sets = ("viper", "pku-sketch", "pku_sketch", *_LAYOUT_NAMES)
    if args.descriptor is not None and args.images is None and (
            args.dataset or "").lower().split(":")[0] not in image_sets:
        raise CLIError("--descriptor applies to image data (--images, --dataset viper, "
                       "pku-sketch or a re-id layout such as market1501).")
    _parse_size(args.size)
    _validate_split_options(args)
    if args.level == "instance" and args.x is not None and args.instance is None:
        raise CLIError("--level instance needs --instance FILE.")
    _method_list(args.methods)
    _check_output_dir(args.out)


def _validate_split_options(args) -> None:
    """--test-size, --probe-domain, --split-file / --train-index and --protocol retrieval."""
    size = getattr(args, "test_size", None)
    if isinstance(size, float) and not 0.0 < size < 1.0:
        raise CLIError(f"--test-size as a share must lie in (0, 1), got {size}.")
    if isinstance(size, int) and size < 2:
        raise CLIError(f"--test-size as a count must be >= 2, got {size}.")
    split_file, train_index = getattr(args, "split_file", None), getattr(args, "train_index",
                                                                         None)
    if split_file is not None and train_index is not None:
        raise CLIError("give one fixed split: --split-file or --train-index, not both.")
    for opt, path in (("--split-file", split_file), ("--train-index", train_index)):
        if path is not None and not os.path.isfile(path):
            raise CLIError(f"{opt}: {path!r} is not a file.")
    if args.lfw_pairs is not None:
        used = [o for o, v in (("--split-file", split_file), ("--train-index", train_index),
                               ("--probe-domain", getattr(args, "probe_domain", None)),
                               ("--protocol retrieval", args.protocol == "retrieval")) if v]
        if used:
            raise CLIError(f"{', '.join(used)} do(es) not apply to --lfw-pairs (pairs.txt "
                           "fixes the pairs and folds).")


def _split_options(args, dataset, level: str) -> dict:
    """``run_protocols`` keywords of the split options (checked against the loaded data):
    ``test_size``, ``probe`` (``--probe-domain``) and ``train_rows`` (the fixed split)."""
    from crossmetric.protocols.split_files import read_split_file, read_train_index

    kw: dict = {}
    if getattr(args, "test_size", None) is not None:
        kw["test_size"] = args.test_size
    if getattr(args, "probe_domain", None) is not None:
        kw["probe"] = _probe_side(args.probe_domain, dataset)
    n_rows = int(np.asarray(dataset["X"]).shape[0])
    labels = dataset["instance"] if level == "instance" else dataset["labels"]
    try:
        if getattr(args, "split_file", None) is not None:
            kw["train_rows"] = read_split_file(args.split_file, n_rows, labels)
        elif getattr(args, "train_index", None) is not None:
            kw["train_rows"] = read_train_index(args.train_index, n_rows)
    except ValueError as exc:
        opt = "--split-file" if getattr(args, "split_file", None) else "--train-index"
        raise CLIError(f"{opt}: {_one_line(exc)}") from None
    return kw


def _probe_side(name: str, dataset) -> str:
    """``--probe-domain NAME`` as the side of the probes: ``"x"`` or ``"y"``."""
    if dataset.get("Y") is None:
        raise CLIError("--probe-domain needs two modalities; the data has one.")
    names = [str(n) for n in (dataset.get("domain_names") or dataset.get("view_names")
                              or ())][:2]
    sides = {"x": "x", "y": "y", **dict(zip(names, "xy", strict=False))}
    if name not in sides:
        raise CLIError(f"--probe-domain: expected one of {', '.join(sides)}, got {name!r}.")
    return sides[name]


def _resolve_benchmark_config(args):
    """Defaults < --config file < options given < --param; the merged options are written
    back into ``args`` (crossmetric.config does the work)."""
    from crossmetric.config import BENCHMARK_OPTIONS, resolve_config

    given = {k: getattr(args, k) for k in BENCHMARK_OPTIONS}
    try:
        cfg = resolve_config(given, args.config, args.param or ())
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None
    for key, value in cfg.options.items():
        setattr(args, key, value)
    return cfg


def _lfw_data(args):
    """``--lfw-pairs``: the features, pairs.txt and the pairs as rows of ``--x``."""
    from crossmetric.datasets import lfw_pair_indices, load_image_list, read_lfw_pairs

    X = _load_array(args.x, "--x", key=args.key)
    try:
        lfw = read_lfw_pairs(args.lfw_pairs)
    except ValueError as exc:
        raise CLIError(f"--lfw-pairs: {exc}") from None
    try:
        keys = load_image_list(args.image_list)
    except ValueError as exc:
        raise CLIError(f"--image-list: {exc}") from None
    if len(keys) != X.shape[0]:
        raise CLIError(f"--image-list: {len(keys)} names, but --x has {X.shape[0]} rows "
                       "(one name per feature row).")
    try:
        lfw_pairs = lfw_pair_indices(lfw, keys)
    except ValueError as exc:
        raise CLIError(f"--image-list: {exc}") from None
    description = f"LFW restricted pairs ({os.path.basename(args.lfw_pairs)})"
    return {"X": X, "Y": None}, description, lfw, lfw_pairs


def _benchmark_data(args):
    """``(dataset, description, lfw, lfw_pairs)`` of the one data source given."""
    if args.lfw_pairs is not None:
        return _lfw_data(args)
    if args.x is not None or args.images is not None:
        dataset, description = _own_dataset(args)
    else:
        dataset, description = _load_named_dataset(args.dataset or "digits", args)
    return dataset, description, None, None


def _benchmark_estimators(names, cfg, args):
    """``(estimators, pca, grids)`` keyed by display name; unavailable methods are skipped."""
    from crossmetric.registry import METHODS, method_status

    estimators, pca, grids = {}, {}, {}
    for name in names:
        status = method_status(name)
        if status is not None:
            print(f"crossmetric: skipping {name}: not available ({status})", file=sys.stderr)
            continue
        spec = METHODS[name]
        estimators[spec.display] = cfg.make_estimator(name)
        # views wider than the training identities are reduced first (the registry's width,
        # or the identities minus one: crossmetric.protocols.views.bounded_dimension)
        pca[spec.display] = spec.pca_components if spec.pca_components is not None else "auto"
        which = "small" if args.tune is True else args.tune   # true in a config file
        grid = spec.search_grid(which) if which else None
        if grid:
            grids[spec.display] = grid
    if not estimators:
        raise CLIError("none of the requested methods is available.")
    return estimators, pca, grids


def _start_at_descriptor(estimators, dataset) -> None:
    """Image learners with a ``descriptor`` parameter left at None (DeepGSM) get the run's
    descriptor: they start at its untrained distance, the start every feature learner of the
    run is guarded against, instead of at a random network."""
    from sklearn.base import clone

    descriptor = dataset.get("descriptor")
    if descriptor is None or dataset.get("images_x") is None:
        return
    for est in estimators.values():
        if est.get_params(deep=False).get("descriptor", False) is None:
            est.set_params(descriptor=clone(descriptor))


def _announce(args, n_methods: int, description: str, X, Y, level: str, lfw,
              split_kw=None) -> None:
    """The start lines on stderr: the data, the protocols that will run (only those) and the
    resolved output folder, printed before anything is written (``--out`` may come from a
    ``--config`` file)."""
    dims = f"{X.shape[1]}" + ("" if Y is None else f" and {Y.shape[1]}")
    if lfw is not None:
        folds_text = (f"pairs.txt's {lfw.n_folds} folds" if lfw.n_folds > 1 else
                      f"{args.folds} random folds")
        print(f"crossmetric benchmark: {n_methods} method(s) on {description}, "
              f"{lfw.y.size} pairs over {X.shape[0]} images of {dims} features; {folds_text}",
              file=sys.stderr)
    else:
        runs = []
        if args.protocol in ("both", "verification"):
            runs.append(f"{args.folds}-fold verification")
        if args.protocol in ("both", "identification"):
            runs.append(f"{args.repeats} identification repeats")
        if args.protocol == "retrieval":
            runs.append(f"{args.repeats} retrieval repeats")
        if split_kw and "train_rows" in split_kw:
            n_train = int(np.sum(split_kw["train_rows"]))
            runs = [f"{args.protocol} on the fixed split of "
                    f"{args.split_file or args.train_index} ({n_train} training, "
                    f"{X.shape[0] - n_train} test rows)"]
        if split_kw and split_kw.get("probe") == "y":
            runs.append(f"probes: {args.probe_domain} (y), gallery: x")
        print(f"crossmetric benchmark: {n_methods} method(s) on {description}, "
              f"{X.shape[0]} objects, {'views of ' if Y is not None else ''}{dims} features; "
              f"identity = {level}; {', '.join(runs)}", file=sys.stderr)
    print(f"crossmetric benchmark: results go to {os.path.abspath(args.out)}", file=sys.stderr)


def _dask_context(args) -> contextlib.ExitStack:
    """The Dask backend of --dask-scheduler / --dask-workers (an empty stack without them)."""
    dask = contextlib.ExitStack()
    if args.dask_scheduler is not None or args.dask_workers is not None:
        from crossmetric.cluster import dask_backend

        try:
            dask.enter_context(dask_backend(args.dask_scheduler, n_workers=(
                2 if args.dask_workers is None else args.dask_workers)))
        except (ValueError, OSError) as exc:
            raise CLIError(f"--dask-scheduler/--dask-workers: {_one_line(exc)}") from None
    return dask


def _run(args, estimators, dataset, protocols, level, pca, grids, lfw, lfw_pairs,
         split_kw=None, records=None):
    """The library's protocol runner on the chosen data (fixed LFW folds or the papers');
    ``split_kw``: the split options of :func:`_split_options`; ``records``: each finished
    (method, split) written as it arrives, those of a stopped run skipped
    (:mod:`crossmetric.cli._resume`)."""
    from crossmetric.protocols import run_pair_folds, run_protocols

    kept = {} if records is None else {"on_output": records.add,
                                       "completed": records.completed}
    dask = _dask_context(args)
    try:
        if lfw is not None:
            return run_pair_folds(
                estimators, dataset["X"], pairs=lfw_pairs, y=lfw.y,
                folds=lfw.fold if lfw.n_folds > 1 else None, n_folds=args.folds,
                pca_components=pca, n_jobs=args.n_jobs, random_state=args.seed,
                progress=not args.quiet, on_error="record", **kept)
        return run_protocols(
            estimators, dataset, protocols=protocols, n_folds=args.folds,
            n_repeats=args.repeats, n_negatives=args.n_negatives,
            max_train_positives=args.max_train_positives, level=level,
            pca_components=pca, pca_joint="auto",
            n_jobs=args.n_jobs, random_state=args.seed, progress=not args.quiet,
            on_error="record", param_grids=grids or None, tune_folds=args.tune_folds,
            tune_scoring=args.tune_scoring, **(split_kw or {}), **kept)
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None
    finally:
        dask.close()


def _print_problems(result, args, protocols) -> None:
    """Skipped and failed methods, and the warnings counted over the fits, on stderr."""
    for meth, reason in result.skipped.items():
        print(f"crossmetric: skipped {meth}: {reason}", file=sys.stderr)
    for meth, msg in result.errors.items():
        print(f"crossmetric: {meth} failed: {_one_line(msg)}", file=sys.stderr)
    n_fits = result.info.get("n_folds", args.folds) * ("verification" in protocols) + \
        args.repeats * ("identification" in protocols) + args.repeats * ("retrieval" in protocols)
    if result.info.get("fixed_split"):
        n_fits = len(protocols)
    for meth, counts in result.warnings.items():
        what = ", ".join(f"{cat} in {k}/{n_fits} fits" for cat, k in counts.items())
        print(f"crossmetric: note: {meth}: {what}", file=sys.stderr)


def _print_results(result, args, description: str, elapsed: float, lfw) -> None:
    """The table (or JSON) on stdout and its notes (stderr when stdout carries the JSON).

    The footer names only the protocols that ran. stdout is written once and flushed
    (:func:`~crossmetric.cli._common._write_stdout`): when its reader has gone (``| head -n
    0``) the command goes on quietly and still writes its result files."""
    from crossmetric.cli._common import _write_stdout

    out: list[str] = []
    notes = out if not args.json else []
    out.append(json.dumps(result.to_dict()) if args.json else result.table())
    ran = result.info.get("protocols") or (
        ["verification", "identification"] if args.protocol == "both" else [args.protocol])
    if lfw is not None:
        notes.append(f"\n{description}; mean ± std over {result.info['n_folds']} folds; "
                     f"{elapsed:.1f} s")
    else:
        over = [text for name, text in (
            ("verification", f"{args.folds} folds (verification)"),
            ("identification", f"{args.repeats} repeats (identification)"),
            ("retrieval", f"{args.repeats} repeats (retrieval)")) if name in ran]
        if result.info.get("fixed_split"):
            over = [f"one fixed split ({args.split_file or args.train_index})"]
        notes.append(f"\n{description}; mean ± std over {' and '.join(over)}; "
                     f"{elapsed:.1f} s")
        if "retrieval" in ran:
            notes.append(f"  retrieval: every test item of one side queries all test items of "
                         f"the other, relevant = same label; mAP@k with k = "
                         f"{result.info.get('retrieval_k')}; precision-recall curves in "
                         f"results.json")
    pca = result.info.get("pca", {})
    extra = [f"{m}: each view reduced by PCA to {k} dims" for m, k in pca.items() if k != "auto"]
    auto = [m for m, k in pca.items() if k == "auto"]
    training = result.info.get("training", {})
    widths = sorted({tuple(r["view_dims"]) for m in auto for r in training.get(m, ())
                     if "view_dims" in r})
    if auto and widths:
        extra.append(f"{', '.join(auto)}: views reduced by PCA (fitted on each split's training "
                     f"side, one PCA for views of one width) to the training identities - 1 = "
                     f"{' / '.join(str(w[0]) for w in widths)} dims")
    inside = result.info.get("reduced_inside", [])
    if inside and max(result.info.get("dims", [0])) > result.info.get("n_samples", 0):
        started = [m for m in inside if any("init" in r for r in training.get(m, ()))]
        closed = [m for m in inside if m not in started]
        if started:
            extra.append(f"{', '.join(started)}: views wider than the training samples "
                         f"learned on a basis of each split's training samples (their span or "
                         f"principal axes), the untrained distance of the rest kept when "
                         f"started from it (init identity)")
        if closed:
            extra.append(f"{', '.join(closed)}: solved on the span of each split's training "
                         f"samples (exact), no reduction before them")
    if any(m.endswith("-C") for m in result.methods):
        extra.append("-C: single-modal learner on CCA-processed views (CCA fitted on the "
                     "training pairs, 32 dims), as the CML-AUC paper's -C rows")
    notes.extend(f"  {note}" for note in extra)
    if result.info.get("tuned"):
        from crossmetric.protocols.model_selection import describe_choices

        notes.append(f"\nhyper-parameters chosen by {args.tune_folds}-fold inner "
                     f"cross-validation on each split's training objects (folds grouped by "
                     f"{result.info['tuning']['group']}); most frequent value (splits):")
        notes.extend(f"  {meth}: {describe_choices([r['params'] for r in runs])}"
                     for meth, runs in result.info["tuned"].items())
    if args.json:
        print("\n".join(notes), file=sys.stderr)
    _write_stdout("\n".join(out) + "\n")


def _write_outputs(result, description: str, args, cfg, names, estimators) -> None:
    """Result files and config.toml, staged, then moved into --out under a lock: a killed run
    leaves the old files."""
    from crossmetric.persistence import atomic_folder
    from crossmetric.registry import METHODS

    out = args.out
    try:
        with atomic_folder(out, owned=_BENCHMARK_FILES) as stage:
            written = _write_benchmark_files(
                result, description, stage, top_k=getattr(args, "plot_top", None))
            cfg.options["methods"] = names
            cfg.write(os.path.join(stage, "config.toml"),
                      methods=[n for n in names if METHODS[n].display in estimators])
    except OSError as exc:
        raise CLIError(f"--out: {_one_line(exc)}") from None
    print(f"wrote {', '.join([*written, 'config.toml'])} to {out}", file=sys.stderr)


def cmd_benchmark(args) -> int:
    if args.list:
        _print_method_list()
        return 0
    cfg = _resolve_benchmark_config(args)
    _validate_benchmark(args)
    check_resume(args)
    names = _method_list(args.methods)
    _check_param_methods(args.param, names)
    dataset, description, lfw, lfw_pairs = _benchmark_data(args)
    estimators, pca, grids = _benchmark_estimators(names, cfg, args)
    _cap_components(estimators, dataset["X"], dataset.get("Y"))
    _start_at_descriptor(estimators, dataset)
    protocols = ("verification", "identification") if args.protocol == "both" else (
        args.protocol,)
    if lfw is not None:
        protocols = ("verification",)
    level = args.level or ("instance" if dataset.get("instance") is not None
                           and args.instance is not None else "labels")
    split_kw = _split_options(args, dataset, level) if lfw is None else None
    _announce(args, len(estimators), description, dataset["X"], dataset.get("Y"), level, lfw,
              split_kw)
    records = open_records(args, run_settings(cfg, estimators, dataset, protocols, level,
                                              lfw_pairs, lfw, split_kw))
    t0 = time.perf_counter()
    try:
        result = _run(args, estimators, dataset, protocols, level, pca, grids, lfw, lfw_pairs,
                      split_kw, records)
    except BaseException:
        stopped_note(records)   # the finished records are kept for --resume
        raise
    elapsed = time.perf_counter() - t0
    result.info.update(dataset=description, seconds=round(elapsed, 1), seed=args.seed)
    _print_problems(result, args, protocols)
    if not result.summary:
        records.finish()
        print("crossmetric: error: no method produced results (see above); nothing written",
              file=sys.stderr)
        return 1
    try:
        _print_results(result, args, description, elapsed, lfw)
        _write_outputs(result, description, args, cfg, names, estimators)
    except BaseException:
        stopped_note(records)
        raise
    records.finish()
    return 0


#: every file a benchmark run writes into --out (one it does not write this time is removed)
_BENCHMARK_FILES = (*RESULT_FILES, "config.toml")


def _write_benchmark_files(result, description: str, out: str, rocs=None, cmcs=None, *,
                           top_k: int | None = None):
    """The result files (:func:`crossmetric.protocols.result_files.write_result_files`; ``rocs`` and
    ``cmcs``, the curves of ``result``, are accepted for the former signature and not used;
    ``top_k``: ``--plot-top``); returns the names written."""
    return write_result_files(result, out, description=description, top_k=top_k)
