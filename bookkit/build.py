"""Build the book: `python -m bookkit [--fresh] [--output DIR] [--only LESSON]`.

With Quarto (named by `$QUARTO`, on PATH, or installed into this environment by the
`quarto-cli` package) this runs `quarto render` with this Python and passes its exit
status through; `_quarto.yml`'s freeze scripts (:mod:`bookkit.freeze`) keep its
frozen results honest. Without Quarto it builds the same site itself: it reads the
chapter list from `_quarto.yml`, executes each notebook whose key changed from a clean
python3 kernel (nbclient, working directory at the project root), re-uses the cached
execution of every other one (:mod:`bookkit.cache`), writes HTML pages with
nbconvert, links them with a sidebar, and publishes the folder only when every chapter
succeeded.

Exit status: 0 built; 1 a chapter failed (the message names the notebook, the cell and
its `#| label`, and the error), or a page would load scripts from the network; 2 the
configuration or the command line is wrong (bad `_quarto.yml`, unknown `--only`, a
listed chapter missing). On the Quarto path the status is Quarto's own.
"""

from __future__ import annotations

import argparse
import copy
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bookkit import quarto as quarto_tools
from bookkit.cache import (ExecutionCache, KeyInputError, LessonKey, PageCache, ProjectInputs,
                           _sha256, explain, has_code, installed_distributions, server_reason)
from bookkit.cellopts import (CellOptionError, parse_cell_options, quarto_markdown_to_commonmark,
                              split_front_matter)
from bookkit.notebooks import offer_notebooks
from bookkit.offline import find_remote_assets
from runtime.files import publishable, write_text_atomic
from runtime.progress import build_environment

EXIT_CHAPTER_FAILED = 1
EXIT_USAGE = 2

DEFAULT_TIMEOUT = 1200  # seconds per cell
GENERATOR = "bookkit (nbclient + nbconvert; Quarto was not found)"

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def say(line: str) -> None:
    """Print one line of the build's report."""
    print(f"[build] {line}", flush=True)


class BuildError(Exception):
    """The build cannot go on; `exit_code` says why (see the module docstring)."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.exit_code = exit_code


class ChapterFailure(BuildError):
    """A chapter's cell raised: names the notebook, the cell (and its label) and the error."""

    def __init__(self, notebook: str, where: str, ename: str, evalue: str, traceback: str):
        lines = [f"{notebook}: {where} failed with {ename}"]
        message = _ANSI.sub("", f"{ename}: {evalue}" if evalue else ename)
        lines += ["  " + line for line in message.splitlines()[:60]]
        if tail := [line for line in _ANSI.sub("", traceback).splitlines() if line.strip()][-8:]:
            lines += ["  last traceback lines:", *("    " + line for line in tail)]
        super().__init__("\n".join(lines), EXIT_CHAPTER_FAILED)


# --------------------------------------------------------------------------- config


@dataclass
class Chapter:
    source: str  # project-relative POSIX path, as listed in _quarto.yml
    page: str  # project-relative path of the HTML page
    title: str = ""
    present: bool = True  # the file exists (a missing one is linked, not built)
    unnumbered: bool = False  # title or first heading carries {.unnumbered}
    number: int | str | None = None  # chapter number (tables "Table N.x"), a letter in an appendix
    appendix: bool = False  # listed under book.appendices


@dataclass
class BookConfig:
    root: Path
    title: str
    subtitle: str
    output_dir: str
    chapters: list[Chapter]
    execute_enabled: bool
    execute_defaults: dict = field(default_factory=dict)
    kernel: str = "python3"
    pdf: str | None = None  # the PDF Quarto writes into the output folder (format: typst)

    def number_chapters(self) -> None:
        """Number the chapters as Quarto does in a book: every one not marked unnumbered,
        chapters 1, 2, ... and appendices A, B, ..."""
        number = letter = 0
        for chapter in self.chapters:
            if chapter.unnumbered:
                chapter.number = None
            elif chapter.appendix:
                chapter.number, letter = chr(ord("A") + letter), letter + 1
            else:
                chapter.number = number = number + 1


def _chapter_files(items, where) -> list[str]:
    """The files listed in ``where``; the nbclient engine builds chapters listed as files only."""
    if not isinstance(items, list):  # book.chapters missing, say
        raise BuildError(f"_quarto.yml: {where} must be a list of files")
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise BuildError(f"_quarto.yml: {where}[{i}] is not a file: {item!r}; the nbclient "
                             "engine builds chapters listed as files only (no parts or hrefs)")
    return items


