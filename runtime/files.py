"""Writing a file all at once, or not at all; reading a JSON file back (None if it cannot be).

Every file the package writes over an older one goes through :func:`write_text_atomic`:
the transcript, the metadata, a review template, the book's caches and pages, the
checksum index of the model cache. A reader of the file (a kernel, Quarto, a test) then
never sees it half-written, and a failure leaves the old file as it was with nothing
beside it.
"""
from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path


def write_text_atomic(path: str | os.PathLike, text: str, *, overwrite: bool = True) -> Path:
    """Write ``text`` to ``path`` all at once, or not at all; return the path.

    It goes to a temporary file of a unique name in the same folder, as UTF-8 with line
    ends exactly as given, which is flushed to disk and renamed over ``path``. On any
    error the temporary file is removed and the error raised, so ``path`` keeps its old
    contents and nothing is left beside it. With ``overwrite=False``, a ``path`` that
    exists by the time the text is written is left alone (:class:`FileExistsError`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        if not overwrite and path.exists():
            raise FileExistsError(f"{path} appeared while it was being written; it was left alone")
        os.chmod(temporary, 0o666 & ~_umask())  # as open() would make it, not mkstemp's 0600
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    """This process's umask (read by setting it, then setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def publishable(folder: str | os.PathLike) -> Path:
    """Give a folder to publish the permissions a web server needs: 0755 for it and every
    folder in it, 0644 for every file, so that a server running as another user can read
    every page (temporary folders and files are made 0700 and 0600)."""
    folder = Path(folder)
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


def write_json_atomic(path: str | os.PathLike, value, **dump_options) -> Path:
    """Write ``value`` as JSON to ``path`` with :func:`write_text_atomic`.

    ``dump_options`` go to :func:`json.dumps` (default: ``indent=1, sort_keys=True``).
    """
    options = {"indent": 1, "sort_keys": True, **dump_options}
    return write_text_atomic(path, json.dumps(value, **options))


def write_csv_atomic(path: str | os.PathLike, header, rows, *, overwrite: bool = True) -> Path:
    """Write ``header`` and ``rows`` as CSV (LF line ends) with :func:`write_text_atomic`."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([header, *rows])
    return write_text_atomic(path, buffer.getvalue(), overwrite=overwrite)


def read_json(path: str | os.PathLike):
    """The JSON in ``path``, or None when it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
