"""``crossmetric reproduce NAME``: a paper's experiment beside its published numbers."""

from __future__ import annotations

import json
import os
import sys

from crossmetric.cli._common import CLIError


def _check_name(args, names) -> None:
    if not args.name:
        raise CLIError("reproduce: give a reproduction NAME or --list")
    if args.name not in names:
        raise CLIError(f"reproduce: unknown reproduction {args.name!r}; expected one of "
                       f"{', '.join(names)}")
    if args.data_home is not None and not os.path.isdir(args.data_home):
        raise CLIError(f"--data-home: {args.data_home!r} is not a directory")
    if args.splits is not None and args.splits < 1:
        raise CLIError(f"--splits must be >= 1, got {args.splits}")


def _methods(args) -> list[str] | None:
    """``--methods`` (pku-sketch only)."""
    if args.methods is None:
        return None
    methods = [m.strip().lower() for m in args.methods.split(",") if m.strip()]
    if not methods:
        raise CLIError("--methods must name at least one method")
    if args.name != "pku-sketch":
        raise CLIError(f"--methods: the reproduction {args.name!r} runs a fixed set of "
                       "methods; only pku-sketch takes --methods")
    from crossmetric.reproduce import PKU_METHODS

    unknown = sorted(set(methods) - set(PKU_METHODS))
    if unknown:
        raise CLIError(f"--methods: unknown {', '.join(unknown)}; expected some of "
                       f"{', '.join(PKU_METHODS)}")
    return methods


def _pku_options(args) -> dict:
    """``--deepgsm-members`` and ``--show-ranks`` (pku-sketch only)."""
    extra = {}
    if args.deepgsm_members is not None:
        if args.name != "pku-sketch":
            raise CLIError("--deepgsm-members: only pku-sketch trains DeepGSM")
        extra["deepgsm_members"] = args.deepgsm_members
    if args.show_ranks is not None:
        if args.name != "pku-sketch":
            raise CLIError("--show-ranks: only pku-sketch draws rank lists (it keeps the "
                           "images of its test persons)")
        if args.show_ranks < 1:
            raise CLIError(f"--show-ranks must be >= 1, got {args.show_ranks}")
        extra["show_ranks"] = args.show_ranks
    return extra


def cmd_reproduce(args) -> int:
    """``crossmetric reproduce NAME``: run a named reproduction, print and write its table."""
    from crossmetric.reproduce import list_reproductions, run_reproduction

    if args.list:
        for name, desc in list_reproductions().items():
            print(f"{name:<24} {desc}")
        return 0
    _check_name(args, list_reproductions())
    methods = _methods(args)
    extra = _pku_options(args)
    out = args.out or os.path.join("crossmetric-reproduce", args.name)
    result = run_reproduction(args.name, args.data_home, n_splits=args.splits, out=out,
                              seed=args.seed, verbose=not args.quiet, n_jobs=args.n_jobs,
                              methods=methods, **extra)
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print(result.table())
    print(f"({result.seconds:.1f} s; wrote {', '.join(result.files)})",
          file=sys.stderr if args.json else sys.stdout)
    return 0
