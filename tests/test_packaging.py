"""pyproject.toml, environment.yml and README.md name the same packages and pins, and the
lesson notebooks are committed without outputs."""
from __future__ import annotations

import json
import re
import tomllib

import pytest

from helpers.paths import PROJECT_ROOT

PYPROJECT = PROJECT_ROOT / "pyproject.toml"
ENVIRONMENT = PROJECT_ROOT / "environment.yml"
README = PROJECT_ROOT / "README.md"
MAKEFILE = PROJECT_ROOT / "Makefile"

# Entries of environment.yml that are tools rather than Python packages of the book.
CONDA_TOOLS = {"python", "pip", "quarto"}

# Extras of pyproject.toml that only benchmarks/ needs (comparators such as bm25s).
# environment.yml is the book's environment, so it leaves them out; `make benchmarks`
# installs them, and nothing the book runs may import them.
BENCHMARK_EXTRAS = {"bench"}

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;,]+)")
_CONDA_DEP = re.compile(r"^\s{2}-\s+([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:=\s*([^\s#]+))?\s*(?:#.*)?$")
_PIP_DEP = re.compile(r"^\s{6}-\s+([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s#]+)\s*(?:#.*)?$")
_PIN_IN_TEXT = re.compile(r"(?<![\w.-])([A-Za-z][A-Za-z0-9._-]*)==([0-9][A-Za-z0-9.+!-]*[A-Za-z0-9])")


