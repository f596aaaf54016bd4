"""Keep Quarto's frozen results honest: `pre-render` and `post-render` scripts for
`_quarto.yml`.

Quarto's ``freeze: auto`` re-executes a chapter only when the chapter's own file changed.
The book's lessons also depend on helpers/, exercises/, runtime/, the data, the installed
packages and the reader settings, so `_quarto.yml` runs this script around every render
(``quarto render`` and the first render of ``quarto preview`` alike), with the Python
Quarto uses for Jupyter (``QUARTO_PYTHON``, else ``python3`` on PATH):

``pre-render``
    computes every chapter's key with :mod:`bookkit.cache` and compares it with the key
    recorded after the chapter's last successful render. Where they differ, the chapter's
    entry under ``_freeze/`` is deleted (and Quarto's own copy under ``.quarto/_freeze/``,
    which it thaws from when a render has freeze off), so Quarto executes it again; the
    script prints why. The keys just computed are kept as *pending*. While a reader
    server is configured every lesson executes, whatever its key
    (:func:`bookkit.cache.server_reason`). Where the key holds, the script still
    says what Quarto will do: Quarto thaws a frozen result only while the notebook file
    is byte for byte the one it froze, so an edit of the file, prose included, executes
    that lesson (and only it) under Quarto; the script says so rather than claim the
    result is kept. (The build without Quarto re-uses the execution on a prose edit; a
    frozen result cannot be re-used that way, because it holds the rendered prose too.)
``post-render``
    runs only when the render succeeded; it records the pending keys of the chapters
    that were rendered. A failed render records nothing, so no key ever vouches for a
    frozen result that a render did not finish.

Quarto executes a `.ipynb` chapter in place: it writes the outputs into the notebook file
itself. The book's notebooks are committed without outputs, so ``pre-render`` keeps a
copy of each lesson notebook and ``post-render`` puts it back (and re-hashes Quarto's
frozen result for the notebook as it is now, so the next render still thaws it; the
lesson key, not the notebook's bytes, vouches for the result). A copy left by a render
that failed is put back by the next ``pre-render``.

One execution serves both formats. `_quarto.yml` turns execution off for the PDF (Typst):
Quarto renders each lesson to HTML first, executing it or thawing its frozen result, and
then to Typst from the outputs in the notebook file. After an execution those are the
outputs Quarto has just written into it. For a lesson thawed from its frozen result,
``pre-render`` puts the notebook of that execution in place: before a notebook is put back
as committed, the notebook Quarto executed is kept in ``.book-cache/quarto/executed/`` (only
when Quarto's frozen result was made from exactly that file). A thawed lesson with no such
notebook is executed again, so that the PDF never shows a lesson without its outputs; and
``post-render`` removes a PDF rendered while a lesson had none (the PDF rendered alone,
``quarto render --to typst``, after the lesson's key changed) and fails the render.
``post-render`` also removes the widget loaders Quarto adds to pages from a CDN
(:mod:`bookkit.offline`) and fails the render if any page or stylesheet still refers to the
network.

A pending key also vouches for a frozen result written after it was computed (a chapter that
executed in a render which failed later, in another chapter), provided no file of helpers/,
runtime/, data/ or `_quarto.yml` was modified since: its inputs are then the ones the key
describes, so it is kept rather than executed once more.

Keys live in ``.book-cache/quarto/`` (ignored by git), next to the build's own cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # run by Quarto as a script: import the project's packages
    sys.path[:] = [p for p in sys.path
                   if Path(p or ".").resolve() != Path(__file__).resolve().parent]
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bookkit.cache import (CACHE_DIR_NAME, KeyInputError, LessonKey, ProjectInputs,  # noqa: E402
                           explain, has_code, input_files, now_text, read_json, server_reason)
from bookkit.notebooks import offer_notebooks  # noqa: E402
from bookkit.offline import make_pages_offline, remote_assets_in_site  # noqa: E402
from runtime.files import publishable, write_json_atomic, write_text_atomic  # noqa: E402

PREFIX = "[freeze]"

#: What pre-render says of a lesson that a render of some files names: Quarto's
#: ``quarto render FILE`` executes such a file whatever its frozen result, while a
#: preview's re-render uses the freezer, and pre-render cannot tell the two apart.
RENDERED_ALONE = ("rendered on its own: `quarto render FILE` executes it whether or not "
                  "its frozen result holds (a preview's re-render uses the frozen result)")


def freeze_folder(root: Path, source: str) -> Path:
    """Quarto's `_freeze/` folder of a chapter: ``_freeze/lessons/01-x`` for
    ``lessons/01-x.ipynb``."""
    return root / "_freeze" / Path(source).with_suffix("")


def hidden_freeze_folder(root: Path, source: str) -> Path:
    """Quarto's own copy under `.quarto/_freeze/`, which it thaws from when freeze is off."""
    return root / ".quarto" / "_freeze" / Path(source).with_suffix("")


