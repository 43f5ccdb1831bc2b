"""``main``: parse, run one command, turn every failure into a one-line message and an exit
code (0 ok, 2 bad input, 1 failure, 130 / 143 interrupted / terminated)."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings

from crossmetric.cli._common import CLIError, _one_line, _stdout_to_devnull
from crossmetric.cli.parser import build_parser


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every ``with`` block unwinds (temporary files are
    removed, a Dask cluster is closed) before the process ends."""


@contextlib.contextmanager
def _sigterm_unwinds():
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise _Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` of the command line: one line on stderr, ``crossmetric:
    warning: CATEGORY: message``, without the source line Python shows after it."""
    print(f"crossmetric: warning: {category.__name__}: {_one_line(message)}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 2 bad input, 1 failure)."""
    with warnings.catch_warnings():  # restores the caller's warning display afterwards
        warnings.showwarning = _warning_line
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    debug = bool(os.environ.get("CROSSMETRIC_DEBUG"))
    try:
        args = parser.parse_args(argv)
        if getattr(args, "func", None) is None:
            parser.print_help(sys.stderr)
            return 2
        from crossmetric.cli._parallel import parent_watched_workers

        # loky workers end with this process, even when it is killed (SIGKILL)
        with _sigterm_unwinds(), parent_watched_workers():
            return int(args.func(args))
    except SystemExit as exc:  # --help / --version
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    except BrokenPipeError:
        # the reader went away (``crossmetric search ... | head``): end quietly
        _stdout_to_devnull()
        return 0
    except CLIError as exc:
        if debug:
            raise
        print(f"crossmetric: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        if debug:
            raise
        print(f"crossmetric: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (_Terminated): nothing half-written
        term = isinstance(exc, _Terminated)
        print(f"crossmetric: {'terminated' if term else 'interrupted'}", file=sys.stderr)
        return 143 if term else 130
    except Exception as exc:  # a bug, not bad input: still one line unless debugging
        if debug:
            raise
        print(f"crossmetric: internal error: {type(exc).__name__}: {_one_line(exc)} "
              "(set CROSSMETRIC_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1
