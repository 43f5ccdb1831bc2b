"""Atomic file writes: a temporary file in the target's folder, then ``os.replace``."""

from __future__ import annotations

import contextlib
import os
import tempfile

__all__ = ["atomic_path", "write_text_atomic"]


@contextlib.contextmanager
def atomic_path(path, suffix: str = ""):
    """Yield a temporary path beside ``path``; on success it replaces ``path`` at once.

    On an exception the temporary file is removed and ``path`` is left as it was.
    ``suffix`` keeps an extension that a writer insists on (``np.savez`` appends ``.npz``).
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=suffix or ".tmp",
                               dir=folder)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def write_text_atomic(path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
