"""The book as one test session sees it: each lesson executed once, each engine's site built once.

Executing a lesson costs seconds to minutes, and building the whole book costs the sum of
them, so a session does each once and every test reads the result:

- :class:`SessionBook` is a copy of the project in which each lesson is executed at most
  once per session, with the build's own code, its kernel kept up for the exercise tests.
  Each execution is stored in that copy's execution cache under the key the build
  computes (:mod:`bookkit.cache`), so the nbclient build of the copy (:meth:`build`)
  re-uses all of them and only writes pages; that every lesson is re-used is checked, so
  a key that differed between a test's run and the build would fail, not cost minutes.
- :class:`QuartoBuild` builds another copy with real Quarto. Quarto executes the lessons
  itself (its freeze is not the build's cache), so it starts in the background when the
  session starts and runs on the second core while the other tests run; the tests that
  read its site are moved to the end of the session (tests/conftest.py).

Every lesson of the session runs under the same reader settings
(:data:`SESSION_SETTINGS`): the recorded transcript for lesson 1 (the reference render's
values, whatever weights a developer has), and no student reviews for lesson 4. Tests
that need other inputs (a student's review, a reader server, an edited transcript)
execute their own small project or their one lesson.
"""
from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bookkit.build import load_book_config, read_chapter
from bookkit.cache import ExecutionCache, ProjectInputs, has_code
from runtime.config import REVIEWS_DIR
from lesson_outputs import LessonRun, chapter_source
from projects import clean_environment, copy_project

#: The reader settings of every lesson the session executes or builds. The reviews folder is
#: one that does not exist (read from the project folder, where lessons run): lesson 4 finds
#: no student review, whatever a developer keeps in data/reviews.
SESSION_SETTINGS = {"RIVERTON_READER_MODE": "recorded", REVIEWS_DIR: "tests/no-student-reviews"}

#: What each engine's build prints last (bookkit.build).
ENGINE_LINE = {"nbclient": "[build] engine: nbclient + nbconvert", "quarto": "[build] engine: Quarto"}


def session_environment(project: Path, **extra: str) -> dict[str, str]:
    """This process's environment without the reader and Quarto settings a developer may
    have set, plus :data:`SESSION_SETTINGS`, the copy ``project`` on the kernels' path, and
    ``extra``."""
    return clean_environment(**SESSION_SETTINGS, PYTHONPATH=str(project), **extra)


@dataclass
class BuiltSite:
    """A whole-book build: the engine, the project copy, its site and what the build printed."""

    engine: str
    project: Path
    report: str
    seconds: float
    chapters: list[str] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        return self.project / "_book"


class SessionBook:
    """A copy of the project whose lessons execute at most once each (see the module docstring)."""

    def __init__(self, folder: Path):
        self.root = copy_project(folder)
        self.env = session_environment(self.root)
        self.config = load_book_config(self.root)
        self.cache = ExecutionCache(self.root)
        self._inputs: ProjectInputs | None = None
        self.runs: dict[str, LessonRun] = {}

    @property
    def inputs(self) -> ProjectInputs:
        if self._inputs is None:
            self._inputs = ProjectInputs.collect(self.root, self.config.kernel, environ=self.env)
        return self._inputs

    def lesson(self, notebook: Path | str) -> LessonRun:
        """The session's execution of a lesson (a path in this project or as listed in
        `_quarto.yml`), executed on first use and stored in the copy's execution cache."""
        source = chapter_source(notebook, self.root)
        if source not in self.runs:
            run = LessonRun(self.root, source, self.env, inputs=self.inputs)
            self.runs[source] = run
            # As the build does: vouch only for an execution whose inputs did not change.
            if ProjectInputs.collect_files(self.root, self.env) == self.inputs.files:
                self.cache.store(source, run.key, run.nb, run.seconds)
        return self.runs[source]

    def lessons(self) -> list[str]:
        """The chapters with code, as `_quarto.yml` lists them."""
        return [c.source for c in self.config.chapters
                if (self.root / c.source).is_file() and has_code(read_chapter(self.root, c))]

    def build(self) -> BuiltSite:
        """The nbclient build of the copy, after every lesson executed here once."""
        chapters = self.lessons()
        for source in chapters:
            self.lesson(source)
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "bookkit", "--engine", "nbclient"], cwd=self.root,
                                env=self.env, capture_output=True, text=True, timeout=3600)
        report = result.stdout + result.stderr
        assert result.returncode == 0, f"the nbclient build failed:\n{report[-6000:]}"
        assert ENGINE_LINE["nbclient"] in result.stdout, report[-3000:]
        executed = [s for s in chapters if f"[build] {s}: re-used" not in result.stdout]
        assert not executed, (f"the build executed {executed} again instead of re-using the "
                              f"session's execution (a key differs):\n{report[-6000:]}")
        return BuiltSite("nbclient", self.root, report, time.perf_counter() - started, chapters)

    def close(self) -> None:
        for run in self.runs.values():
            run.close()


class QuartoBuild:
    """The whole book built with real Quarto in a copy of the project, in the background."""

    def __init__(self, folder: Path, quarto: str):
        self.root = copy_project(folder)
        self.quarto = quarto
        self.log = self.root.parent / "quarto-build.log"
        self.process: subprocess.Popen | None = None
        self.started = 0.0
        self.site: BuiltSite | None = None

    def start(self) -> "QuartoBuild":
        env = session_environment(self.root, QUARTO=self.quarto, QUARTO_PYTHON=sys.executable)
        self.started = time.perf_counter()
        with open(self.log, "w", encoding="utf-8") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "bookkit", "--engine", "quarto"], cwd=self.root,
                env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
        return self

    def wait(self, timeout: float = 3600) -> BuiltSite:
        """The finished build (waiting for it); fails with the end of its log if it failed."""
        if self.site is None:
            if self.process is None:
                self.start()
            status = self.process.wait(timeout=timeout)
            seconds = time.perf_counter() - self.started
            report = self.log.read_text(encoding="utf-8")
            assert status == 0, f"the Quarto build failed (exit {status}):\n{report[-6000:]}"
            assert ENGINE_LINE["quarto"] in report, report[-3000:]
            chapters = [c.source for c in load_book_config(self.root).chapters]
            self.site = BuiltSite("quarto", self.root, report, seconds, chapters)
        return self.site

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=60)
