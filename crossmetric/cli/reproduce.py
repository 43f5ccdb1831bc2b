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


def _names(names) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _method_choices() -> dict:
    """The reproductions that take ``--methods``, and their method names
    (``Reproduction.methods``)."""
    from crossmetric.reproduce import REPRODUCTIONS

    return {name: rep.methods for name, rep in REPRODUCTIONS.items() if rep.methods}


def _methods(args) -> list[str] | None:
    """``--methods`` (the reproductions of :func:`_method_choices`)."""
    if args.methods is None:
        return None
    methods = [m.strip().lower() for m in args.methods.split(",") if m.strip()]
    if not methods:
        raise CLIError("--methods must name at least one method")
    choices = _method_choices()
    if args.name not in choices:
        raise CLIError(f"--methods: the reproduction {args.name!r} runs a fixed set of "
                       f"methods; only {_names(choices)} take --methods")
    unknown = sorted(set(methods) - set(choices[args.name]))
    if unknown:
        raise CLIError(f"--methods: unknown {', '.join(unknown)}; expected some of "
                       f"{', '.join(choices[args.name])}")
    return methods


def _option_owners() -> dict:
    """Options only some reproductions take (``Reproduction.options``): option ->
    ``{reproduction: its keyword}``."""
    from crossmetric.reproduce import REPRODUCTIONS

    owners: dict = {}
    for name, rep in REPRODUCTIONS.items():
        for opt, keyword in rep.options.items():
            owners.setdefault(opt, {})[name] = keyword
    return owners


#: options whose flag is not ``--`` + their name
_FLAGS = {"guarded": "--no-guarded"}


def _options(args) -> dict:
    """The reproduction-specific options given, checked against the reproductions'
    declarations."""
    extra = {}
    for opt, owners in _option_owners().items():
        value = getattr(args, opt, None)
        if value is None:
            continue
        flag = _FLAGS.get(opt, "--" + opt.replace("_", "-"))
        if args.name not in owners:
            verb = "takes" if len(owners) == 1 else "take"
            raise CLIError(f"{flag}: only {_names(owners)} {verb} it")
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise CLIError(f"{flag} must be >= 1, got {value}")
        extra[owners[args.name]] = value
    if "descriptor" in extra:
        from crossmetric.reproduce.pku import PKU_DESCRIPTORS

        if extra["descriptor"] not in PKU_DESCRIPTORS:
            raise CLIError(f"--descriptor: unknown {extra['descriptor']!r}; expected one of "
                           f"{', '.join(PKU_DESCRIPTORS)}")
    return extra


def cmd_reproduce(args) -> int:
    """``crossmetric reproduce NAME``: run a named reproduction, print and write its table."""
    from crossmetric.reproduce import list_reproductions, run_reproduction

    if args.list:
        choices = _method_choices()
        for name, desc in list_reproductions().items():
            print(f"{name:<24} {desc}")
            if name in choices:
                print(f"{'':<24} --methods: some of {','.join(choices[name])}")
        return 0
    _check_name(args, list_reproductions())
    methods = _methods(args)
    extra = _options(args)
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