def _name(name: str) -> str:
    """PEP 503 normalised name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _require(path):
    if not path.exists():
        pytest.fail(
            f"{path.name} is missing: the project root must hold pyproject.toml, "
            "environment.yml and README.md naming the same packages"
        )
    return path.read_text(encoding="utf-8")


# Extras that environment.yml leaves to a comment: built from source, for tests only.
BUILT_FROM_SOURCE_EXTRAS = {"test-server"}


def _pyproject_pins(extras: str = "all") -> dict[str, str]:
    """Pinned requirements. ``extras``: "all"; "book" (the book's environment: no benchmark
    extra and no extra built from source); "bench" (the benchmark extras alone)."""
    project = tomllib.loads(_require(PYPROJECT))["project"]
    requirements = list(project["dependencies"]) if extras != "bench" else []
    for name, extra in project.get("optional-dependencies", {}).items():
        if extras == "all":
            wanted = True
        elif extras == "bench":
            wanted = name in BENCHMARK_EXTRAS
        else:
            wanted = name not in BENCHMARK_EXTRAS | BUILT_FROM_SOURCE_EXTRAS
        if wanted:
            requirements.extend(extra)
    pins = {}
    for requirement in requirements:
        match = _REQUIREMENT.match(requirement)
        assert match, f"pyproject.toml: {requirement!r} is not pinned with =="
        pins[_name(match.group(1))] = match.group(2)
    return pins


def _environment_pins() -> dict[str, str | None]:
    """Conda and pip dependencies of environment.yml (a plain two-level list)."""
    text = _require(ENVIRONMENT)
    pins: dict[str, str | None] = {}
    in_dependencies = False
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            in_dependencies = line.startswith("dependencies:")
            continue
        if not in_dependencies:
            continue
        pip = _PIP_DEP.match(line)
        conda = _CONDA_DEP.match(line)
        if pip:
            pins[_name(pip.group(1))] = pip.group(2)
        elif conda:
            pins[_name(conda.group(1))] = conda.group(2)
        elif line.strip() in ("- pip:", "- -e ."):
            continue
        else:
            pytest.fail(f"environment.yml: cannot read dependency line {line!r}")
    return pins


def _readme_table_packages() -> set[str]:
    """Package names in the README's "Packages" table (second column)."""
    text = _require(README)
    match = re.search(r"^## Packages\s*$(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, "README.md has no '## Packages' section listing the packages"
    names = set()
    for line in match.group(1).splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 2 or set(cells[1]) <= set("-: ") or cells[0] == "purpose":
            continue
        for item in re.sub(r"\([^)]*\)", "", cells[1]).split(","):
            if item.strip():
                names.add(_name(item.strip().strip("`")))
    assert names, "README.md's Packages table lists no packages"
    return names


def _makefile_no_deps_pins() -> dict[str, str]:
    """Wheels the Makefile installs with --no-deps, outside pyproject.toml."""
    pins = {}
    for line in _require(MAKEFILE).splitlines():
        if "pip install" in line and "--no-deps" in line:
            for name, version in _PIN_IN_TEXT.findall(line):
                pins[_name(name)] = version
    return pins


def test_environment_yml_pins_the_pyproject_packages():
    pyproject = _pyproject_pins("book")
    environment = _environment_pins()
    packages = {name: version for name, version in environment.items() if name not in CONDA_TOOLS}
    assert set(packages) == set(pyproject), (
        f"only in environment.yml: {sorted(set(packages) - set(pyproject))}; "
        f"only in pyproject.toml: {sorted(set(pyproject) - set(packages))}"
    )
    different = {n: (pyproject[n], packages[n]) for n in pyproject if pyproject[n] != packages[n]}
    assert not different, f"versions differ (pyproject, environment.yml): {different}"


def test_environment_yml_python_matches_requires_python():
    project = tomllib.loads(_require(PYPROJECT))["project"]
    python = _environment_pins().get("python")
    assert python, "environment.yml must pin python"
    assert project["requires-python"] == f">={python},<3.{int(python.split('.')[1]) + 1}"


def test_readme_names_every_package():
    text = _require(README).lower()
    expected = set(_pyproject_pins()) | set(_makefile_no_deps_pins())
    missing = sorted(name for name in expected if not re.search(
        rf"(?<![\w-]){re.escape(name)}(?![\w-])", text))
    assert not missing, f"README.md does not name: {missing}"


def test_readme_table_names_only_declared_packages():
    declared = set(_pyproject_pins()) | set(_environment_pins()) | set(_makefile_no_deps_pins())
    unknown = sorted(_readme_table_packages() - declared)
    assert not unknown, (
        f"README.md's Packages table names {unknown}, which neither pyproject.toml, "
        "environment.yml nor the Makefile installs (use the installed name)"
    )


def test_pins_written_in_readme_and_makefile_agree():
    declared = _pyproject_pins() | _makefile_no_deps_pins()
    for path in (README, MAKEFILE, ENVIRONMENT):
        for name, version in _PIN_IN_TEXT.findall(_require(path)):
            name = _name(name)
            if name in declared:
                assert version == declared[name], f"{path.name} pins {name}=={version}, " \
                    f"but the project pins {declared[name]}"


@pytest.mark.parametrize("package", ["selenium", "jupyterlab"])
def test_what_the_browser_checks_drive_is_pinned_at_the_installed_version(package):
    """tests/labcheck.py relies on JupyterLab 4's page and tests/pagecheck.py on selenium's
    API: the test extra pins both, at the versions this environment runs."""
    import importlib.metadata

    project = tomllib.loads(_require(PYPROJECT))["project"]
    matches = [_REQUIREMENT.match(r) for r in project["optional-dependencies"]["test"]]
    pins = {_name(m.group(1)): m.group(2) for m in matches if m}
    assert package in pins, f"the test extra of pyproject.toml does not pin {package}"
    assert pins[package] == importlib.metadata.version(package)


def test_the_built_from_source_extras_are_documented_in_environment_yml():
    text = _require(ENVIRONMENT)
    project = tomllib.loads(_require(PYPROJECT))["project"]
    for name in BUILT_FROM_SOURCE_EXTRAS:
        for requirement in project["optional-dependencies"][name]:
            assert requirement in text, f"environment.yml does not mention {requirement}"
    assert "CMAKE_ARGS" in text


def test_the_built_from_source_extras_go_into_an_environment_of_their_own():
    """llama.cpp's server is installed into .venv-server/ (scripts/install-llama-server.sh),
    never with the book's extras: the book's environment is in every lesson's key
    (tests/test_server_environment.py checks the install itself)."""
    makefile = _require(MAKEFILE)
    installed = [set(extras.split(",")) for extras in
                 re.findall(r"pip install .*-e '\.\[([^\]]*)\]'", makefile)]
    assert installed, "the Makefile never installs the book's extras"
    assert not any(extras & BUILT_FROM_SOURCE_EXTRAS for extras in installed), \
        "the Makefile installs a built-from-source extra into the book's environment"
    assert re.search(r"^SERVER_VENV \?= \$\(VENV\)-server$", makefile, flags=re.M), \
        "the Makefile does not name the server's environment (SERVER_VENV ?= $(VENV)-server)"
    assert "scripts/install-llama-server.sh $(PY) $(SERVER_VENV)" in makefile, \
        "the Makefile does not install the server into $(SERVER_VENV)"
    for path in (README, ENVIRONMENT):
        assert ".venv-server" in _require(path), f"{path.name} does not say where the server goes"


def test_the_no_deps_wheel_is_documented_in_environment_yml():
    text = _require(ENVIRONMENT)
    for name, version in _makefile_no_deps_pins().items():
        assert f"{name}=={version}" in text, f"environment.yml does not mention {name}=={version}"


def test_benchmark_extras_stay_out_of_the_book():
    """bm25s and the like: declared, installed by `make benchmarks`, imported by no part
    of the book and absent from environment.yml."""
    project = tomllib.loads(_require(PYPROJECT))["project"]
    assert BENCHMARK_EXTRAS <= set(project.get("optional-dependencies", {})), \
        f"pyproject.toml has no extra named {sorted(BENCHMARK_EXTRAS)}"
    bench = _pyproject_pins("bench")
    assert bench, "the benchmark extra pins nothing"
    assert not set(bench) & set(_environment_pins()), \
        f"environment.yml lists benchmark-only packages {sorted(set(bench) & set(_environment_pins()))}"
    installed = [set(extras.split(",")) for extras in
                 re.findall(r"pip install .*-e '\.\[([^\]]*)\]'", _require(MAKEFILE))]
    book = [extras for extras in installed if "test" in extras]
    assert book, "the Makefile never installs the book's extras"
    assert not any(extras & BENCHMARK_EXTRAS for extras in book), \
        "the book's install (make book, make test) includes a benchmark-only extra"
    assert BENCHMARK_EXTRAS in installed, "the Makefile never installs the benchmark extra"
    modules = {_name(name).replace("-", "_") for name in bench}
    pattern = re.compile(rf"^\s*(?:import|from)\s+({'|'.join(map(re.escape, modules))})\b",
                         flags=re.M)
    sources = list((PROJECT_ROOT / "helpers").rglob("*.py")) + list(
        (PROJECT_ROOT / "tests").glob("*.py"))
    for path in sources:
        match = pattern.search(path.read_text(encoding="utf-8"))
        assert not match, f"{path.relative_to(PROJECT_ROOT)} imports {match.group(1)}, " \
            "a benchmark-only package"
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            match = pattern.search("".join(cell["source"]))
            assert not match, f"{path.name} imports {match.group(1)}, a benchmark-only package"


# Distributions that helpers/ imports without pinning them, each installed as a requirement
# of a pinned package (checked below through the installed packages' metadata). Anything
# else that helpers/ imports must be pinned in pyproject.toml.
UNPINNED_IMPORTS = {
    "ipython": "comes with ipykernel",
    "huggingface-hub": "comes with transformers",
    "jinja2": "comes with nbconvert",
    "jupyter-core": "comes with nbclient",
    "traitlets": "comes with nbclient",
    "pyzmq": "comes with ipykernel",
}
# Import names whose distribution may not be installed here (an extra built from source).
IMPORT_TO_DISTRIBUTION = {"llama_cpp": "llama-cpp-python"}


def _imported_distributions() -> dict[str, str]:
    """Every third-party distribution that a module of helpers/ imports, with one importer."""
    import ast
    import importlib.metadata
    import sys

    owners = importlib.metadata.packages_distributions()
    found = {}
    for path in sorted((PROJECT_ROOT / "helpers").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == "helpers":
                    continue
                dists = owners.get(top) or [IMPORT_TO_DISTRIBUTION.get(top, top)]
                found.setdefault(_name(dists[0]), path.relative_to(PROJECT_ROOT).as_posix())
    return found


def _requirement_closure(roots: set[str]) -> set[str]:
    """``roots`` and everything they require, as installed here (extras' requirements aside)."""
    import importlib.metadata

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
        for requirement in requires:
            if "extra ==" not in requirement:
                todo.append(_name(re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0]))
    return seen


def test_every_package_the_helpers_import_is_pinned():
    """A module the helpers import directly (safetensors, say) is pinned, not left to chance."""
    pins = _pyproject_pins("all")
    imported = _imported_distributions()
    unpinned = {name: where for name, where in imported.items()
                if name not in pins and name not in UNPINNED_IMPORTS}
    assert not unpinned, "imported by helpers/ but not pinned in pyproject.toml: " + ", ".join(
        f"{name} ({where})" for name, where in sorted(unpinned.items()))
    reachable = _requirement_closure(set(pins))
    for name, why in UNPINNED_IMPORTS.items():
        assert name in reachable, f"{name} is said to be installed because it {why}, but no pinned package requires it"


# --- notebooks ------------------------------------------------------------------------

NOTEBOOKS = sorted((PROJECT_ROOT / "lessons").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebooks_have_no_outputs_or_execution_counts(path):
    """Committed without outputs, and opening with their front matter in a raw cell."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    first = notebook["cells"][0]
    assert first["cell_type"] == "raw" and "".join(first["source"]).startswith("---"), \
        f"{path.name}: the first cell is not the front matter"
    with_outputs, with_counts = [], []
    for number, cell in enumerate(notebook["cells"], start=1):
        if cell["cell_type"] != "code":
            continue
        if cell.get("outputs"):
            with_outputs.append(number)
        if cell.get("execution_count") is not None:
            with_counts.append(number)
    assert not with_outputs, f"{path.name}: cells {with_outputs} have outputs; strip them"
    assert not with_counts, f"{path.name}: cells {with_counts} have execution counts"
    assert "widgets" not in notebook.get("metadata", {}), f"{path.name}: widget state saved"