def load_book_config(root: Path) -> BookConfig:
    """Read `_quarto.yml` in `root`: title, output folder, chapters, execution options."""
    path = root / "_quarto.yml"
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:  # no _quarto.yml in the folder, or not YAML
        raise BuildError(f"{path}: cannot read it: {error}") from None
    project = config.get("project") or {}
    book = config.get("book") or {}
    chapters = []
    for appendix, where in ((False, "book.chapters"), (True, "book.appendices")):
        listed = book.get(where.split(".")[1])  # no appendices: none; no chapters: an error
        for source in _chapter_files([] if listed is None and appendix else listed, where):
            source = Path(source).as_posix()
            if Path(source).suffix not in {".ipynb", ".qmd", ".md"}:
                raise BuildError(f"{path}: chapter {source} is not a .ipynb, .qmd or .md file")
            chapters.append(Chapter(source, Path(source).with_suffix(".html").as_posix(),
                                    appendix=appendix))
    execute = config.get("execute") or {}
    stem = book.get('output-file') or str(book.get('title') or 'index').replace(' ', '-')
    typst = isinstance(config.get("format"), dict) and "typst" in config["format"]
    pdf = f"{stem}.pdf" if typst else None
    jupyter = config.get("jupyter", "python3")
    if not isinstance(jupyter, str):
        jupyter = (jupyter or {}).get("kernelspec", {}).get("name", "python3")
    return BookConfig(
        root=root, title=str(book.get("title") or config.get("title") or "Book"),
        subtitle=str(book.get("subtitle") or ""), chapters=chapters,
        output_dir=str(project.get("output-dir") or "_book"),
        execute_enabled=bool(execute.get("enabled", False)),
        execute_defaults={k: v for k, v in execute.items()
                          if k not in {"enabled", "freeze", "cache", "daemon"}},
        kernel=jupyter, pdf=pdf)


def select_chapter(config: BookConfig, only: str) -> Chapter:
    """The chapter named by `--only`: a listed path, a file name, a stem or its number prefix."""
    wanted = only.strip().rstrip("/")
    matches = [c for c in config.chapters
               if wanted in {c.source, Path(c.source).name, Path(c.source).stem}
               or Path(c.source).stem.startswith(wanted + "-")]
    if len(matches) != 1:
        what = "matches no chapter" if not matches else "matches several chapters"
        raise BuildError(f"--only {only!r} {what}; chapters are: "
                         f"{', '.join(c.source for c in config.chapters)}")
    return matches[0]


# --------------------------------------------------------------------------- notebooks


#: A ```{python} chunk of a .qmd/.md file: its code is the text up to the first ``` line.
_CHUNK_OPEN = r"^```+[ \t]*\{python[^}]*\}[ \t]*"
_CHUNK = re.compile(_CHUNK_OPEN + r"\n(.*?)^```+[ \t]*$", re.M | re.S)


def _qmd_to_notebook(text: str):
    """A .qmd/.md file as a notebook: markdown cells with ```{python} chunks as code cells."""
    import nbformat

    meta, body = split_front_matter(text)
    parts = _CHUNK.split("\n".join(body.splitlines()))  # markdown, code, markdown, ...
    if any(re.search(_CHUNK_OPEN, part, re.M) for part in parts[::2]):
        raise ValueError("a ```{python} chunk is never closed")
    cells = [nbformat.v4.new_markdown_cell(part.strip("\n")) if i % 2 == 0
             else nbformat.v4.new_code_cell(part[:-1])  # without the \n before the ``` line
             for i, part in enumerate(parts) if i % 2 or part.strip()]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["book_front_matter"] = meta
    return nb


def read_chapter(root: Path, chapter: Chapter):
    """Read a chapter as a notebook, its front matter (a leading raw cell) kept in metadata."""
    import nbformat

    path = root / chapter.source
    try:
        if path.suffix != ".ipynb":
            return _qmd_to_notebook(path.read_text(encoding="utf-8"))
        nb = nbformat.read(path, as_version=4)
        raw = nb.cells[0].source.strip() if nb.cells and nb.cells[0].cell_type == "raw" else ""
        nb.metadata["book_front_matter"] = split_front_matter(raw + "\n")[0]
    except Exception as error:  # noqa: BLE001 - an unreadable file or front matter, by name
        raise BuildError(f"{chapter.source}: {error}", EXIT_CHAPTER_FAILED) from None
    if raw.startswith("---"):  # the front matter's cell goes, but counts in cell numbers
        nb.cells = nb.cells[1:]
        nb.metadata["book_front_matter_cells"] = 1
    return nb


