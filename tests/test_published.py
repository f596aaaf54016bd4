"""What each engine publishes, read as a reader gets it: no path of the machine that built
it, every lesson's notebook beside its page, formulas as MathML, the pipeline figure with
its description, and in the PDF no path either."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from runtime.llama_server import free_port, stop_process
from runtime.paths import PROJECT_ROOT

LESSONS = sorted(p.relative_to(PROJECT_ROOT).as_posix()
                 for p in (PROJECT_ROOT / "lessons").glob("[0-9][0-9]-*.ipynb"))


def machine_paths(text: str, project: Path) -> list[str]:
    """Every place ``text`` names a folder of the machine: the project's own absolute path,
    the checkout's, the home folder, or a path under /root, /home, /tmp or /work."""
    places = {str(project), str(PROJECT_ROOT), str(Path.home())}
    found = [place for place in places if place != "/" and place in text]
    found += re.findall(r"(?<![\w.:/-])/(?:root|home|tmp|work)/[\w.-]+", text)
    return sorted(set(found))


@pytest.fixture(params=["nbclient", pytest.param("quarto", marks=pytest.mark.quarto)])
def site(request):
    return request.getfixturevalue(f"{request.param}_site")


@pytest.mark.slow
def test_no_page_names_a_path_of_the_machine(site):
    pages = [p for p in site.folder.rglob("*") if p.suffix in {".html", ".json", ".ipynb"}]
    assert len(pages) >= len(LESSONS)
    found = {p.relative_to(site.folder).as_posix(): machine_paths(p.read_text(errors="replace"),
                                                                 site.project) for p in pages}
    assert {page: paths for page, paths in found.items() if paths} == {}


#: A Python that every user can run (the project's own may live under a private home).
SYSTEM_PYTHON = Path("/usr/bin/python3")


@pytest.mark.slow
def test_a_web_server_running_as_another_user_serves_every_page(site):
    """The site is published with ordinary permissions (folders 0755, files 0644; the
    temporary folders and files a build writes through are 0700 and 0600), and a real web
    server that runs as ``nobody`` serves the front page and every lesson page."""
    wrong = {p.relative_to(site.folder).as_posix() or ".": oct(p.stat().st_mode & 0o777)
             for p in [site.folder, *site.folder.rglob("*")] if not p.is_symlink()
             and p.stat().st_mode & 0o777 != (0o755 if p.is_dir() else 0o644)}
    assert wrong == {}
    if os.geteuid() != 0 or not SYSTEM_PYTHON.exists():
        pytest.skip("serving as another user needs root and a system Python")
    public = Path(tempfile.mkdtemp(prefix="riverton-site-", dir="/tmp"))
    public.chmod(0o755)
    shutil.copytree(site.folder, public / "site")  # copies the permissions under test
    port = free_port()
    server = subprocess.Popen([str(SYSTEM_PYTHON), "-m", "http.server", str(port), "--bind",
                               "127.0.0.1", "--directory", str(public / "site")],
                              user="nobody", group="nogroup", cwd="/",
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        statuses = {}
        for page in ["index.html", *(Path(lesson).with_suffix(".html").as_posix() for lesson in LESSONS)]:
            for _ in range(50):  # the server needs a moment to listen
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/{page}", timeout=5) as response:
                        statuses[page] = response.status
                    break
                except urllib.error.HTTPError as error:
                    statuses[page] = error.code
                    break
                except OSError:
                    time.sleep(0.1)
        assert statuses == {page: 200 for page in statuses} and len(statuses) == len(LESSONS) + 1
    finally:
        stop_process(server, 10)
        shutil.rmtree(public, ignore_errors=True)


@pytest.mark.slow
def test_every_lesson_page_offers_its_notebook_as_committed(site):
    for lesson in LESSONS:
        page = (site.folder / lesson).with_suffix(".html").read_text(encoding="utf-8")
        assert re.search(rf'<a href="{re.escape(Path(lesson).name)}"[^>]*>Download this lesson.s notebook</a>',
                         page), lesson
        copy = json.loads((site.folder / lesson).read_text(encoding="utf-8"))
        assert copy == json.loads((site.project / lesson).read_text(encoding="utf-8"))  # the built copy
        assert not any(c.get("outputs") for c in copy["cells"] if c["cell_type"] == "code")


@pytest.mark.slow
def test_formulas_are_mathml_and_the_pipeline_figure_has_its_description(site):
    page = (site.folder / LESSONS[0]).with_suffix(".html").read_text(encoding="utf-8")
    maths = re.findall(r"<math\b[^>]*>.*?</math>", page, re.DOTALL)
    assert len(maths) >= 4, "lesson 1's idf, cosine and F1 formulas are not MathML"
    assert any("idf" in m or "<mi>N</mi>" in m for m in maths)
    assert "$$" not in re.sub(r"<(code|pre|script)\b.*?</\1>", "", page, flags=re.DOTALL)
    assert re.search(r'<img[^>]+alt="Seven boxes in a row joined by arrows: Question', page)


@pytest.mark.slow
@pytest.mark.quarto
def test_the_pdf_names_no_path_of_the_machine(quarto_site, poppler):
    import pdfcheck

    text = "\n".join(pdfcheck.pages(next(quarto_site.folder.glob("*.pdf"))))
    assert machine_paths(text, quarto_site.project) == []


def test_a_repository_address_adds_colab_and_binder_links(tmp_path):
    """The download link points at the notebook's copy, always made, wherever Quarto pointed
    it; ``book.repo-url``, set in one place, adds links to Colab and Binder, once."""
    from bookkit.notebooks import offer_notebooks

    notebook = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# x"]}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "lessons").mkdir()
    (tmp_path / "lessons" / "01-x.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    link = '<a href="01-x.ipynb">Download this lesson’s notebook</a>'
    for repo, expected in [(None, link + " to run it"),
                           ("https://github.com/owner/book", link + ' (or open it in <a href="'
                            "https://colab.research.google.com/github/owner/book/blob/main/"
                            'lessons/01-x.ipynb">Colab</a> or <a href="https://mybinder.org/v2/'
                            'gh/owner/book/main?labpath=lessons/01-x.ipynb">Binder</a>) to run it')]:
        (tmp_path / "_quarto.yml").write_text(
            "book:\n  title: x\n" + (f"  repo-url: {repo}\n" if repo else ""), encoding="utf-8")
        site = tmp_path / f"site-{bool(repo)}"
        (site / "lessons").mkdir(parents=True)
        quarto_link = link.replace("01-x.ipynb", "../lessons/01-x.html")  # as Quarto writes it
        (site / "lessons" / "01-x.html").write_text(f"<p>{quarto_link} to run it</p>", encoding="utf-8")
        for _ in range(2):  # a page a later render does not write is offered again
            offer_notebooks(tmp_path, site, ["index.qmd", "lessons/01-x.ipynb"])
        assert (site / "lessons" / "01-x.html").read_text(encoding="utf-8") == f"<p>{expected}</p>"
        assert json.loads((site / "lessons" / "01-x.ipynb").read_text()) == notebook
