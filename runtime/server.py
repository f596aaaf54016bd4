"""Server mode: the reader's prompts answered by an OpenAI-compatible serving engine.

Machinery behind lesson 1, "Ask the reader for two lines", where the reader-mode sentence
says which server, engine and model produced the replies. One server on a GPU (vLLM) or a
CPU (llama.cpp's server) can answer a whole class; each notebook sends its prompts there
through the ``openai`` client package, a few at a time, and gets them back in question
order.

What is checked before a prompt is sent:

- the server answers ``GET /v1/models``, and one of the models it lists is the reader's
  pinned model (by id, by GGUF file name, or by Hugging Face cache folder); any other model
  is refused with an error naming both. A model listed under the reader's name is refused
  too when the server reports that it serves a GGUF file other than the pinned one (or any
  GGUF file, for a reader pinned to its original weights), and an engine that serves GGUF
  files only (llama.cpp) is never taken for a reader pinned to its original weights;
- where the server reports a revision (a cache snapshot in its model path) or a file that
  this machine can read (a server on this machine), the revision or SHA-256 is compared
  with the pin; where it cannot, :attr:`ServerInfo.revision_note` says so, and the page
  prints it.

What is checked in each reply (:func:`check_reply`): choices, a non-empty message, a
``finish_reason`` of ``stop`` (the end-of-sequence token) or ``length`` (the token cap),
token counts in ``usage``, and that a cap the server did not report did not cut it off.
Every failure raises :class:`ServerError` naming the URL, the question and what was wrong.

Engines differ in three things the book cares about (:data:`ENGINES`): the name of the
repetition penalty, what that penalty looks at, and whether ``usage.completion_tokens``
counts the end-of-sequence token. The page states the difference instead of hiding it.
"""
from __future__ import annotations

import ipaddress
import json
import re
from collections import namedtuple
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from . import config
from .registry import ReaderError, ReaderSpec, file_sha256, package_gguf_path

#: Requests in flight at once from one notebook. Small, so that thirty students on one
#: server stay within what it batches well; raise it for a single author re-recording.
DEFAULT_CONCURRENCY = 4
MAX_CONCURRENCY = 32
#: Seconds one request may take, queueing on the server included.
DEFAULT_TIMEOUT = 60.0

_COMMIT = re.compile(r"(?<![0-9a-f])[0-9a-f]{40}(?![0-9a-f])")


class ServerError(ReaderError):
    """A server could not be used, or answered a question badly."""

    def __init__(self, url: str, question_id: str | None, problem: str):
        self.url, self.question_id, self.problem = url, question_id, problem
        where = f"question {question_id}" if question_id else "before any question was sent"
        super().__init__(f"reader server {url}, {where}: {problem}")


class WrongModelError(ServerError):
    """The server serves a model, or a revision, other than the one the registry pins."""


@dataclass(frozen=True)
class EngineFacts:
    """What the book knows about one serving engine's OpenAI-compatible API."""

    name: str
    #: The request field that carries the repetition penalty (what the penalty looks at,
    #: where it differs from transformers' prompt and whole reply, is said at ENGINES).
    penalty_parameter: str
    #: Whether ``usage.completion_tokens`` counts the end-of-sequence token
    #: (transformers' count, and the book's, do); None where the book does not know.
    counts_eos: bool | None
    #: The form of the reply grammar the engine enforces: "gbnf", "lark" or None.
    grammar: str | None
    #: How the grammar travels, or why it cannot.
    grammar_note: str
    #: Whether this book's tests run this engine (else its facts come from its documentation).
    tested_here: bool
    #: Whether the engine serves GGUF files only (llama.cpp does): whatever it serves is a
    #: GGUF conversion, never a checkpoint pinned in its original weights.
    gguf_only: bool = False


_GBNF_NOTE = ("GBNF in the request's `grammar` field; the answer is bounded in characters, "
              "not tokens")

ENGINES: dict[str, EngineFacts] = {facts.name: facts for facts in (
    # Its penalty looks at the reply's own tokens only (its last 64, `--last_n_tokens_size`),
    # never the prompt.
    EngineFacts("llama-cpp-python", "repeat_penalty", False, "gbnf", _GBNF_NOTE, True,
                gguf_only=True),
    # Its penalty looks at the last `repeat_last_n` tokens (64 by default), not the whole
    # prompt and reply.
    EngineFacts("llama.cpp", "repeat_penalty", True, "gbnf", _GBNF_NOTE, False, gguf_only=True),
    # Its penalty looks at what transformers' does.
    EngineFacts("vLLM", "repetition_penalty", True, "lark", "lesson 3's Lark grammar, token "
                "bound included, in `structured_outputs.grammar`; the server must run the "
                "guidance backend (`--structured-outputs-config.backend guidance`)", False),
)}