def chapter_title(nb, chapter: Chapter) -> str:
    """The chapter's title: its front matter's, else its first heading's.

    As in Quarto, a chapter is unnumbered when its title comes from a first heading
    marked ``{.unnumbered}`` (a title in the front matter is always numbered); the
    attributes (``Preface {.unnumbered}``) are not part of the title.
    """
    chapter.unnumbered = False
    title = nb.metadata.get("book_front_matter", {}).get("title")
    if title:
        return str(title)
    for cell in (cell for cell in nb.cells if cell.cell_type == "markdown"):
        if match := re.search(r"^#\s+(.+?)(?:[ \t]*\{([^{}\n]*)\})?\s*$", cell.source, re.M):
            chapter.unnumbered = ".unnumbered" in re.findall(r"(?<![\w-])\.[\w-]+", match[2] or "")
            return match[1]
    return Path(chapter.source).stem.replace("-", " ")


def cell_options(nb, chapter: Chapter, defaults: dict) -> list[dict]:
    """Each cell's options: project defaults < front matter `execute:` < the cell's `#|` lines."""
    offset = nb.metadata.get("book_front_matter_cells", 0)
    front = nb.metadata.get("book_front_matter", {}).get("execute") or {}
    merged = []
    for index, cell in enumerate(nb.cells):
        opts = {**defaults, **front}
        if cell.cell_type == "code":
            try:
                opts.update(parse_cell_options(cell.source)[0])
            except CellOptionError as error:
                raise BuildError(f"{chapter.source}: cell {index + 1 + offset}: {error}",
                                 EXIT_CHAPTER_FAILED) from None
        merged.append(opts)
    return merged


