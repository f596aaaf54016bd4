"""The lesson key, and the cache of executed lessons that it guards.

A lesson executes again only when something it depends on changed since its last
successful execution. What it depends on is hashed into its *key*:

- the lesson's code cells (source, `#|` options included, and cell tags), in order; its
  front matter; and any markdown cell holding inline `{python}` code;
- every file of the packages the lessons import, `helpers` (what they teach), `exercises`
  (their checks) and `runtime` (what serves them), `__pycache__` and compiled files aside;
- every file under `data/`, read from disk (an untracked file counts too), and every file
  of a folder that a ``RIVERTON_*`` variable points a lesson at outside `data/`
  (:data:`INPUT_FOLDER_VARIABLES`: lesson 4's ``RIVERTON_REVIEWS_DIR``);
- `_quarto.yml`;
- the distributions installed in the kernel's Python, with their versions;
- every environment variable whose name starts with `RIVERTON_` (a hash of each value is
  stored, never the value);
- whether each registered reader's weights are on this machine (``auto`` mode runs a
  reader live when they are);
- the kernel's name and the Python version.

A lesson whose replies come from a reader server (``RIVERTON_READER_URL`` set, or
``RIVERTON_READER_MODE=server``) is never re-used: the server's engine, version or weights
can change behind the same URL, and nothing on this machine can see it
(:func:`server_reason`).

Prose is deliberately left out: markdown is never executed, so a cached execution stays
valid when only prose changes, and the build splices the current markdown cells into the
cached notebook before it writes the page. Cells with `#| output: asis` are code cells,
so the prose they print is in the key.

Each cache entry stores every component, so the build can say exactly why a lesson ran
("executed: helpers/parsing.py changed") or that it was re-used. Entries are written
only after a successful execution, into a temporary folder renamed into place, so a
failed or interrupted build never leaves an entry behind. The same key code decides
which of Quarto's `_freeze/` entries are still valid (:mod:`bookkit.freeze`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import time
import subprocess
import sys
import tempfile
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path

from runtime.files import read_json, write_json_atomic, write_text_atomic
from runtime import config

#: Bump when what the key covers, or how entries are stored, changes.
KEY_VERSION = 1
CACHE_DIR_NAME = ".book-cache"
#: Executed notebooks kept per lesson: the newest few, so that undoing an edit is free.
KEEP_PER_LESSON = 3
#: The packages a lesson imports, whose files are in every lesson's key.
LESSON_PACKAGES = ("helpers", "exercises", "runtime")

_IGNORED_PARTS = {"__pycache__", ".ipynb_checkpoints"}
_INLINE_CODE = re.compile(r"`\{python3?\}")


def _sha256(data) -> str:
    """SHA-256 of bytes, or of any other value as canonical JSON."""
    if not isinstance(data, bytes):
        data = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(data).hexdigest()


def now_text() -> str:
    """Local time to the second, as the build prints it."""
    return time.strftime("%Y-%m-%d %H:%M:%S")


# --------------------------------------------------------------------------- components


def files_under(folder: Path) -> list[Path]:
    """Every file under ``folder`` that the key covers (``__pycache__`` and compiled files
    aside)."""
    return [path for path in sorted(folder.rglob("*"))
            if not _IGNORED_PARTS.intersection(path.relative_to(folder).parts)
            and path.suffix not in {".pyc", ".pyo"} and path.is_file()]


def lesson_package_folders(root: Path) -> dict[str, Path]:
    """The folder of each of :data:`LESSON_PACKAGES` that a lesson of ``root`` can import: the
    project's own, else the installed one."""
    own = {name: Path(root) / name for name in LESSON_PACKAGES if (Path(root) / name).is_dir()}
    return {name: own.get(name) or Path(importlib.import_module(name).__file__).resolve().parent
            for name in LESSON_PACKAGES if name in own or importlib.util.find_spec(name)}


#: ``RIVERTON_*`` variables that change only what a person sees while cells run, never an
#: output a page keeps: the build marker (it turns progress bars off, and every build sets
#: it) and the progress switch (bars are off in a build whatever it says). Leaving them
#: out of the key keeps `make book` and a plain `quarto render` from executing each
#: other's lessons again. See :mod:`runtime.progress`.
DISPLAY_ONLY_VARIABLES = frozenset({config.BOOK_BUILD, config.PROGRESS})