#: An engine that does not say what it is: the penalty goes by transformers' name (what it
#: looks at is not known).
UNKNOWN_ENGINE = EngineFacts(
    "an unidentified engine", "repetition_penalty", None, None, "the book does not know how "
    "this engine takes a grammar, so it cannot enforce the reply format there", False)


@dataclass(frozen=True)
class ModelMatch:
    """The listed model that is the reader's, and what could be checked about it."""

    #: The model id to send in requests, as the server lists it.
    served_model: str
    #: True: revision or file hash checked and equal; None: the server does not report one.
    revision_checked: bool | None
    revision_note: str
    #: What pages and transcripts call the served model: its id, except that a path on
    #: the server's disk is cut to its file name (see :func:`public_model_name`), with the
    #: SHA-256 where it was read.
    label: str


@dataclass(frozen=True)
class ServerInfo(ModelMatch):
    """What a server reported about itself, and what the book checked."""

    url: str
    engine: EngineFacts
    engine_version: str | None

    @property
    def engine_label(self) -> str:
        """``llama-cpp-python 0.3.36``, or the engine's name and "(version not reported)"."""
        return self.engine.name if self.engine is UNKNOWN_ENGINE else \
            f"{self.engine.name} {self.engine_version or '(version not reported)'}"

    @property
    def provenance(self) -> str:
        """The transcript's provenance for entries recorded from this server."""
        return f"server {self.engine_label}, serving {self.label}; {self.revision_note}"

    def sentence(self) -> str:
        """Where the replies came from, for the page."""
        return f"generated by {self.engine_label} serving `{self.label}` at `{self.url}`"


# ----------------------------------------------------------------------- configuration


