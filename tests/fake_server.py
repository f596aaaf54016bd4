"""A small real HTTP server on 127.0.0.1 that answers the OpenAI chat API badly on purpose.

No real engine can be made to stall, drop ``choices`` or hide a cap on demand, so the
bad-server tests talk to this one over a real socket. It lists one model, can claim to
be an engine (``/version`` for vLLM, ``/props`` for llama.cpp's ``llama-server``,
``/openapi.json`` for llama-cpp-python), records every request body, and answers chat
completions as its ``behaviour`` says. A port with nothing listening (connection
refused) is :func:`runtime.llama_server.free_port`.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def good_reply(text="Answer: NOT IN HANDBOOK\nSources: none", finish="stop",
               prompt_tokens=200, completion_tokens=9):
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


class FakeServer:
    """``with FakeServer(behaviour) as fake: fake.url`` -> ``http://127.0.0.1:N/v1``.

    ``behaviour`` is a function ``(request_body) -> (status, body or bytes, delay_s)`` or
    one of the names in :data:`BEHAVIOURS` (the same reply to every request). ``engine`` is
    "llama-cpp-python", "vLLM", "llama.cpp" or None (says nothing about itself).
    ``model_root`` is the path vLLM reports as the model's ``root``; ``model_path`` the one
    llama.cpp's ``/props`` reports.
    """

    def __init__(self, behaviour, engine: str | None = "llama-cpp-python",
                 model_id: str = f"/models/{SMOL_FILE}", model_root: str | None = None,
                 model_path: str | None = None):
        self.behaviour = behaviour if callable(behaviour) else (
            lambda body, fixed=BEHAVIOURS[behaviour]: fixed)
        self.engine, self.model_id = engine, model_id
        # vLLM's "root" (the path it loaded the model from); llama-server's /props "model_path".
        self.model_root, self.model_path = model_root, model_path
        self.requests: list[dict] = []
        self.in_flight = self.max_in_flight = 0
        self._lock, self._stop = threading.Lock(), threading.Event()

    def __enter__(self) -> "FakeServer":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def _send(self, status, body):
                payload = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                model = {"id": fake.model_id, "object": "model", "owned_by": "test",
                         **({"root": fake.model_root} if fake.model_root else {})}
                found = {
                    ("/v1/models", fake.engine): {"object": "list", "data": [model]},
                    ("/version", "vLLM"): {"version": "0.0-test"},
                    ("/props", "llama.cpp"): {"build_info": "b0000-test",
                                              "model_path": fake.model_path or fake.model_id},
                    ("/openapi.json", "llama-cpp-python"): {
                        "info": {"title": "🦙 llama.cpp Python API", "version": "0.0-test"}},
                }.get((self.path, fake.engine))
                self._send(200, found) if found else self._send(404, {"detail": "Not Found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    fake.requests.append(body)
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    status, reply, delay = fake.behaviour(body)
                    # Sleep in small steps so that stopping the server ends a stall.
                    deadline = time.monotonic() + delay
                    while time.monotonic() < deadline and not fake._stop.is_set():
                        time.sleep(0.02)
                    if not fake._stop.is_set():
                        self._send(status, reply)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


#: The fixed replies of the named behaviours: (status, body or bytes, delay_s).
BEHAVIOURS = {
    "ok": (200, good_reply(), 0.0),
    "http_500": (500, {"error": {"message": "model crashed"}}, 0.0),
    "http_404": (404, {"error": {"message": "no such route"}}, 0.0),
    "no_choices": (200, {k: v for k, v in good_reply().items() if k != "choices"}, 0.0),
    "empty_choices": (200, {**good_reply(), "choices": []}, 0.0),
    "empty_message": (200, good_reply(text=""), 0.0),
    "null_message": (200, good_reply(text=None), 0.0),
    "not_json": (200, b"<html>proxy error</html>", 0.0),
    "no_usage": (200, {k: v for k, v in good_reply().items() if k != "usage"}, 0.0),
    "no_finish_reason": (200, good_reply(finish=None), 0.0),
    # Cut off at 48 tokens, yet claims it stopped at the end-of-sequence token.
    "hidden_cap": (200, good_reply(text="Answer: The stipend is paid", finish="stop",
                                   completion_tokens=48), 0.0),
    # Cut off by a server-side limit of 20 tokens that the request never set.
    "server_cap": (200, good_reply(text="Answer: The stipend is paid", finish="length",
                                   completion_tokens=20), 0.0),
    "over_cap": (200, good_reply(completion_tokens=60), 0.0),
    "stall": (200, good_reply(), 30.0),
}


def record(url, transcript, *options, what="reader"):
    """``python -m runtime record WHAT`` of SmolLM2 from the server at ``url`` into
    ``transcript``, with ``options``, as an author runs it; its exit status."""
    from runtime.cli import main

    return main(["record", what, "--reader", "smollm2_135m_instruct", "--server", url,
                 "--transcript", str(transcript), *options])


def question_of(inputs):
    """A function from a request body to the question whose prompt it carries, looked up
    in ``inputs`` (question_id and messages), as the test knows it: the question id travels
    beside the prompt, so the server is told it, never reads it out of the text."""
    known = {json.dumps(m, sort_keys=True): q for q, m in zip(inputs["question_id"], inputs["messages"])}
    return lambda body: known.get(json.dumps(body.get("messages"), sort_keys=True), "?")


def echo_question(inputs, delays: dict[str, float] | None = None, fail: set[str] | None = None):
    """A behaviour that answers each prompt of ``inputs`` with its question's ID, after a
    per-question delay, and with HTTP 500 for the questions in ``fail``."""
    delays, fail, question = delays or {}, fail or set(), question_of(inputs)

    def behaviour(body):
        qid = question(body)
        if qid in fail:
            return 500, {"error": {"message": f"failed on {qid}"}}, delays.get(qid, 0.0)
        return 200, good_reply(text=f"Answer: {qid}\nSources: none"), delays.get(qid, 0.0)

    return behaviour