def frozen_result(root: Path, source: str) -> Path:
    return freeze_folder(root, source) / "execute-results" / "html.json"


def _keys_folder(root: Path) -> Path:
    return root / CACHE_DIR_NAME / "quarto"


def _executed_folder(root: Path) -> Path:
    """The notebooks as Quarto executed them, outputs and all (for the PDF's render)."""
    return _keys_folder(root) / "executed"


def _chapters_with_code(root: Path):
    """(chapter, notebook) for every listed chapter that exists and has code to execute."""
    from bookkit.build import load_book_config, read_chapter

    config = load_book_config(root)
    notebooks = [(c, read_chapter(root, c)) for c in config.chapters if (root / c.source).is_file()]
    return config, [(chapter, nb) for chapter, nb in notebooks if has_code(nb)]


def _untouched_since(root: Path, moment: float) -> bool:
    """Whether no file of the lessons' packages, the data or `_quarto.yml` was modified after
    ``moment``: a frozen result written after a pending key was computed was made from the
    inputs that key describes only if none of them changed in between (an edit undone
    meanwhile would give the same key for different output)."""
    mtimes = input_files(root, lambda path: path.stat().st_mtime)  # the files the key hashes
    return all(t < moment for t in [*mtimes.values(), (root / "_quarto.yml").stat().st_mtime])


def _result_digest(frozen: object) -> str | None:
    """A digest of a frozen result's ``result`` (what Quarto thaws), whatever its hash."""
    if not isinstance(frozen, dict) or "result" not in frozen:
        return None
    return hashlib.sha256(json.dumps(frozen["result"], sort_keys=True,
                                     ensure_ascii=False).encode("utf-8")).hexdigest()


def keep_executed(root: Path, source: str, executed: str) -> None:
    """Keep the notebook text ``executed`` (with outputs) of ``source`` for later PDF renders,
    if Quarto's frozen result was made from exactly it."""
    frozen = read_json(frozen_result(root, source))
    if not isinstance(frozen, dict) or frozen.get("hash") != _quarto_hash(executed):
        return
    target = _executed_folder(root) / source
    write_text_atomic(target, executed)
    write_json_atomic(target.with_name(target.name + ".json"), {"result": _result_digest(frozen)})


def executed_notebook(root: Path, source: str) -> str | None:
    """The kept notebook of the execution that ``source``'s frozen result holds, if any:
    made by that execution, with the cells of the notebook as it is now."""
    kept = _executed_folder(root) / source
    record = read_json(kept.with_name(kept.name + ".json"))
    if (not kept.is_file() or not isinstance(record, dict)
            or record.get("result") != _result_digest(read_json(frozen_result(root, source)))):
        return None
    text = kept.read_text(encoding="utf-8")
    committed = (root / source).read_text(encoding="utf-8")
    return text if _cell_sources(text) == _cell_sources(committed) else None