def normalise_url(url: str) -> str:
    """The API base URL: scheme and host required, ``/v1`` added when no path is given."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ReaderError(f"reader server URL {url!r} is not an http(s) URL such as "
                          f"http://127.0.0.1:8000/v1 (set {config.READER_URL} or pass url=)")
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") or "/v1", "", ""))


def is_loopback(url: str) -> bool:
    """Whether ``url`` points at this machine (localhost or a loopback address)."""
    host = urlsplit(url).hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# ------------------------------------------------------------------ engine and model


def identify_engine(root: str, http) -> tuple[EngineFacts, str | None, dict]:
    """Ask the server what it is: vLLM's ``/version``, llama.cpp's ``/props``, then the
    ``/openapi.json`` that llama-cpp-python's FastAPI app publishes. Returns the facts,
    the version and what ``/props`` said (empty unless llama.cpp)."""

    def get_json(path: str) -> dict:
        try:
            response = http.get(root + path)
            found = response.json() if response.status_code == 200 else {}
        except Exception:  # noqa: BLE001 - any failure means "not this engine"
            return {}
        return found if isinstance(found, dict) else {}

    version = get_json("/version").get("version")
    if isinstance(version, str):
        return ENGINES["vLLM"], version, {}
    props = get_json("/props")
    if "build_info" in props:
        return ENGINES["llama.cpp"], str(props["build_info"]), props
    info = get_json("/openapi.json").get("info")
    if isinstance(info, dict) and "llama.cpp python" in str(info.get("title", "")).lower():
        return ENGINES["llama-cpp-python"], str(info.get("version") or "") or None, {}
    return UNKNOWN_ENGINE, None, {}


def is_local_path(text: str) -> bool:
    """Whether a model name the server reports is a path on its disk (not a Hub id): one
    that begins at a root, a home, the current folder or a drive (``C:\\``)."""
    return text.startswith(("/", "~", "./", "../", "\\")) or bool(re.match(r"[A-Za-z]:[\\/]", text))


def _parts(text: str) -> list[str]:
    return [part for part in re.split(r"[\\/]", text) if part]


def public_model_name(name: str) -> str:
    """``name`` as a page or a committed transcript may show it: a Hub id as it is, a path
    on the server's disk cut to its file name (a Hugging Face cache path to the part from
    its ``models--`` folder on), so that no local folder is recorded."""
    parts = _parts(name) if is_local_path(name) else []
    cached = [i for i, part in enumerate(parts) if part.startswith("models--")]
    return "/".join(parts[cached[0]:]) if cached else parts[-1] if parts else name


def match_served_model(spec: ReaderSpec, revision: str, url: str,
                       listed: Sequence[tuple[str, str | None]], engine: EngineFacts) -> ModelMatch:
    """Pick the listed model that is ``spec``'s and check its revision where possible.

    ``listed`` holds (id, path) pairs: the id the server lists and any path it reports
    for it (vLLM's ``root``, llama.cpp's ``model_path``). A listed model is the reader's
    when its id is the reader's model id, a path lies in the model's Hugging Face cache
    folder, or a file name is the reader's GGUF file. It is refused all the same when:

    - a reported name is a GGUF file and the reader is pinned to another file, or to no
      GGUF file at all (its original weights at a revision);
    - the reader is pinned to a GGUF file and the server reports another path on its disk;
    - ``engine`` serves GGUF files only and the reader is not pinned to a GGUF file: it
      then serves a conversion, whatever name it lists;
    - a reported path names another revision than the pin.

    Returns the id to request and what was checked (a sentence the page prints). Raises
    :class:`WrongModelError` naming both models when none matches or one is refused.
    """
    wanted, folder = spec.model_id.lower(), "models--" + spec.model_id.lower().replace("/", "--")
    pinned_file = spec.gguf_filename.lower() if spec.gguf_filename else None
    pinned = spec.model_id + (f" (file {spec.gguf_filename})" if spec.gguf_filename else "")
    wants = f"reader {spec.key!r} pins {pinned} ({revision}). Serve the pinned file, or " \
            "load the reader that matches the server."
    original = (f"{spec.model_id} at revision {revision} in its original weights, which reader "
                f"{spec.key!r} pins. Serve the pinned revision with vLLM (see the README, "
                "'Serving a reader for a class'), or load a reader pinned to")
    for model_id, path in listed:
        names = [text for text in (model_id, path) if text]
        parts = [[part.lower() for part in _parts(text)] for text in names]
        if not any(text.lower() == wanted or folder in split
                   or (pinned_file and split and split[-1] == pinned_file)
                   for text, split in zip(names, parts)):
            continue
        ggufs = [text for text in names if text.lower().endswith(".gguf")]
        other = next((text for text in ggufs if _parts(text)[-1].lower() != pinned_file), None)
        if other and pinned_file is None:
            raise WrongModelError(url, None, (
                f"the server lists {model_id} but serves the GGUF file {other}, a converted "
                f"(and usually quantised) checkpoint, not {original} that file."))
        if other:
            raise WrongModelError(url, None, f"the server lists {model_id} but serves the GGUF "
                                  f"file {_parts(other)[-1]} ({other}), while {wants}")
        if pinned_file is None and engine.gguf_only:
            raise WrongModelError(url, None, (
                f"the server runs {engine.name}, which serves GGUF files only, so the model it "
                f"lists as {model_id} is a GGUF conversion, not {original} a GGUF file."))
        label = public_model_name(model_id)
        if pinned_file is not None and ggufs:
            return _check_gguf(spec, revision, url, model_id, ggufs)
        if pinned_file is not None:
            for elsewhere in filter(is_local_path, names):
                raise WrongModelError(url, None, f"the server lists {model_id} but serves "
                                      f"{elsewhere}, not a GGUF file, while {wants}")
            return ModelMatch(model_id, None, f"the server lists {model_id} without saying "
                              "which file it serves, so it is not checked that it serves the "
                              f"pinned {spec.gguf_filename} ({revision})", label)
        commits = {c for text in names for c in _COMMIT.findall(text.lower())}
        if commits and spec.revision is not None and commits != {spec.revision}:
            raise WrongModelError(url, None, (
                f"the server serves {spec.model_id} at revision {', '.join(sorted(commits))} "
                f"(from its model path {' '.join(names)}), but reader {spec.key!r} pins "
                f"revision {spec.revision}. Start the server on the pinned revision."))
        if commits and spec.revision is not None:
            return ModelMatch(model_id, True, f"the server's model path names revision "
                                              f"{spec.revision}, the pinned one", label)
        return ModelMatch(model_id, None, (
            f"the server reports no revision for {label}, so it is not checked that it "
            f"serves the pinned revision {revision}"), label)
    served = ", ".join(m + (f" ({p})" if p and p != m else "") for m, p in listed)
    raise WrongModelError(url, None, (
        f"the server serves {served or 'no model'}, but reader {spec.key!r} pins {pinned} at "
        f"revision {revision}. Start the server with the pinned model, or load the reader "
        "that matches the server."))


def _check_gguf(spec: ReaderSpec, revision: str, url: str, model_id: str,
                files: list[str]) -> ModelMatch:
    """A GGUF reader served from its pinned file name: compare the served file's SHA-256
    when this machine can read it."""
    name = spec.gguf_filename
    for path in map(Path, files if is_loopback(url) else ()):
        if path.is_file() and path.name == name:
            digest = file_sha256(path)
            if digest != file_sha256(package_gguf_path(spec)):
                raise WrongModelError(url, None, f"the server serves {path}, whose SHA-256 "
                                      f"is {digest}, but reader {spec.key!r} pins {revision}")
            return ModelMatch(model_id, True, "the served file's SHA-256 was read on this machine"
                              f" and matches the pinned {name}", f"{name} (SHA-256 {digest})")
    return ModelMatch(model_id, None, f"the server reports the file name {name} but not its "
                      "SHA-256, so the file's bytes are not checked against the pin", name)


# -------------------------------------------------------------------------- replies


#: The parts of a chat-completions reply the book uses, after :func:`check_reply`.
Reply = namedtuple("Reply", "text finish_reason prompt_tokens completion_tokens")


def _excerpt(value, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "…"


def check_reply(data, cap: int, engine: EngineFacts) -> Reply:
    """Validate one decoded chat-completions reply; raise ``ValueError`` saying what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"the reply is not a JSON object: {_excerpt(data)}")
    choice = (data["choices"] or [None])[0] if isinstance(data.get("choices"), list) else None
    if choice is None:
        raise ValueError(f"the reply has no choices: {_excerpt(data)}")
    message = choice.get("message") if isinstance(choice, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str) or not content:
        raise ValueError(f"the reply's message is empty: {_excerpt(choice)}")
    finish = choice.get("finish_reason")
    if finish not in ("stop", "length"):
        raise ValueError(f"the reply ended with finish_reason {finish!r}; only 'stop' (end of "
                         "sequence) and 'length' (the token cap) say why a reply ended: "
                         f"{_excerpt(choice)}")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    prompt, produced = counts = [usage.get(n) for n in ("prompt_tokens", "completion_tokens")]
    for name, value in zip(("prompt_tokens", "completion_tokens"), counts):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"the reply reports no {name} in usage: {_excerpt(usage)}")
    if produced > cap:
        raise ValueError(f"the reply took {produced} tokens, more than the {cap} requested "
                         "(the server ignored max_tokens)")
    if finish == "length" and produced < cap:
        raise ValueError(f"the reply was cut off after {produced} tokens, before the {cap} "
                         "requested, by a limit the request did not set (a server-side cap or "
                         f"a full context window): {content!r}")
    if finish == "stop" and produced == cap and engine.counts_eos is False:
        raise ValueError(f"the reply took all {cap} tokens yet says it ended with the "
                         f"end-of-sequence token; {engine.name} does not count that token, so "
                         f"the cap cut the reply off and the server did not report it: "
                         f"{content!r}")
    return Reply(content, finish, prompt, produced)