#: ``RIVERTON_*`` variables that name a folder whose files a lesson reads: lesson 4 reads
#: students' reviews from ``$RIVERTON_REVIEWS_DIR`` (``runtime.reviews.reviews_dir``, explained
#: in lesson 4, "Your own review"). The variable's value is in the key like any other; when
#: the folder lies outside `data/` (which is hashed anyway) its files are hashed too, so an
#: edit there executes the lesson again. A relative value is read from the project folder,
#: where lessons run.
INPUT_FOLDER_VARIABLES = (config.REVIEWS_DIR,)


def input_folders(root: Path, environ=None) -> dict[str, Path]:
    """The folders named by :data:`INPUT_FOLDER_VARIABLES` that lie outside ``root/data``."""
    environ = os.environ if environ is None else environ
    data = (Path(root) / "data").resolve()
    folders = {name: (Path(root) / environ[name]).resolve()  # an absolute value stays as it is
               for name in INPUT_FOLDER_VARIABLES if environ.get(name)}
    return {name: folder for name, folder in folders.items()
            if folder != data and data not in folder.parents}


def input_files(root: Path, value, environ=None) -> dict:
    """``value(path)`` of every file an author edits that a lesson reads: the lessons'
    packages, the data, and a folder named by an :data:`INPUT_FOLDER_VARIABLES` variable
    outside `data/` (as ``$NAME/relative/path``); by ``label/relative/path``."""
    folders = {**lesson_package_folders(root), "data": Path(root) / "data",
               **{f"${name}": folder for name, folder in input_folders(root, environ).items()}}
    return {f"{label}/{path.relative_to(folder).as_posix()}": value(path)
            for label, folder in folders.items() for path in files_under(folder)}


def server_reason(environ=None) -> str | None:
    """Why no lesson can be re-used while a reader server is configured, or None.

    A server answers behind a URL; its engine, version or weights can change without
    anything on this machine changing, so no key can vouch for its replies. Every lesson
    with code therefore executes while ``RIVERTON_READER_URL`` is set or
    ``RIVERTON_READER_MODE`` is ``server``: any of them may ask the reader, and the cost
    of a needless execution is time, where the cost of a wrong re-use would be a stale
    page. The URL is printed without a user name or password.
    """
    if url := config.text(config.READER_URL, environ):
        return "replies come from the server at " + re.sub(r"^([\w+.-]+://)[^/@]*@", r"\1", url)
    if config.text(config.READER_MODE, environ).lower() == "server":
        return f"replies come from a reader server ({config.READER_MODE}=server)"
    return None


def environment_digests(environ=None) -> dict[str, str]:
    """A hash of the value of every ``RIVERTON_*`` environment variable, by name
    (:data:`DISPLAY_ONLY_VARIABLES` aside)."""
    environ = os.environ if environ is None else environ
    return {name: _sha256(value.encode("utf-8"))[:16] for name, value in sorted(environ.items())
            if name.startswith(config.PREFIX) and name not in DISPLAY_ONLY_VARIABLES}


def installed_distributions() -> dict[str, str]:
    """Every distribution this Python can import, by normalised name, with its version."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        folder = getattr(dist, "_path", None)
        if folder is not None and folder.name.endswith(".dist-info") and "-" in folder.name:
            # A wheel's metadata folder is named NAME-VERSION.dist-info; reading the name
            # there is a hundred times faster than parsing every METADATA file.
            name, version = folder.name[: -len(".dist-info")].split("-", 1)
        else:
            name, version = (dist.metadata["Name"] if dist.metadata else None), dist.version
        if name:  # the first on sys.path wins, as for imports
            found.setdefault(re.sub(r"[-_.]+", "-", name).lower(), version)
    return dict(sorted(found.items()))


def reader_weights_present() -> dict[str, bool]:
    """Whether the weights of every registered reader are on this machine (``auto`` mode
    runs a reader live when they are)."""
    from runtime import registry

    return {key: bool(registry.weights_available(spec))
            for key, spec in sorted(registry.REGISTRY.items())}


def facts_of_this_python() -> dict:
    """The facts of the running Python that go into the key (see :func:`kernel_facts`)."""
    return {"packages": installed_distributions(), "weights": reader_weights_present(),
            "python": platform.python_version(), "implementation": sys.implementation.name}


class KeyInputError(RuntimeError):
    """A component of the key cannot be determined (no such kernel, an unusable Python)."""


def kernel_python(kernel: str) -> str:
    """The interpreter that the Jupyter kernel ``kernel`` runs: its kernelspec's command.

    Kernelspecs are looked up as jupyter_client does (the user's, this environment's, the
    system's Jupyter data folders, in that order; ipykernel's own ``python3`` otherwise),
    reading ``kernel.json`` directly rather than importing jupyter_client.
    """
    from jupyter_core.paths import jupyter_path  # nbformat's dependency, so always there

    for folder in jupyter_path("kernels"):
        spec = Path(folder) / kernel.lower() / "kernel.json"
        if spec.is_file():
            try:
                argv = json.loads(spec.read_text(encoding="utf-8")).get("argv") or [sys.executable]
            except ValueError as error:
                raise KeyInputError(f"{spec}: not valid JSON: {error}") from None
            # jupyter_client launches a spec whose command is plain "python" with its own
            # interpreter.
            plain = {"python", f"python{sys.version_info[0]}", "python%d.%d" % sys.version_info[:2]}
            return sys.executable if argv[0] in plain else argv[0]
    if kernel.lower() in {"python3", "python"} and importlib.util.find_spec("ipykernel"):
        return sys.executable  # ipykernel's built-in kernel runs this Python
    raise KeyInputError(f"no Jupyter kernel named {kernel!r} is installed for {sys.executable}")


# The project first, so that its packages are the ones examined; then the folder that holds
# this machinery, which a project need not carry.
_FACTS_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
sys.path.append(sys.argv[2])
from bookkit.cache import facts_of_this_python
print(json.dumps(facts_of_this_python()))
"""