def execute_chapter(nb, chapter: Chapter, options: list[dict], config: BookConfig, timeout: int,
                    *, env: dict | None = None, keep_kernel: bool = False):
    """Run every code cell of `nb` in a fresh kernel, in place; raise ChapterFailure on error.

    ``env`` is the kernel's environment (default: this process's), marked as a book build
    either way. Returns the nbclient client; its kernel is shut down, unless
    ``keep_kernel``, which leaves it running for more code after the chapter's cells (the
    caller shuts it down; the test suite runs the exercise solutions there).
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    offset = nb.metadata.get("book_front_matter_cells", 0)
    skipped = {}
    for index, (cell, opts) in enumerate(zip(nb.cells, options)):
        if cell.cell_type == "code" and opts.get("eval") is False:
            skipped[index], cell.source = cell.source, ""
        if cell.cell_type == "code" and opts.get("error") is True:  # the tag added once
            cell.metadata["tags"] = list(dict.fromkeys([*cell.metadata.get("tags", []),
                                                        "raises-exception"]))
    current = {"index": None}
    client = NotebookClient(nb, timeout=timeout, kernel_name=config.kernel,
                            resources={"metadata": {"path": str(config.root)}},
                            on_cell_start=lambda cell, cell_index: current.update(index=cell_index),
                            config=kernel_manager_config())

    try:
        # Marked as a book build, so the lessons show no progress bars (runtime.progress).
        client.execute(cleanup_kc=not keep_kernel, env=build_environment("nbclient", env))
    except BaseException as error:
        if keep_kernel and client.km is not None:
            client._cleanup_kernel()
        if not isinstance(error, Exception):
            raise
        # A dead kernel, no such kernel: the chapter is still named.
        ename, evalue, tb = type(error).__name__, str(error), ""
        if isinstance(error, CellExecutionError):
            ename, evalue, tb = error.ename, error.evalue, error.traceback
        elif isinstance(error, CellTimeoutError):
            evalue = f"no result within {timeout} s: {error}"
        index, where = current["index"], "before its first cell"
        if index is not None:
            label = options[index].get("label")
            where = f"cell {index + 1 + offset} of {len(nb.cells) + offset}" + (
                f" (label: {label})" if label else "")
        raise ChapterFailure(chapter.source, where, ename, evalue or "", tb or "") from None
    for index, source in skipped.items():
        nb.cells[index].source = source
    return client


def kernel_manager_config():
    """Jupyter configuration that encrypts the kernel's connection when it can.

    A kernel on plain TCP warns "Kernel is running over TCP without encryption" on every
    start. jupyter_client can give the kernel CurveZMQ keys when the kernelspec declares
    support for them (ipykernel's does); with ``transport_encryption = "auto"`` it does
    so, the kernel's sockets are encrypted and the warning has nothing to say.
    """
    import zmq  # jupyter_client's own dependency
    from traitlets.config import Config

    return Config({"KernelManager": {"transport_encryption": "auto"}} if zmq.has("curve") else {})


def splice_outputs(current, executed) -> bool:
    """Give ``current``'s code cells the outputs of ``executed``, whose code is the same.

    Markdown and raw cells stay as they are in ``current``: that is how a prose edit
    reaches the page without executing anything. Returns False, and changes nothing, when
    the code cells differ or ``executed`` is None (no readable execution).
    """
    mine = [cell for cell in current.cells if cell.cell_type == "code"]
    theirs = [cell for cell in executed.cells if cell.cell_type == "code"] if executed else []
    if executed is None or [a.source for a in mine] != [b.source for b in theirs]:
        return False
    for cell, done in zip(mine, theirs):
        cell.outputs, cell.execution_count = done.get("outputs", []), done.get("execution_count")
        if "execution" in done.get("metadata", {}):
            cell.metadata["execution"] = done.metadata["execution"]
    current.metadata.update({name: executed.metadata[name] for name in ("language_info", "widgets")
                             if name in executed.metadata})
    return True


# --------------------------------------------------------------------------- export

#: The page template (nbconvert's "lab" template around the book's sidebar, title,
#: captions and pager) and its stylesheet, beside this file.
_TEMPLATE = (Path(__file__).parent / "page.html.j2").read_text(encoding="utf-8")
_CSS = (Path(__file__).parent / "page.css").read_text(encoding="utf-8")


def _markdown_to_html(text: str, inline: bool = False) -> str:
    import mistune

    if inline:  # a caption: one paragraph's content, without the paragraph
        return re.sub(r"\A<p>(.*)</p>\Z", r"\1", mistune.html(str(text)).strip(), flags=re.S)
    return mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])(text)


def _relative(target: str, page: str) -> str:
    return Path(os.path.relpath(target, start=str(Path(page).parent) or ".")).as_posix()


def prepare_for_export(nb, chapter: Chapter, options: list[dict], chapters: list[Chapter]):
    """Apply Quarto cell options and markdown rewrites to a copy of an executed notebook."""
    nb = copy.deepcopy(nb)
    crossrefs: dict[str, str] = {}
    # In a book, Quarto numbers a chapter's tables and figures "Table N.x" by chapter.
    prefix = f"{chapter.number}." if chapter.number is not None else ""
    labels = [opts.get("label") for cell, opts in zip(nb.cells, options)
              if cell.cell_type == "code" and isinstance(opts.get("label"), str)]
    for kind, name in (("tbl", "Table"), ("fig", "Figure")):
        mine = [label for label in labels if label.startswith(kind + "-")]
        crossrefs.update({label: f"{name} {prefix}{n}" for n, label in enumerate(mine, 1)})
    links = {_relative(c.source, chapter.source): _relative(c.page, chapter.page) for c in chapters}
    kept = []
    for cell, opts in zip(nb.cells, options):
        if opts.get("include") is False:
            continue
        if cell.cell_type == "markdown":
            cell.source = quarto_markdown_to_commonmark(cell.source, crossrefs, links)
        elif cell.cell_type == "code":
            cell.source = parse_cell_options(cell.source)[1]  # without its `#|` lines
            if opts.get("echo") is False:
                cell.metadata.setdefault("transient", {})["remove_source"] = True
            outputs = [] if opts.get("output") is False else list(cell.get("outputs", []))
            if opts.get("warning") is False:
                outputs = [o for o in outputs
                           if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
            cell.outputs = _asis_outputs(outputs, crossrefs,
                                         links) if opts.get("output") == "asis" else outputs
            label = opts.get("label") if isinstance(opts.get("label"), str) else None
            build = {"label": label} if label else {}
            for key, kind in (("tbl-cap", "tbl"), ("fig-cap", "fig")):
                if opts.get(key):
                    shown = (f'<span class="book-caption-label">{html.escape(number)}:</span> '
                             if (number := crossrefs.get(label)) else "")
                    build[f"{kind}_caption"] = shown + _markdown_to_html(opts[key], inline=True)
            if isinstance(opts.get("fig-alt"), str):
                build["fig_alt"] = opts["fig-alt"]
            cell.metadata["book_build"] = build
        elif "html" not in (cell.metadata.get("format") or cell.metadata.get("raw_mimetype") or ""):
            continue  # a raw cell for another format
        kept.append(cell)
    nb.cells = kept
    _fold_going_further(nb.cells)
    nb.metadata.setdefault("language_info", {"name": "python"})
    nb.metadata.pop("widgets", None)
    return nb


def _heading(cell) -> str | None:
    """The text of a markdown cell's level-2 heading, if it has one."""
    found = re.search(r"^## (.+)$", cell.source, re.M) if cell.cell_type == "markdown" else None
    return found and found[1]


def _fold_going_further(cells: list) -> None:
    """Fold the cells after a "Going further" heading, up to the next level-2 heading, into
    one closed ``<details>`` (page.html.j2 writes it; going-further.lua does so for Quarto).
    A markdown cell in which the next heading starts midway is split there first."""
    for start in [i for i, cell in enumerate(cells)
                  if (_heading(cell) or "").startswith("Going further")]:
        end = next((i for i in range(start + 1, len(cells)) if _heading(cells[i])), len(cells))
        if end < len(cells) and not cells[end].source.startswith("## "):
            before, heading = re.split(r"(?m)^(?=## )", cells[end].source, maxsplit=1)
            cells[end:end + 1] = [copy.deepcopy(cells[end]), cells[end]]
            cells[end].source, cells[end + 1].source = before, heading
            end += 1
        if end > start + 1:
            cells[start + 1].metadata["book_fold_open"] = True
            cells[end - 1].metadata["book_fold_close"] = True


def _asis_outputs(outputs, crossrefs, links):
    """`#| output: asis`: printed text (or a Markdown display) is markdown; show it rendered."""
    import nbformat

    def asis(output):
        text = (output.get("text", "") if output.get("name") == "stdout"  # a stream
                else output.get("data", {}).get("text/markdown"))  # a display or a result
        if text is None:
            return output
        text = _markdown_to_html(quarto_markdown_to_commonmark(text, crossrefs, links))
        return nbformat.v4.new_output("display_data", data={"text/html": text})

    return [asis(output) for output in outputs]


def _navigation(config: BookConfig, current: Chapter) -> tuple[str, str]:
    """The sidebar (every chapter, the current one marked) and the previous and next links."""
    def href(chapter: Chapter) -> str:
        return html.escape(_relative(chapter.page, current.page))

    items = []
    first_appendix = next((c for c in config.chapters if c.appendix), None)
    for chapter in config.chapters:
        if chapter is first_appendix:
            items.append('<li class="book-part">Appendices</li>')
        title = (f"Appendix {chapter.number}: {chapter.title}"  # as Quarto titles an appendix
                 if chapter.appendix and chapter.number is not None else chapter.title)
        css, aria = (' class="book-current"',
                     ' aria-current="page"') if chapter is current else ("", "")
        items.append(f'<li{css}><a href="{href(chapter)}"{aria}>{html.escape(title)}</a></li>')
    subtitle = (f'<div class="book-subtitle">{html.escape(config.subtitle)}</div>'
                if config.subtitle else "")
    # On a phone the chapter list is folded under "Chapters"; a wider screen opens it.
    nav = (f'<div class="book-brand"><a href="{href(config.chapters[0])}">'
           f"{html.escape(config.title)}</a>{subtitle}</div>\n<details class=\"book-chapters\">"
           f"<summary>Chapters</summary><ol>{''.join(items)}</ol></details><script>"
           "if (matchMedia('(min-width: 801px)').matches) "
           "document.querySelector('.book-chapters').open = true;</script>")
    position = config.chapters.index(current)
    before, after = [None, *config.chapters, None][position:position + 3:2]  # the neighbours
    links = [f'<a class="book-prev" href="{href(before)}">&larr; {html.escape(before.title)}</a>'
             if before else "<span></span>",
             f'<a class="book-next" href="{href(after)}">{html.escape(after.title)} &rarr;</a>'
             if after else ""]
    return nav, f'<nav class="book-pager" aria-label="Previous and next">{"".join(links)}</nav>'


def make_exporter():
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="lab", template_file="book.html.j2",
                        extra_loaders=[DictLoader({"book.html.j2": _TEMPLATE})],
                        exclude_input_prompt=True, exclude_output_prompt=True, sanitize_html=False)