def _cell_sources(text: str) -> list[tuple[str, str]] | None:
    """(cell type, source) of every cell of a notebook's JSON text; None if it is not one."""
    try:
        cells = json.loads(text).get("cells", [])
    except (ValueError, AttributeError):
        return None
    return [(c.get("cell_type"), "".join(c.get("source", []))) for c in cells]


def _quarto_hash(text: str) -> str:
    """The hash Quarto's freeze keeps of a chapter: md5 of its text with LF line ends.

    Quarto's ``freeze: auto`` thaws a result only when the hash it stored (``"hash"`` in
    ``html.json``) is that of the chapter's file as it is now.
    """
    return hashlib.md5(text.replace("\r\n", "\n").replace("\r", "\n").encode("utf-8")).hexdigest()


def _quarto_thaws(root: Path, source: str, result: Path) -> bool:
    """Whether Quarto will use the frozen ``result`` of ``source`` rather than execute it."""
    frozen = read_json(result)  # None when there is none
    return isinstance(frozen, dict) and frozen.get("hash") == _quarto_hash(
        (root / source).read_text(encoding="utf-8"))


def _rehash_frozen(root: Path, source: str, was: str, now: str) -> None:
    """Point Quarto's frozen result of ``source``, made for the notebook text ``was``, at
    the text ``now`` (the committed notebook, or the executed one put in its place)."""
    for folder in (freeze_folder(root, source), hidden_freeze_folder(root, source)):
        result = folder / "execute-results" / "html.json"
        frozen = read_json(result)
        if isinstance(frozen, dict) and frozen.get("hash") == _quarto_hash(was):
            write_json_atomic(result, {**frozen, "hash": _quarto_hash(now)}, indent=2,
                              sort_keys=False)


def restore_notebooks(root: Path, say=print) -> list[str]:
    """Put back every lesson notebook kept by :func:`keep_notebooks`, outputs and all.

    A notebook is put back only where Quarto changed nothing but outputs and metadata
    (the cells' sources are the kept ones); one edited meanwhile is left as it is. Returns
    the chapters put back.
    """
    folder = _keys_folder(root) / "notebooks"
    restored = []
    for kept in sorted(folder.rglob("*.ipynb")) if folder.is_dir() else []:
        source = kept.relative_to(folder).as_posix()
        original = kept.read_text(encoding="utf-8")
        current = (root / source).read_text(encoding="utf-8") if (root / source).is_file() else None
        if current is not None and current != original:
            if _cell_sources(current) == _cell_sources(original):
                keep_executed(root, source, current)
                write_text_atomic(root / source, original)
                _rehash_frozen(root, source, current, original)
                restored.append(source)
            else:
                say(f"{PREFIX} {source}: edited during the render; left as it is")
        kept.unlink()
    return restored


def keep_notebooks(root: Path, sources: list[str]) -> None:
    """Keep a copy of each `.ipynb` chapter, so that the outputs Quarto writes go again."""
    for source in (s for s in sources if s.endswith(".ipynb")):
        kept = _keys_folder(root) / "notebooks" / source
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / source, kept)