def kernel_facts(root: Path, kernel: str) -> dict:
    """Packages, reader weights and Python version as the lessons' kernel sees them.

    Computed in this process when the kernel runs this Python and this process imports
    the project's own packages (the usual case); otherwise asked of the kernel's
    interpreter, in the project.
    """
    interpreter = kernel_python(kernel)
    same = all(importlib.util.find_spec(name) is not None
               and Path(importlib.import_module(name).__file__).resolve().parent == folder.resolve()
               for name, folder in lesson_package_folders(root).items())
    if os.path.abspath(interpreter) == os.path.abspath(sys.executable) and same:
        return facts_of_this_python()
    machinery = str(Path(__file__).resolve().parent.parent)
    try:
        result = subprocess.run([interpreter, "-c", _FACTS_SCRIPT, str(root), machinery], cwd=root,
                                capture_output=True, text=True, timeout=120, check=True)
    except (OSError, subprocess.SubprocessError) as error:  # not run, too slow, or it failed
        failed = isinstance(error, subprocess.CalledProcessError)  # then its stderr says why
        why = error.stderr.strip()[-2000:] if failed else error
        raise KeyInputError(f"could not ask the kernel's Python {interpreter}: {why}") from None
    return json.loads(result.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class ProjectInputs:
    """The parts of every lesson's key that do not depend on the lesson itself."""

    files: dict[str, str]
    packages: dict[str, str]
    environment: dict[str, str]
    weights: dict[str, bool]
    runtime: dict[str, str]

    @staticmethod
    def collect_files(root: Path, environ=None) -> dict[str, str]:
        """Digests of the lessons' packages, the data and `_quarto.yml` (the files an author
        edits), and of the files of a folder named by an :data:`INPUT_FOLDER_VARIABLES`
        variable outside `data/`, as ``$NAME/relative/path`` (``environ``: the kernel's
        environment, default this process's)."""
        return {**input_files(root, lambda path: _sha256(path.read_bytes()), environ),
                "_quarto.yml": _sha256((Path(root) / "_quarto.yml").read_bytes())}

    @classmethod
    def collect(cls, root: Path, kernel: str = "python3", environ=None) -> "ProjectInputs":
        """Every project-wide component, as the kernel ``kernel`` started with ``environ``
        (default: this process's environment) would see it. Raises :class:`KeyInputError`
        when the kernel or its Python cannot be examined."""
        facts = kernel_facts(Path(root), kernel)
        runtime = {"kernel": kernel, "python": facts["python"],
                   "implementation": facts["implementation"]}
        return cls(cls.collect_files(root, environ), facts["packages"],
                   environment_digests(environ), facts["weights"], runtime)


# --------------------------------------------------------------------------- the key


def lesson_cells(nb) -> tuple[dict, list[int]]:
    """The lesson's own part of the key, and the cell numbers of the keyed cells.

    ``nb`` is a chapter as :func:`bookkit.build.read_chapter` returns it (its front
    matter moved into metadata). Cell numbers count the front-matter cell, as error
    messages do; they are kept beside the key, not in it, so that adding a paragraph
    does not change the key.
    """
    offset = nb.metadata.get("book_front_matter_cells", 0)
    digests, numbers = [], []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            tags = sorted(cell.get("metadata", {}).get("tags", []))
            digests.append(_sha256(["code", cell.source, tags]))
        elif cell.cell_type == "markdown" and _INLINE_CODE.search(cell.source):
            digests.append(_sha256(["markdown", cell.source]))
        else:
            continue
        numbers.append(index + 1 + offset)
    front_matter = _sha256(nb.metadata.get("book_front_matter", {}))
    return {"front_matter": front_matter, "cells": digests}, numbers


def has_code(nb) -> bool:
    return any(c.cell_type == "code" and c.source.strip() for c in nb.cells)


@dataclass(frozen=True)
class LessonKey:
    """A lesson's key (a SHA-256) and the components it was computed from."""

    key: str
    components: dict
    cell_numbers: list[int] = field(default_factory=list)

    @classmethod
    def compute(cls, nb, inputs: ProjectInputs) -> "LessonKey":
        cells, numbers = lesson_cells(nb)
        components = {"version": KEY_VERSION, "lesson": cells, **asdict(inputs)}
        return cls(_sha256(components), components, numbers)

    def record(self) -> dict:
        return {"key": self.key, "components": self.components, "cell_numbers": self.cell_numbers}


def listing(items: list[str], limit: int = 3) -> str:
    """The first ``limit`` items, and how many more there are."""
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _changes(before: dict, after: dict, part: str) -> list[tuple[str, str, object, object]]:
    """``(kind, name, old, new)`` of every name whose value in the component ``part`` differs
    between two keys' components, in the order of the names; ``kind`` is "changed", "added"
    or "removed"."""
    old, new = before.get(part, {}), after[part]
    return [("added" if name not in old else "removed" if name not in new else "changed",
             name, old.get(name), new.get(name))
            for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]


def explain(old: dict | None, new: LessonKey) -> list[str]:
    """Why ``new`` differs from an earlier record ``old`` ({key, components, cell_numbers})."""
    if not old or "components" not in old:
        return ["no earlier run"]
    before, after = old["components"], new.components
    if before.get("version") != after["version"]:
        return ["the cache format changed"]
    what = {"python": "Python version", "implementation": "Python implementation"}
    reasons = [f"{what.get(name, name)} changed ({was} -> {now})"
               for _, name, was, now in _changes(before, after, "runtime")]
    lesson = before.get("lesson", {})
    if lesson.get("front_matter") != after["lesson"]["front_matter"]:
        reasons.append("front matter changed")
    cells_b, cells_a = lesson.get("cells", []), after["lesson"]["cells"]
    if len(cells_b) != len(cells_a):
        reasons.append(f"code cells added or removed ({len(cells_b)} -> {len(cells_a)} code cells)")
    elif cells_b != cells_a:
        changed = [str(n) for n, x, y in zip(new.cell_numbers, cells_b, cells_a) if x != y]
        reasons.append(f"code changed in {'cells' if len(changed) > 1 else 'cell'} "
                       f"{listing(changed, 5)}")
    files = _changes(before, after, "files")
    for kind in ("changed", "added", "removed"):
        if names := [name for change, name, _, _ in files if change == kind]:
            reasons.append(f"{listing(names)} {kind}")
    versions = {"changed": "{name} {old} -> {new}", "added": "{name} {new} installed",
                "removed": "{name} {old} removed"}
    if packages := [versions[kind].format(name=name, old=was, new=now)
                    for kind, name, was, now in _changes(before, after, "packages")]:
        reasons.append(f"package versions changed ({listing(packages)})")
    said = {"changed": "changed", "added": "set", "removed": "unset"}  # of a variable
    reasons += [f"{name} {said[kind]}" for kind, name, *_ in _changes(before, after, "environment")]
    reasons += [f"weights of reader {name} {'now' if now else 'no longer'} present"
                for _, name, _, now in _changes(before, after, "weights")]
    return reasons or ["inputs changed"]


# --------------------------------------------------------------------------- storage


def chapter_slug(source: str) -> str:
    """A folder name for a chapter path: ``lessons/01-x.ipynb`` -> ``lessons--01-x``."""
    return Path(source).with_suffix("").as_posix().replace("/", "--")


class ExecutionCache:
    """Executed notebooks of the build without Quarto, under ``ROOT/.book-cache/executed/``.

    One folder per lesson holds up to :data:`KEEP_PER_LESSON` entries, each named by its
    key and holding ``entry.json`` (the key, its components, when it ran, how long it
    took) and ``executed.ipynb``.
    """

    def __init__(self, root: Path):
        self.folder = Path(root) / CACHE_DIR_NAME / "executed"

    def lesson_folder(self, source: str) -> Path:
        return self.folder / chapter_slug(source)

    def _entries(self, source: str) -> list[tuple[dict, Path]]:
        """Every entry of ``source`` with its folder, the one used most recently first."""
        paths = self.lesson_folder(source).glob("[!.]*/entry.json")  # not a staging folder
        found = [(entry, path.parent) for path in paths
                 if isinstance(entry := read_json(path), dict) and "key" in entry]
        # Nanoseconds, not times to the second: builds can follow each other fast.
        return sorted(found, key=lambda item: item[0].get("used_ns", 0), reverse=True)

    def touch(self, source: str, entry: dict) -> None:
        """Note that ``entry`` was just used: it becomes the latest, and the last to be pruned."""
        with suppress(OSError):  # only the order of explanations and pruning suffers
            write_json_atomic(self.lesson_folder(source) / entry["key"][:32] / "entry.json",
                              {**entry, "used_at": now_text(), "used_ns": time.time_ns()})

    def latest(self, source: str) -> dict | None:
        """The entry used most recently for ``source`` (what an explanation compares against)."""
        return next((entry for entry, _ in self._entries(source)), None)

    def entry(self, source: str, key: str) -> dict | None:
        """The record of the entry whose key is ``key`` (its notebook is not read), or None."""
        folder = self.lesson_folder(source) / key[:32]
        entry = read_json(folder / "entry.json")
        valid = isinstance(entry, dict) and entry.get("key") == key
        return entry if valid and (folder / "executed.ipynb").is_file() else None

    def notebook(self, source: str, key: str):
        """The executed notebook of the entry whose key is ``key`` (see :meth:`entry`), or
        None; an unreadable notebook counts as absent."""
        import nbformat

        try:
            return nbformat.read(self.lesson_folder(source) / key[:32] / "executed.ipynb",
                                 as_version=4)
        except Exception:  # noqa: BLE001 - a damaged or missing entry is a miss
            return None

    def store(self, source: str, key: LessonKey, notebook, seconds: float) -> dict:
        """Save a successful execution atomically; keep the newest few entries; return its
        record."""
        import nbformat

        lesson = self.lesson_folder(source)
        lesson.mkdir(parents=True, exist_ok=True)
        final = lesson / key.key[:32]
        staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=lesson))
        try:
            nbformat.write(notebook, staging / "executed.ipynb")
            entry = {**key.record(), "source": source, "executed_at": now_text(),
                     "seconds": round(seconds, 1), "used_ns": time.time_ns()}
            write_json_atomic(staging / "entry.json", entry)
            # An entry of the same key (--fresh) goes first; one half removed is a miss too.
            shutil.rmtree(final, ignore_errors=True)
            staging.rename(final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        for _entry, folder in self._entries(source)[KEEP_PER_LESSON:]:
            shutil.rmtree(folder, ignore_errors=True)
        return entry


class PageCache:
    """The last page written for each chapter, under ``ROOT/.book-cache/pages/``, with its key.

    A page depends on the chapter's file (prose included), its execution and the book
    around it (titles, chapter numbers, the build's own code); when none of that changed
    the build copies the page instead of writing it again.
    """

    def __init__(self, root: Path):
        self.folder = Path(root) / CACHE_DIR_NAME / "pages"

    def get(self, source: str, key: str) -> str | None:
        record = read_json(self.folder / f"{chapter_slug(source)}.json")
        try:
            page = (self.folder / f"{chapter_slug(source)}.html").read_text(encoding="utf-8")
        except OSError:
            return None
        valid = isinstance(record, dict) and record.get("key") == key
        return page if valid and _sha256(page.encode("utf-8")) == record.get("sha256") else None

    def put(self, source: str, key: str, page: str) -> None:
        """Keep ``page`` under ``key``; on an error nothing is left half-written or behind."""
        write_text_atomic(self.folder / f"{chapter_slug(source)}.html", page)
        write_json_atomic(self.folder / f"{chapter_slug(source)}.json",
                          {"key": key, "sha256": _sha256(page.encode("utf-8"))})