def export_page(exporter, nb, chapter: Chapter, config: BookConfig) -> str:
    nav, pager = _navigation(config, chapter)
    same = chapter.title == config.title
    nb.metadata["title"] = config.title if same else f"{chapter.title} – {config.title}"
    resources = {"metadata": {"name": Path(chapter.source).stem, "path": str(config.root)},
                 "book": {"generator": GENERATOR, "css": _CSS, "nav": nav, "pager": pager,
                          "page_title": nb.metadata.get("book_front_matter", {}).get("title")}}
    return exporter.from_notebook_node(nb, resources=resources)[0]


# --------------------------------------------------------------------------- main


def run_quarto(found: "quarto_tools.FoundQuarto", root: Path, output: str | None,
               only: Chapter | None, fresh=False, preview=False, extra: list[str] = ()) -> int:
    """Run `quarto render` (or `quarto preview --render html`) in ``root`` with this Python."""
    version = quarto_tools.quarto_version(found.path)
    # Without its frozen results Quarto executes every lesson (or the one asked for).
    target = root / "_freeze" / (Path(only.source).with_suffix("") if only else "")
    if fresh and target.exists():
        shutil.rmtree(target)
        say(f"--fresh: removed {target.relative_to(root)}")
    if preview:
        say(f"Quarto {version} found at {found.path} ({found.how})")
        return quarto_tools.preview(found, root, [*([only.source] if only else []), *extra],
                                    say=lambda line: print(line, flush=True))
    command = [found.path, "render", *([only.source] if only else []),
               *(["--output-dir", output] if output is not None else []), *extra]
    say(f"Quarto {version} found at {found.path} ({found.how}); running: {' '.join(command)}")
    # The kernels Quarto starts are marked as a book build (no progress bars on the pages).
    env = build_environment("quarto", quarto_tools.quarto_environment())
    status = subprocess.call(command, cwd=root, env=env)
    say(f"engine: Quarto {version} ({found.path}) "
        + ("rendered the book" if status == 0 else f"failed with exit status {status}"))
    return status