def pre_render(root: Path, say=print) -> int:
    """Delete the frozen result of every chapter whose key changed; keep the keys as pending."""
    if left := restore_notebooks(root, say):  # from a render that failed before post-render
        say(f"{PREFIX} put back {len(left)} notebook(s) a failed render had written outputs into")
    config, chapters = _chapters_with_code(root)
    if not chapters:
        return 0
    keep_notebooks(root, [chapter.source for chapter, _ in chapters])
    try:
        inputs = ProjectInputs.collect(root, config.kernel)
    except KeyInputError as error:
        say(f"{PREFIX} cannot compute the lessons' keys: {error}")
        return 1
    keys = _keys_folder(root)
    recorded = read_json(keys / "recorded.json") or {}
    earlier_pending = read_json(keys / "pending.json") or {}
    pending, started, server, alone = {}, time.time(), server_reason(), _rendered_alone()
    for chapter, nb in chapters:
        source, key = chapter.source, LessonKey.compute(nb, inputs)
        result, old = frozen_result(root, source), recorded.get(source)
        waiting = earlier_pending.get(source)
        kept = "frozen result kept: inputs unchanged"
        if server is not None:
            reasons = [server]  # no key can vouch for a server's replies: always execute
        elif old and old.get("key") == key.key:
            reasons = []
        elif (waiting and waiting.get("key") == key.key and result.is_file()
              and result.stat().st_mtime >= waiting.get("computed", float("inf"))
              and _untouched_since(root, waiting["computed"])):
            # executed under this key in a render that failed later
            recorded[source], reasons = waiting, []
            kept = "frozen result kept: it was made with these inputs"
        else:
            reasons = explain(old, key)
        thaws = not reasons and _quarto_thaws(root, source, result)
        executed = executed_notebook(root, source) if thaws else None
        if thaws and executed is None:  # thawed for the website: no outputs in the PDF
            reasons = ["no notebook of its execution is kept for the PDF"]
        if reasons:
            removed = "frozen result removed, " if freeze_folder(root, source).exists() else ""
            state = f"{removed}will execute: {'; '.join(reasons)}"
            # Quarto's hidden copy goes too: a render with freeze off thaws from it.
            for frozen in (freeze_folder(root, source), hidden_freeze_folder(root, source)):
                shutil.rmtree(frozen, ignore_errors=True)
        elif not result.is_file():
            state = "no frozen result yet"
        elif not thaws:
            # The key holds, but Quarto's freeze compares the notebook file itself: any
            # edit of it (prose included) makes Quarto execute the lesson, and only it.
            state = ("will execute: notebook text changed; Quarto's freeze re-executes a lesson "
                     "on any edit of its file")
        else:
            # The executed notebook in place of the committed one, and Quarto's frozen result
            # pointed at it: Quarto thaws the HTML and renders the PDF from these outputs
            # (post-render puts the committed notebook back).
            _rehash_frozen(root, source, (root / source).read_text(encoding="utf-8"), executed)
            write_text_atomic(root / source, executed)
            state = kept
        if alone is not None and not reasons:
            state = (RENDERED_ALONE if source in alone
                     else "not rendered this time (a render of some files only)")
        say(f"{PREFIX} {source}: {state}")
        pending[source] = {**key.record(), "computed": started, "computed_at": now_text()}
    write_json_atomic(keys / "recorded.json", recorded)
    write_json_atomic(keys / "pending.json", pending)
    return 0


def _listed(name: str) -> list[str] | None:
    """The files Quarto lists for a project script in ``QUARTO_<name>``, or in the file that
    ``QUARTO_USE_FILE_FOR_<name>`` names; None when it lists none."""
    listing = os.environ.get(f"QUARTO_USE_FILE_FOR_{name}")
    text = (Path(listing).read_text(encoding="utf-8") if listing and Path(listing).is_file()
            else os.environ.get(f"QUARTO_{name}"))
    return None if text is None else [line.strip() for line in text.splitlines() if line.strip()]


def _rendered_alone() -> set[str] | None:
    """The chapters of a render of some files only; None when Quarto renders them all
    (``QUARTO_PROJECT_RENDER_ALL=1``) or does not say (not run by Quarto)."""
    listed = _listed("PROJECT_INPUT_FILES")
    all_files = os.environ.get("QUARTO_PROJECT_RENDER_ALL") == "1" or listed is None
    return None if all_files else {Path(line).as_posix() for line in listed}


