"""``crossmetric benchmark``'s records of finished (method, split) units and ``--resume``
(:mod:`crossmetric.cli._run_records` does the writing and reading)."""

from __future__ import annotations

import json
import sys

from crossmetric.cli._common import CLIError, _one_line

#: options that change nothing in the results (where they go, how they are shown, how many
#: processes compute them) or that name the data, whose digest is compared instead
_FREE = {"out", "quiet", "json", "n_jobs", "dask_scheduler", "dask_workers", "plot_top",
         "methods", "dataset", "data_home", "x", "y", "labels", "instance", "key", "images",
         "lfw_pairs", "image_list"}


def run_settings(cfg, estimators, dataset, protocols, level, lfw_pairs=None, lfw=None,
                 split_kw=None) -> dict:
    """What must be equal for ``--resume`` to continue a stopped run: a digest of the data,
    every method's parameters, then the options that shape the results (the seed, the
    protocol, folds, repeats, tuning, the split options and a fixed split's rows, ...), as
    JSON values."""
    import crossmetric
    from crossmetric.cli._run_records import data_digest, method_settings

    out = {"data X": data_digest(dataset["X"]), "data Y": data_digest(dataset.get("Y"))}
    for key in ("labels", "instance", "cams", "cams_y", "reid_split"):
        if dataset.get(key) is not None:
            out[f"data {key}"] = data_digest(dataset[key])
    if lfw_pairs is not None:
        out["data pairs"] = data_digest(lfw_pairs, lfw.y, lfw.fold)
    out.update({f"method {name}": method_settings(est) for name, est in estimators.items()})
    for key, value in sorted((split_kw or {}).items()):
        out[f"split {key}"] = data_digest(value) if key == "train_rows" else value
    out["protocols run"] = list(protocols)
    out["identity level"] = level
    out.update({f"--{k.replace('_', '-')}": v for k, v in sorted(cfg.options.items())
                if k not in _FREE})
    out["crossmetric version"] = crossmetric.__version__
    return json.loads(json.dumps(out, default=repr))


def check_resume(args) -> None:
    """``--resume``: a stopped run into ``--out`` exists (checked before any data is read)."""
    from crossmetric.cli._run_records import ResumeError, RunRecords

    if getattr(args, "resume", False):
        try:
            RunRecords.stopped_run(args.out)
        except ResumeError as exc:
            raise CLIError(str(exc)) from None


def open_records(args, settings: dict):
    """The run's :class:`~crossmetric.cli._run_records.RunRecords` (``--resume``: the stopped
    run's, checked), with a note of what is resumed; a refusal is one line."""
    from crossmetric.cli._run_records import ResumeError, RunRecords

    try:
        records = RunRecords.open(args.out, settings, resume=bool(getattr(args, "resume",
                                                                            False)))
    except ResumeError as exc:
        raise CLIError(str(exc)) from None
    except OSError as exc:
        raise CLIError(f"--out: {_one_line(exc)}") from None
    if records.discarded:
        print(f"crossmetric: note: the {records.discarded} records of a stopped run into "
              f"{args.out} are discarded; this run starts over (--resume would have "
              "continued it)", file=sys.stderr)
    if records.completed:
        print(f"crossmetric benchmark: resuming: {len(records.completed)} finished "
              f"(method, split) records kept, the rest run now", file=sys.stderr)
    return records


def stopped_note(records) -> None:
    """After a stop: the records kept and how to continue, on stderr (an empty staging area
    is removed)."""
    n = records.stopped()
    if n:
        print(f"crossmetric: {n} finished (method, split) records kept in {records.path}; "
              "the same command with --resume continues the run", file=sys.stderr)