def _publish(staging: Path, output: Path, partial: bool) -> None:
    """Put the pages of ``staging`` in ``output``: all at once, replacing the folder, or
    (``partial``, a build of one chapter) added to what is there."""
    publishable(staging)  # 0755 and 0644, not the 0700 of a temporary folder
    if partial:
        shutil.copytree(staging, output, dirs_exist_ok=True)
        publishable(output)
    elif output.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{output.name}.old-", dir=output.parent))
        old.rmdir()
        output.rename(old)
        staging.rename(output)
        shutil.rmtree(old, ignore_errors=True)
    else:
        staging.rename(output)


def _prepare_chapters(config: BookConfig, only: Chapter | None) -> tuple[list[Chapter], dict]:
    """Read every chapter (titles and numbers are needed for the navigation); return the targets."""
    targets = [c for c in config.chapters if only is None or c is only or c is config.chapters[0]]
    notebooks = {}
    for chapter in config.chapters:
        if (config.root / chapter.source).is_file():
            notebooks[chapter.source] = nb = read_chapter(config.root, chapter)
            chapter.title = chapter_title(nb, chapter)
        elif chapter in targets:
            raise BuildError(f"{chapter.source}: listed in _quarto.yml but the file does not exist")
        else:
            chapter.present, chapter.title = False, Path(chapter.source).stem.replace("-", " ")
            say(f"note: {chapter.source} does not exist yet; linked but not built")
    config.number_chapters()
    return targets, notebooks


