"""Finding Quarto, installing it once from PyPI, and running it with the project's Python.

Quarto is looked for in this order: the command named by ``$QUARTO``; ``quarto`` on
``PATH``; the ``quarto`` that the ``quarto-cli`` package puts beside this Python (in
``.venv/bin``). `make book` asks :func:`install_quarto_cli` to try once to install
``quarto-cli`` into the virtual environment; when that fails (offline, the package
downloads Quarto while it builds) a stamp file records the failure, later builds do not
try again, and the book is built with nbclient + nbconvert instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from bookkit.cache import input_files, listing, now_text
from runtime.llama_server import free_port, stop_process

#: The Quarto release the book is checked with; its PyPI package.
QUARTO_VERSION = "1.10.18"
QUARTO_CLI = f"quarto-cli=={QUARTO_VERSION}"


class FoundQuarto(NamedTuple):
    path: str
    how: str  # "$QUARTO", "PATH" or "quarto-cli in this environment"


class QuartoNotFound(RuntimeError):
    exit_code = 2  # a usage error (bookkit.build.EXIT_USAGE)


def venv_quarto(python: str | os.PathLike | None = None) -> Path:
    """Where `pip install quarto-cli` puts the `quarto` command for ``python`` (this one)."""
    return Path(python or sys.executable).parent / ("quarto.exe" if os.name == "nt" else "quarto")


def find_quarto() -> FoundQuarto | None:
    """The Quarto to use, or None; a ``$QUARTO`` that names no program is an error."""
    if named := os.environ.get("QUARTO"):
        if (path := shutil.which(named)) is None:
            raise QuartoNotFound(f"$QUARTO is {named!r}, which is not an executable program")
        return FoundQuarto(path, "$QUARTO")
    if on_path := shutil.which("quarto"):
        return FoundQuarto(on_path, "PATH")
    if local := shutil.which(str(venv_quarto())):  # an executable file there
        return FoundQuarto(local, "quarto-cli in this environment")
    return None


def quarto_version(path: str) -> str:
    """``quarto --version``, or "unknown version" when it does not answer."""
    try:
        result = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown version"
    lines = result.stdout.strip().splitlines()
    return lines[-1].strip() if result.returncode == 0 and lines else "unknown version"


def install_stamp(prefix: str | os.PathLike | None = None) -> Path:
    """The file that remembers a failed `pip install quarto-cli` in an environment."""
    return Path(prefix or sys.prefix) / ".quarto-cli-install-failed"


def install_quarto_cli(retry: bool = False, say=print, python: str | os.PathLike | None = None,
                       prefix: str | os.PathLike | None = None) -> FoundQuarto | None:
    """Try once to `pip install quarto-cli` into a virtual environment (by default this one).

    Returns the installed Quarto, or None. A failure is remembered in
    :func:`install_stamp`, and later calls do nothing until ``retry`` is true (`make book
    RETRY_QUARTO=1`) or the stamp is deleted.
    """
    python, prefix = str(python or sys.executable), Path(prefix or sys.prefix)
    stamp = install_stamp(prefix)
    if retry:
        stamp.unlink(missing_ok=True)
    if stamp.exists():
        why = (stamp.read_text(encoding="utf-8").splitlines() or ["an earlier attempt failed"])[0]
        say(f"[build] not trying to install {QUARTO_CLI} again ({why}); to retry: make book "
            "RETRY_QUARTO=1")
        return None
    if not (prefix / "pyvenv.cfg").is_file():
        say(f"[build] {python} is not in a virtual environment; not installing {QUARTO_CLI} "
            "into it")
        return None
    say(f"[build] no Quarto found; trying once to install {QUARTO_CLI} into {prefix} ...")
    log = prefix / "quarto-cli-install.log"
    command = [python, "-m", "pip", "install", "--disable-pip-version-check", QUARTO_CLI]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        output, code = result.stdout + result.stderr, result.returncode
    except (OSError, subprocess.TimeoutExpired) as error:
        output, code = str(error), -1
    log.write_text(f"$ {' '.join(command)}\n{output}", encoding="utf-8")
    found = venv_quarto(python)
    if code == 0 and found.is_file():
        say(f"[build] installed {QUARTO_CLI}: {found}")
        return FoundQuarto(str(found), "quarto-cli in this environment")
    stamp.write_text(f"{now_text()}: pip install {QUARTO_CLI} failed (exit status {code}); see "
                     f"{log}\n", encoding="utf-8")
    tail = [line for line in output.splitlines() if line.strip()][-1:] or ["(no output)"]
    say(f"[build] could not install {QUARTO_CLI} (exit status {code}: {tail[0].strip()}); "
        f"pip's output is in {log}. This is expected offline: the package downloads Quarto "
        "while it installs. Building with nbclient + nbconvert; later builds will not try "
        "again (make book RETRY_QUARTO=1 does).")
    return None


def quarto_environment() -> dict:
    """The environment for Quarto: the lessons and the freeze scripts run with this Python."""
    return {"QUARTO_PYTHON": sys.executable, **os.environ}


def _input_stamps(root: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file the lessons read (:func:`bookkit.cache.input_files`):
    cheap enough to poll."""
    return input_files(root, lambda path: (path.stat().st_size, path.stat().st_mtime_ns))


def preview(found: FoundQuarto, root: Path, extra: list[str], say=print) -> int:
    """`quarto preview --render html`, started again whenever helpers/, exercises/, runtime/
    or data/ change.

    Quarto's preview renders the whole book once (the pre-render step re-executes the lessons
    whose key changed; the others are thawed), then re-renders a chapter when its notebook
    is saved, using the outputs saved in it: by design it never executes a notebook on those
    re-renders, and it does not watch the files the lessons read. So this polls helpers/,
    exercises/, runtime/ and data/ (:func:`_input_stamps`), and when one changes it stops
    Quarto and starts it again, on the same port: the new first render executes exactly the
    lessons the change affects, and no page shows results of the old files.
    """
    import signal
    import time

    # A SIGTERM stops Quarto too, as Ctrl-C does (by raising KeyboardInterrupt).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    # The same address after a restart.
    port = [] if "--port" in extra else ["--port", str(free_port())]
    command = [found.path, "preview", "--render", "html", *extra, *port]
    say(f"[preview] running: {' '.join(command)}")
    say("[preview] watching helpers/, exercises/, runtime/ and data/ too (a change restarts the "
        "preview); stop with Ctrl-C")
    process = None
    try:
        while True:
            before = _input_stamps(root)
            process = subprocess.Popen(command, cwd=root, env=quarto_environment())
            changed = []
            while process.poll() is None and not changed:
                time.sleep(1)
                now = _input_stamps(root)
                changed = sorted(p for p in set(now) | set(before) if now.get(p) != before.get(p))
            if not changed:
                return process.returncode or 0
            say(f"[preview] {listing(changed)} changed: restarting the preview, which renders "
                "the book again")
            stop_process(process, 30)
            if "--no-browser" not in command:
                command.append("--no-browser")  # the open page reconnects to the same port
    except KeyboardInterrupt:
        return 0
    finally:
        if process is not None:
            stop_process(process, 30)