# --------------------------------------------------------------------------- client


def describe_api_error(error: Exception, timeout: float) -> str:
    """A sentence for an exception raised by the openai client."""
    import openai

    if isinstance(error, openai.APITimeoutError):
        return (f"no reply within {timeout:g} s (the timeout; set {config.READER_TIMEOUT} to "
                "wait longer)")
    if isinstance(error, openai.APIConnectionError):
        cause = error.__cause__ or error.__context__ or error
        return f"cannot connect ({type(cause).__name__}: {cause})"
    if isinstance(error, openai.APIStatusError):
        hint = f" (set {config.READER_API_KEY} to the server's API key)" if error.status_code in (
            401, 403) else ""
        return f"HTTP {error.status_code}{hint}: {_excerpt(error.response.text) or 'no body'}"
    return f"{type(error).__name__}: {error}"


def run_bounded(jobs: Sequence, work, concurrency: int) -> list:
    """``[work(job) for job in jobs]`` with at most ``concurrency`` running at once, in the
    order of ``jobs``. When a job fails, no further job starts and the failure of the
    earliest failing job is raised. The workers are daemon threads and the caller waits
    in short steps, so Ctrl-C stops a run at once instead of waiting for the requests in
    flight to time out."""
    import threading

    jobs, results, errors = list(jobs), {}, {}
    if concurrency <= 1 or len(jobs) <= 1:
        return [work(job) for job in jobs]
    pending, finished = iter(range(len(jobs))), threading.Semaphore(0)

    def worker() -> None:
        for index in pending:  # next() on a range iterator is atomic: each index goes once
            if errors:
                return
            try:
                results[index] = work(jobs[index])
            except BaseException as error:  # noqa: BLE001 - handed to the caller
                errors[index] = error
            finally:
                finished.release()

    for number in range(min(concurrency, len(jobs))):
        threading.Thread(target=worker, name=f"reader-server-{number}", daemon=True).start()
    done = 0
    while done < len(jobs) and not errors:
        done += finished.acquire(timeout=0.1)
    if errors:
        raise errors[min(errors)]
    return [results[index] for index in range(len(jobs))]