def _execute(nb, chapter: Chapter, options: list[dict], config: BookConfig, timeout: int,
             cache: ExecutionCache, key: LessonKey, inputs: ProjectInputs, fresh: bool,
             always: str | None = None) -> tuple[str, float, dict | None]:
    """Execute ``nb`` in place and keep the execution in the cache.

    ``always`` is a reason to execute whatever the cache holds, and to keep nothing of the
    execution (replies from a reader server, :func:`bookkit.cache.server_reason`).
    Returns what was done (as the build prints it), the seconds it took and the cache
    entry that now holds the execution (None when none could be or was stored).
    """
    why = always or ("--fresh" if fresh else "; ".join(explain(cache.latest(chapter.source), key)))
    say(f"{chapter.source}: executing ({why}) ...")
    started = time.perf_counter()
    execute_chapter(nb, chapter, options, config, timeout)
    seconds, entry = time.perf_counter() - started, None
    # The kernel read the lessons' packages and data/ from disk while it ran; an entry is
    # written only if they are still what the key says, so an edit made meanwhile is never
    # vouched for. No key vouches for a server's replies: then nothing is kept.
    if always is None and ProjectInputs.collect_files(config.root) != inputs.files:
        say(f"note: files changed while {chapter.source} executed; its result is not cached")
    elif always is None:
        try:
            entry = cache.store(chapter.source, key, _for_cache(nb), seconds)
        except OSError as error:  # a read-only checkout still builds, only slower next time
            say(f"note: could not cache {chapter.source}: {error}")
    return f"executed: {why}", seconds, entry


def _for_cache(nb):
    """A copy of an executed notebook without the build's own metadata."""
    stored = copy.deepcopy(nb)
    for name in [n for n in stored.metadata if n.startswith("book_")]:
        del stored.metadata[name]
    return stored


def _page_key(config: BookConfig, chapter: Chapter, entry: dict | None, machinery: str) -> str:
    """Everything a written page depends on: the chapter file, its execution, the book around
    it (`_quarto.yml`, every chapter's title and number) and the build's own code."""
    return _sha256({"machinery": machinery,
                    "chapter": _sha256((config.root / chapter.source).read_bytes()),
                    "execution": [entry.get("key"), entry.get("executed_at")] if entry else None,
                    "book": [(c.title, c.number) for c in config.chapters],
                    "config": _sha256((config.root / "_quarto.yml").read_bytes())})


def _machinery_digest() -> str:
    """The build's own code, page template and stylesheet, and the versions of the packages
    that write pages."""
    here = Path(__file__).resolve().parent
    return _sha256([{path.name: _sha256(path.read_bytes()) for path in here.iterdir()
                     if path.suffix in {".py", ".j2", ".css"}}, installed_distributions()])


#: Why the build without Quarto writes no PDF (the README says how to get one).
NO_PDF = ("the PDF edition ({pdf}) is Quarto's Typst render of the book (format: typst in "
          "_quarto.yml), and nbconvert has no such output; install Quarto (see the README) "
          "and build again to get it")


def build_without_quarto(config: BookConfig, output: Path, only: Chapter | None, timeout: int,
                         fresh: bool = False) -> int:
    started = time.perf_counter()
    targets, notebooks = _prepare_chapters(config, only)
    cache, pages = ExecutionCache(config.root), PageCache(config.root)
    machinery = _machinery_digest()
    server = server_reason()  # replies from a server: execute every lesson, keep nothing
    inputs, report, written, exporter = None, [], {}, None
    for chapter in targets:
        nb = notebooks[chapter.source]
        options = cell_options(nb, chapter, config.execute_defaults)
        key = entry = page = None
        seconds, decision = 0.0, "no code to execute"
        executes = config.execute_enabled and has_code(nb)
        if executes:
            try:
                inputs = inputs or ProjectInputs.collect(config.root, config.kernel)
            except KeyInputError as error:
                raise BuildError(f"{chapter.source}: {error}", EXIT_CHAPTER_FAILED) from None
            key = LessonKey.compute(nb, inputs)
            entry = None if fresh or server else cache.entry(chapter.source, key.key)
        # An unchanged page of an unchanged execution is copied, not written again.
        if not fresh and (entry is not None or not executes):
            page = pages.get(chapter.source, _page_key(config, chapter, entry, machinery))
        # An execution is re-used with its page, or spliced into the current notebook.
        if entry is not None and (page is not None
                                  or splice_outputs(nb, cache.notebook(chapter.source, key.key))):
            cache.touch(chapter.source, entry)
            decision = f"re-used: executed {entry.get('executed_at', '?')}, inputs unchanged"
            say(f"{chapter.source}: {decision}")
        elif executes:
            decision, seconds, entry = _execute(nb, chapter, options, config, timeout, cache, key,
                                                inputs, fresh, always=server)
        if page is None:
            exporter = exporter or make_exporter()
            page = export_page(exporter, prepare_for_export(nb, chapter, options, config.chapters),
                               chapter, config)
            if remote := find_remote_assets(page):
                raise BuildError(f"{chapter.page}: the page would load from the network: "
                                 f"{', '.join(sorted(set(remote)))}", EXIT_CHAPTER_FAILED)
            if entry is not None or not executes:
                try:
                    pages.put(chapter.source, _page_key(config, chapter, entry, machinery), page)
                except OSError as error:
                    say(f"note: could not cache the page {chapter.page}: {error}")
        report.append((chapter, decision, seconds))
        written[chapter.page] = page

    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.building-", dir=output.parent))
    try:
        for name, page in written.items():
            write_text_atomic(staging / name, page)
        offer_notebooks(config.root, staging, [c.source for c in targets])
        _publish(staging, output, partial=only is not None)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    say("built without Quarto: nbclient executed the notebooks, nbconvert wrote the HTML")
    for chapter, decision, seconds in report:
        say(f"  {chapter.page:<55} "
            f"{f'{seconds:7.1f} s' if decision.startswith('executed') else ' ' * 9}  {decision}")
    say(f"{len(targets)} page(s) written to {output} in {time.perf_counter() - started:.1f} s")
    if config.pdf:
        say(f"no PDF: {NO_PDF.format(pdf=config.pdf)}")
    say("engine: nbclient + nbconvert (Quarto was not found)")
    return 0