def post_render(root: Path, say=print) -> int:
    """Put the notebooks back, make the pages offline, record the rendered chapters' keys.

    Returns 1 (which fails the render) when a page or stylesheet still refers to the
    network, naming each file and address, or when the PDF would show a lesson without
    its outputs (:func:`_pdf_without_outputs`), which it removes.
    """
    if restored := restore_notebooks(root, say):
        say(f"{PREFIX} put back {len(restored)} notebook(s) as committed (Quarto had written "
            "outputs into them)")
    outputs = [root / path for path in _listed("PROJECT_OUTPUT_FILES") or []]
    if _pdf_without_outputs(root, restored,
                            [p for p in outputs if p.suffix == ".pdf" and p.is_file()], say):
        return 1
    make_pages_offline([path for path in outputs if path.suffix == ".html" and path.is_file()])
    output_dir = root / (os.environ.get("QUARTO_PROJECT_OUTPUT_DIR") or "_book")
    offer_notebooks(root, output_dir, [c.source for c, _ in _chapters_with_code(root)[1]])
    _record_keys(root, output_dir, {os.path.normpath(p) for p in outputs}, say)
    if output_dir.is_dir():
        publishable(output_dir)
    if remote := remote_assets_in_site(output_dir):  # none when there is no site
        say(f"{PREFIX} the site would load from the network, which it must not:")
        for problem in remote:
            say(f"{PREFIX}   {problem}")
    return 1 if remote else 0


def _pdf_without_outputs(root: Path, restored: list[str], pdfs: list[Path], say) -> bool:
    """Whether this render wrote a PDF in which a lesson has no outputs; if so, remove it.

    The PDF (Typst) never executes a lesson: it shows the outputs that the notebook file
    holds during the render, those Quarto wrote into it for HTML or the executed notebook
    pre-render put in place. Every such notebook is put back afterwards, so a rendered
    lesson that was not put back had none: a lesson whose key changed, in a render of the
    PDF alone (``quarto render --to typst``).
    """
    alone = _rendered_alone()
    bare = [chapter.source for chapter, _ in (_chapters_with_code(root)[1] if pdfs else [])
            if chapter.source not in restored and (alone is None or chapter.source in alone)]
    if not bare:
        return False
    for pdf in pdfs:
        pdf.unlink()
    say(f"{PREFIX} removed {', '.join(p.relative_to(root).as_posix() for p in pdfs)}: it would "
        f"show {', '.join(bare)} without outputs. The PDF shows the outputs of the HTML render's "
        "execution, and this render executed none; render the HTML too (quarto render)")
    return True


def _record_keys(root: Path, output_dir: Path, outputs: set[str], say) -> None:
    """Record the pending key of every chapter whose page this (successful) render wrote
    (``outputs``: normalised absolute paths)."""
    folder = _keys_folder(root)
    pending = read_json(folder / "pending.json") or {}
    recorded = read_json(folder / "recorded.json") or {}
    done = [source for source in pending
            if os.path.normpath(output_dir / Path(source).with_suffix(".html")) in outputs]
    if not done:
        return
    recorded.update({source: pending.pop(source) for source in done})
    write_json_atomic(folder / "recorded.json", recorded)
    write_json_atomic(folder / "pending.json", pending)
    say(f"{PREFIX} recorded the keys of {len(done)} rendered chapter(s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bookkit/freeze.py", description="Quarto's "
                                     "pre-render and post-render steps (see _quarto.yml).")
    parser.add_argument("step", choices=["pre-render", "post-render"])
    step = parser.parse_args(argv).step
    from bookkit import skip_unused_schema_grammars

    skip_unused_schema_grammars()
    root = Path.cwd()  # Quarto runs project scripts in the project folder
    if not (root / "_quarto.yml").is_file():
        print(f"{PREFIX} {root} holds no _quarto.yml; run this from the project folder",
              file=sys.stderr)
        return 2
    say = lambda line: print(line, flush=True)  # noqa: E731
    try:
        return pre_render(root, say) if step == "pre-render" else post_render(root, say)
    except ImportError as error:
        say(f"{PREFIX} {sys.executable} cannot import {error.name}: Quarto runs this script with "
            "QUARTO_PYTHON (else python3 on PATH), which must be the project's Python, e.g. "
            "QUARTO_PYTHON=.venv/bin/python quarto render")
        return 1


if __name__ == "__main__":
    sys.exit(main())
