"""``main``: parse, run one command, turn every failure into a one-line message and an exit
code (0 ok, 2 bad input, 1 failure, 130 / 143 interrupted / terminated)."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings

from crossmetric.cli._common import CLIError, _one_line, _stdout_to_devnull
from crossmetric.cli.parser import build_parser

#: seconds a command has to unwind after Ctrl-C / SIGTERM before the process ends anyway
GRACE_SECONDS = 3.0


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every ``with`` block unwinds (temporary files are
    removed, a Dask cluster is closed) before the process ends."""


@contextlib.contextmanager
def _sigterm_unwinds():
    """SIGTERM raises :class:`_Terminated`; Ctrl-C and SIGTERM end the process within
    :data:`GRACE_SECONDS` even inside one long computation in C (an eigendecomposition, a BLAS
    call), where Python runs no handler until it returns: a watcher thread sees the signal
    through :func:`signal.set_wakeup_fd` and, when the command has not unwound by then, ends
    the process. Files are only ever replaced by a rename, so nothing half-written is left."""
    import signal
    import socket
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise _Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    old_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    done = threading.Event()

    def watch():
        while not done.is_set():
            try:
                data = reader.recv(1)
            except OSError:
                return
            if not data or data[0] not in (signal.SIGINT, signal.SIGTERM):
                continue
            if done.wait(GRACE_SECONDS):
                return
            term = data[0] == signal.SIGTERM
            os.write(2, f"crossmetric: {'terminated' if term else 'interrupted'} (inside a "
                        "long computation)\n".encode())
            os._exit(143 if term else 130)

    watcher = threading.Thread(target=watch, name="crossmetric-signal-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        signal.set_wakeup_fd(old_fd)
        signal.signal(signal.SIGTERM, previous)
        with contextlib.suppress(OSError):
            writer.send(b"\0")  # wakes the watcher, which sees the command done
        watcher.join(timeout=1.0)
        writer.close()
        reader.close()


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