def main(argv: list[str] | None = None) -> int:
    from runtime.paths import PROJECT_ROOT

    parser = argparse.ArgumentParser(prog="python -m bookkit", description=__doc__.split("\n\n")[0])
    option = parser.add_argument
    option("--output",
           help="output folder (default: project.output-dir of _quarto.yml, i.e. _book)")
    option("--only", metavar="LESSON",
           help="build one chapter: its path, file name, stem or number (01)")
    option("--project", type=Path, default=PROJECT_ROOT, help="project folder holding _quarto.yml")
    option("--engine", choices=["auto", "quarto", "nbclient"], default="auto", help="auto: Quarto "
           "when one is found ($QUARTO, PATH, quarto-cli here), else nbclient + nbconvert")
    option("--fresh", action="store_true", help="ignore earlier executions (the cache or _freeze/)")
    option("--install-quarto", action="store_true", help="without Quarto, try once to pip-install "
           f"{quarto_tools.QUARTO_CLI} here (make book does)")
    option("--retry-quarto-install", action="store_true",
           help="forget a failed quarto-cli install; try again")
    option("--preview", action="store_true", help="quarto preview --render html, restarted when "
           "helpers/, exercises/, runtime/ or data/ change")
    option("--timeout", type=int, default=DEFAULT_TIMEOUT, help="seconds allowed per cell")
    option("quarto_args", nargs="*", metavar="-- QUARTO-ARGUMENT", help="after --: more arguments "
           "for quarto render or preview (e.g. -- --no-browser --port 4200)")
    args = parser.parse_args(argv)
    root = args.project.resolve()
    try:
        config = load_book_config(root)
        only = select_chapter(config, args.only) if args.only else None
        found = None
        if args.engine != "nbclient":
            found = quarto_tools.find_quarto()  # QuartoNotFound: a $QUARTO that names no program
            if found is None and (args.install_quarto or args.retry_quarto_install):
                found = quarto_tools.install_quarto_cli(retry=args.retry_quarto_install)
        if found is None and (args.engine == "quarto" or args.preview):
            raise BuildError(f"{'--preview' if args.preview else '--engine quarto'}: no Quarto "
                             "found ($QUARTO, quarto on PATH, or quarto-cli in this environment)")
        if found is not None:
            return run_quarto(found, root, args.output, only, fresh=args.fresh,
                              preview=args.preview, extra=args.quarto_args)
        if args.quarto_args:
            raise BuildError(f"arguments for Quarto ({' '.join(args.quarto_args)}) but no Quarto "
                             "is used")
        say("Quarto not found: executing with nbclient and writing HTML with nbconvert")
        output = root / (args.output or config.output_dir)  # an absolute --output stays as it is
        return build_without_quarto(config, output, only, args.timeout, fresh=args.fresh)
    except (BuildError, quarto_tools.QuartoNotFound) as error:
        print(f"[build] FAILED: {error}", file=sys.stderr, flush=True)
        if error.exit_code == EXIT_CHAPTER_FAILED:
            print("[build] nothing was published; the output folder is unchanged.",
                  file=sys.stderr, flush=True)
        return error.exit_code


if __name__ == "__main__":
    sys.exit(main())