def identify(client, url: str, spec: ReaderSpec, revision: str, timeout: float) -> ServerInfo:
    """What the server at ``url`` is and serves: the engine, its version and the listed
    model that is ``spec``'s (:func:`match_served_model`), or a ServerError saying why not."""
    import httpx

    try:
        listed = [(m.id, getattr(m, "root", None)) for m in client.models.list().data]
    except Exception as error:  # noqa: BLE001 - every failure becomes one clear error
        raise ServerError(url, None, "listing the served models failed: "
                          f"{describe_api_error(error, timeout)}") from error
    with httpx.Client(timeout=min(timeout, 10.0), headers=client.auth_headers) as http:
        engine, version, props = identify_engine(url.removesuffix("/v1"), http)
    if props.get("model_path") and len(listed) == 1:
        listed = [(listed[0][0], str(props["model_path"]))]
    match = match_served_model(spec, revision, url, listed, engine)
    return ServerInfo(**vars(match), url=url, engine=engine, engine_version=version)


def ask(client, info: ServerInfo, messages: list[dict], settings: dict, extra: dict,
        question_id: str, timeout: float) -> Reply:
    """Send one greedy chat-completions request (with the request fields ``extra``) and
    check its reply; any failure is a ServerError naming the URL and the question."""
    try:
        text = client.chat.completions.with_raw_response.create(
            model=info.served_model, messages=messages, temperature=0,
            max_tokens=settings["max_new_tokens"], extra_body={
                info.engine.penalty_parameter: settings["repetition_penalty"], **extra},
        ).http_response.text
        try:
            data = json.loads(text)
        except ValueError:
            raise ValueError(f"the reply is not JSON: {_excerpt(text)}") from None
        return check_reply(data, int(settings["max_new_tokens"]), info.engine)
    except ValueError as error:
        raise ServerError(info.url, question_id, str(error)) from None
    except Exception as error:  # noqa: BLE001 - the openai client's errors
        raise ServerError(info.url, question_id, describe_api_error(error, timeout)) from error


def grammar_request(info: ServerInfo, retrieved_ids: Sequence[str],
                    question_id: str | None, settings: dict) -> tuple[dict, dict]:
    """The request fields that make ``info``'s engine enforce lesson 3's reply grammar, and
    the settings the reply is keyed by.

    vLLM takes the Lark grammar in ``structured_outputs`` when it runs the guidance
    backend (llguidance, as live mode does), so its reply is keyed exactly as a live
    constrained reply (:func:`helpers.grammar.constrained_settings`). llama.cpp (and
    llama-cpp-python) take GBNF in ``grammar``, whose answer is bounded in characters;
    that reply is keyed by the GBNF grammar under its own decoding name
    (:data:`helpers.decoding.CONSTRAINED_GBNF`), so it never shares a key with a
    live reply. Any other engine is refused with an error saying so: a grammar it ignored
    would look enforced and not be.
    """
    from helpers.decoding import CONSTRAINED_GBNF, DECODING_FIELD
    from helpers.grammar import build_gbnf, build_grammar, constrained_settings

    if info.engine.grammar == "gbnf":
        gbnf = build_gbnf(retrieved_ids)
        return {"grammar": gbnf}, {**settings, DECODING_FIELD: CONSTRAINED_GBNF, "grammar": gbnf}
    if info.engine.grammar == "lark":
        grammar = build_grammar(retrieved_ids)
        return {"structured_outputs": {"grammar": grammar}}, constrained_settings(settings, grammar)
    raise ServerError(info.url, question_id, f"the server runs {info.engine_label}; "
                      f"{info.engine.grammar_note}. Constrained decoding on a server needs "
                      "llama.cpp's server or vLLM.")
