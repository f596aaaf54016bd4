"""Generation: one interface, three ways to produce a reply (live, recorded, server).

Introduced in lesson 1, "Ask the reader for two lines". Live mode runs the model through
transformers with greedy decoding; recorded mode replays a transcript entry whose key
matches the exact model, revision, messages and settings; server mode sends the prompts
to an OpenAI-compatible serving engine (see :mod:`helpers.reader.server`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..progress import QuestionProgress
from . import decoding, server
from ..paths import shown
from .model_cache import load_gguf
from .prompts import check_input_budget
from .registry import (
    GGUF_PACKAGE,
    HF_CACHE,
    LOCAL_FOLDER,
    MAX_INPUT_TOKENS,
    ReaderError,
    ReaderSpec,
    WeightsUnavailableError,
    get_reader_spec,
    hf_snapshot_path,
    how_to_get_weights,
    package_gguf_path,
    resolve_revision,
    weights_available,
)
from .transcript import (
    TRANSCRIPT_PATH,
    UNCONSTRAINED,
    TranscriptEntry,
    decoding_of,
    describe_difference,
    read_transcript,
    transcript_key,
)

MODE_ENV = "RIVERTON_READER_MODE"
MODES = ("auto", "live", "recorded", "server")

GENERATION_COLUMNS = [
    "question_id", "raw_output", "output_tokens", "ended_by_eos", "hit_token_cap",
    "prompt_tokens", "mode", "model_id", "revision", "provenance",
]


class ReplayError(ReaderError, LookupError):
    """Recorded mode has no transcript entry for a request."""


@dataclass(frozen=True)
class Generation:
    """One reader reply with its stopping diagnostics and how it was produced."""

    question_id: str
    raw_output: str
    # Generated tokens. Live and recorded replies count the end-of-sequence token; a
    # server's count is its own usage.completion_tokens, which llama-cpp-python makes
    # without it (see server.EngineFacts.counts_eos and report.token_count_note).
    output_tokens: int
    ended_by_eos: bool
    hit_token_cap: bool
    prompt_tokens: int
    mode: str  # "live", "recorded" or "server"
    model_id: str
    revision: str
    key: str
    recorded_by: str | None = None
    recorded_on: str | None = None
    provenance: str | None = None  # None for a live generation
    token_ids: tuple[int, ...] | None = None  # live only: the generated ids, EOS included
    finish_reason: str | None = None  # server only: "stop" (EOS) or "length" (the cap)


def _question_of(messages: list[dict]) -> str | None:
    """The QUESTION ID written in the user prompt, for error messages."""
    for message in messages:
        for line in str(message.get("content", "")).splitlines():
            if line.startswith("QUESTION ID: "):
                return line.removeprefix("QUESTION ID: ").strip()
    return None


def resolve_mode(mode: str | None = None) -> str:
    """``mode``, else the environment variable ``RIVERTON_READER_MODE``, else ``auto``."""
    chosen = mode if mode is not None else os.environ.get(MODE_ENV, "auto")
    chosen = chosen.strip().lower()
    if chosen not in MODES:
        source = "argument mode" if mode is not None else f"environment variable {MODE_ENV}"
        raise ValueError(f"{source} is {chosen!r}; expected one of {', '.join(MODES)}")
    return chosen


class Reader:
    """A reader in one mode. Use :func:`load_reader` to get one."""

    mode: str
    spec: ReaderSpec

    def __init__(self, spec: ReaderSpec, revision: str):
        self.spec = spec
        self.revision = revision

    @property
    def model_id(self) -> str:
        return self.spec.model_id

    @property
    def settings(self) -> dict:
        return dict(self.spec.settings)

    def key(self, messages: list[dict], settings: dict | None = None) -> str:
        """The transcript key of ``messages`` for this reader.

        ``settings`` defaults to the reader's own; a decoding that adds to them (lesson 3's
        grammar, see :func:`helpers.reader.grammar.constrained_settings`) passes its own.
        """
        settings = self.settings if settings is None else settings
        return transcript_key(self.model_id, self.revision, messages, settings)

    def prompt_tokens(self, messages: list[dict], question_id: str | None = None) -> int:
        raise NotImplementedError

    def prompt_token_counts(self, messages_list, question_ids=None) -> list[int]:
        """The prompt tokens of each of ``messages_list`` (a server counts them concurrently)."""
        question_ids = list(question_ids) if question_ids is not None else [None] * len(
            list(messages_list))
        return [self.prompt_tokens(m, q) for m, q in zip(messages_list, question_ids)]

    def generate(self, messages: list[dict], question_id: str | None = None) -> Generation:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec.key} mode={self.mode} revision={self.revision}>"


# ----------------------------------------------------------------------------- live


_LOADED: dict[tuple, tuple] = {}


def _load_source(spec: ReaderSpec, allow_download: bool) -> tuple[str, dict]:
    """The path or id and the keyword arguments that ``from_pretrained`` needs."""
    if spec.weights_source == HF_CACHE:
        if allow_download:
            return spec.model_id, {"revision": spec.revision}
        folder = hf_snapshot_path(spec)
        if folder is None:
            raise WeightsUnavailableError(how_to_get_weights(spec))
        return str(folder), {"local_files_only": True}
    if spec.weights_source == GGUF_PACKAGE:
        path = package_gguf_path(spec)
        return str(path.parent), {"gguf_file": path.name, "local_files_only": True}
    if spec.weights_source == LOCAL_FOLDER:
        if not weights_available(spec):
            raise WeightsUnavailableError(how_to_get_weights(spec))
        return str(spec.local_path), {"local_files_only": True}
    raise ReaderError(f"reader {spec.key!r}: unknown weights source {spec.weights_source!r}")


def load_model_and_tokenizer(spec: ReaderSpec, allow_download: bool = False):
    """Load (once per process) the model and tokenizer of ``spec`` on the CPU, in eval mode.

    Nothing is downloaded unless ``allow_download`` is true.
    """
    cache_key = (spec.key, spec.weights_source, spec.local_path)
    if cache_key in _LOADED:
        return _LOADED[cache_key]
    source, kwargs = _load_source(spec, allow_download)
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging
    except ImportError as error:
        raise ReaderError(
            "live mode needs torch and transformers: "
            "`pip install torch==2.13.0` then `pip install -e '.[reader]'`"
        ) from error
    if spec.weights_source == GGUF_PACKAGE:
        missing = [name for name in ("gguf", "accelerate") if not _importable(name)]
        if missing:
            raise ReaderError(
                f"loading {spec.gguf_filename} through transformers needs "
                f"{' and '.join(missing)}: `pip install {' '.join(missing)}`"
            )
    with _quiet_progress(hf_logging):
        if spec.weights_source == GGUF_PACKAGE:
            # Dequantised once, then read from a per-user cache (see model_cache).
            model, tokenizer = load_gguf(spec, Path(source) / kwargs["gguf_file"], say=_say)
        else:
            _say(f"Loading {spec.model_id} {_describe_source(spec, source, allow_download)}")
            tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(source, device_map="cpu", **kwargs)
    model.eval()
    _LOADED[cache_key] = (model, tokenizer)
    return model, tokenizer


def _say(line: str) -> None:
    """Print a loading message where a student running the notebook sees it."""
    print(line, flush=True)


def _describe_source(spec: ReaderSpec, source: str, allow_download: bool) -> str:
    if spec.weights_source == HF_CACHE and allow_download:
        return f"at revision {spec.revision} from the Hugging Face Hub (downloads allowed)"
    if spec.weights_source == HF_CACHE:
        return f"at revision {spec.revision[:12]} from the Hugging Face cache {shown(Path(source))}"
    return f"from the folder {shown(Path(source))}"


@contextlib.contextmanager
def _quiet_progress(hf_logging):
    """Hide loading progress bars (they would land in rendered pages), then restore them."""
    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    gguf_utils = sys.modules.get("transformers.modeling_gguf_pytorch_utils")
    if gguf_utils is None:
        try:
            import transformers.modeling_gguf_pytorch_utils as gguf_utils
        except ImportError:
            gguf_utils = None
    original = getattr(gguf_utils, "tqdm", None)
    if original is not None:
        # The GGUF de-quantizer calls tqdm directly, outside transformers' switch.
        gguf_utils.tqdm = functools.partial(original, disable=True)
    try:
        yield
    finally:
        if original is not None:
            gguf_utils.tqdm = original
        if enabled:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def cpu_threads(count: int | None):
    """Run with ``count`` torch CPU threads, then restore the previous number."""
    if count is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _eos_ids(model, tokenizer) -> set[int]:
    ids = model.generation_config.eos_token_id
    if ids is None:
        ids = []
    elif isinstance(ids, int):
        ids = [ids]
    found = set(int(i) for i in ids)
    if tokenizer.eos_token_id is not None:
        found.add(int(tokenizer.eos_token_id))
    return found


def stopping_diagnostics(new_ids: list[int], eos_ids: set[int], max_new_tokens: int):
    """Output tokens (through the first EOS), whether EOS came, whether the cap was hit."""
    for position, token in enumerate(new_ids):
        if token in eos_ids:
            return position + 1, True, False
    count = len(new_ids)
    return count, False, count >= max_new_tokens


class LiveReader(Reader):
    """Runs the model on this machine through transformers, greedily."""

    mode = "live"

    def __init__(self, spec: ReaderSpec, allow_download: bool = False):
        self.model, self.tokenizer = load_model_and_tokenizer(spec, allow_download)
        super().__init__(spec, resolve_revision(spec))
        self.eos_ids = _eos_ids(self.model, self.tokenizer)

    def encode(self, messages: list[dict]):
        """The chat template applied with the generation prompt, as a batch of one."""
        return self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )

    def prompt_text(self, messages: list[dict]) -> str:
        """The chat-formatted prompt as text (for display)."""
        return self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )

    def prompt_tokens(self, messages: list[dict], question_id: str | None = None) -> int:
        return int(self.encode(messages)["input_ids"].shape[1])

    @property
    def pad_id(self) -> int:
        """The token that pads a batch (the tokenizer's, else the end-of-sequence token)."""
        pad_id = self.tokenizer.pad_token_id
        return min(self.eos_ids) if pad_id is None else int(pad_id)

    def reply(self, messages: list[dict], question_id: str, n_prompt: int,
              new_ids: list[int]) -> Generation:
        """The :class:`Generation` of generated token ids ``new_ids`` (cut after the first
        end-of-sequence token) for a prompt of ``n_prompt`` tokens."""
        settings = self.settings
        count, ended_by_eos, hit_cap = stopping_diagnostics(
            new_ids, self.eos_ids, settings["max_new_tokens"]
        )
        text = self.tokenizer.decode(new_ids[:count], skip_special_tokens=True)
        return Generation(
            question_id=question_id,
            raw_output=text,
            output_tokens=count,
            ended_by_eos=ended_by_eos,
            hit_token_cap=hit_cap,
            prompt_tokens=n_prompt,
            mode=self.mode,
            model_id=self.model_id,
            revision=self.revision,
            key=self.key(messages),
            token_ids=tuple(new_ids[:count]),
        )

    def generate(self, messages: list[dict], question_id: str | None = None) -> Generation:
        """One greedy reply, through transformers' own ``generate``."""
        import torch

        question_id = question_id or _question_of(messages) or "?"
        encoded = self.encode(messages)
        n_prompt = int(encoded["input_ids"].shape[1])
        settings = self.settings
        with torch.inference_mode(), cpu_threads(self.spec.cpu_threads):
            output = self.model.generate(
                **encoded,
                max_new_tokens=settings["max_new_tokens"],
                do_sample=settings["do_sample"],
                repetition_penalty=settings["repetition_penalty"],
                eos_token_id=sorted(self.eos_ids),
                pad_token_id=self.pad_id,
                temperature=None,
                top_p=None,
                top_k=None,
            )
        return self.reply(messages, question_id, n_prompt, [int(t) for t in output[0, n_prompt:]])

    def generate_many(self, messages_list, question_ids=None, *, size: int | None = None,
                      bar: QuestionProgress | None = None) -> list[Generation]:
        """One greedy reply per prompt, decoded ``size`` prompts at a time (default:
        :func:`helpers.reader.decoding.batch_size`), in input order.

        Batch size 1 runs :meth:`generate` for each prompt. ``bar``, when given, names the
        questions of the batch in progress and counts them once done.
        """
        import torch

        messages_list = [list(m) for m in messages_list]
        question_ids = list(question_ids) if question_ids is not None else [
            _question_of(m) or "?" for m in messages_list]
        size = decoding.batch_size(size)
        settings = self.settings
        if size == 1:
            results: list[Generation] = []
            for q, m in zip(question_ids, messages_list):
                if bar is not None:
                    bar.working_on(q)
                results.append(self.generate(m, q))
                if bar is not None:
                    bar.finished()
            return results
        prompts = [self.encode(m)["input_ids"][0].tolist() for m in messages_list]
        replies: dict[int, Generation] = {}
        for chunk in decoding.batches_by_length([len(p) for p in prompts], size):
            if bar is not None:
                bar.working_on_batch([question_ids[i] for i in chunk])
            with torch.inference_mode(), cpu_threads(self.spec.cpu_threads):
                new_ids = decoding.greedy_batch(
                    self.model, [prompts[i] for i in chunk],
                    max_new_tokens=settings["max_new_tokens"],
                    repetition_penalty=settings["repetition_penalty"],
                    eos_ids=self.eos_ids, pad_id=self.pad_id)
            for i, ids in zip(chunk, new_ids):
                replies[i] = self.reply(messages_list[i], question_ids[i], len(prompts[i]), ids)
            if bar is not None:
                bar.finished(len(chunk))
        return [replies[i] for i in range(len(prompts))]


# ------------------------------------------------------------------------- recorded


class RecordedReader(Reader):
    """Replays generations from a transcript; refuses any request it does not hold."""

    mode = "recorded"

    def __init__(self, spec: ReaderSpec, transcript: str | os.PathLike = TRANSCRIPT_PATH):
        super().__init__(spec, resolve_revision(spec))
        self.transcript_path = Path(transcript)
        self.entries = read_transcript(self.transcript_path)
        self._by_key = {entry.key: entry for entry in self.entries}

    def entry(self, messages: list[dict], question_id: str | None = None,
              settings: dict | None = None) -> TranscriptEntry:
        """The transcript entry for ``messages``, or a :class:`ReplayError` saying why not.

        ``settings`` defaults to the reader's own (plain greedy decoding); pass the
        settings of another decoding to replay its entries.
        """
        settings = self.settings if settings is None else settings
        key = self.key(messages, settings)
        if key in self._by_key:
            return self._by_key[key]
        question_id = question_id or _question_of(messages) or "?"
        decoding = decoding_of(settings)
        same_question = [
            entry for entry in self.entries
            if entry.question_id == question_id and entry.model_id == self.model_id
        ]
        same_slot = [entry for entry in same_question if entry.decoding == decoding]
        if same_slot or same_question:
            closest = (same_slot or same_question)[-1]
            reason = describe_difference(
                closest, self.model_id, self.revision, messages, settings
            )
            found = f"Its recorded entry was made for another request: {reason}."
        else:
            found = f"The transcript holds no entry for {question_id} with this model."
        raise ReplayError(
            f"question {question_id}: no recorded generation of reader {self.spec.key!r} "
            f"({self.model_id}) matches its prompt (key {key[:12]}...) in "
            f"{self.transcript_path}. {found} To run the model live instead, set "
            f"{MODE_ENV}=live (its weights must be on this machine), or regenerate the "
            f"entries with `python -m helpers.reader record --reader {self.spec.key}"
            f"{'' if decoding == UNCONSTRAINED else ' --constrained'}`."
        )

    def prompt_tokens(self, messages: list[dict], question_id: str | None = None) -> int:
        return self.entry(messages, question_id).prompt_tokens

    def generate(self, messages: list[dict], question_id: str | None = None,
                 settings: dict | None = None) -> Generation:
        """Replay the entry recorded for ``messages`` (and ``settings``, see :meth:`entry`)."""
        entry = self.entry(messages, question_id, settings)
        return Generation(
            question_id=question_id or entry.question_id,
            raw_output=entry.raw_output,
            output_tokens=entry.output_tokens,
            ended_by_eos=entry.ended_by_eos,
            hit_token_cap=entry.hit_token_cap,
            prompt_tokens=entry.prompt_tokens,
            mode=self.mode,
            model_id=entry.model_id,
            revision=entry.revision,
            key=entry.key,
            recorded_by=entry.recorded_by,
            recorded_on=entry.recorded_on,
            provenance=entry.provenance,
        )



# --------------------------------------------------------------------------- server


class ServerReader(Reader):
    """Sends each prompt to an OpenAI-compatible server, greedily, a few at a time.

    The server must serve the registered model (see :func:`server.match_served_model`).
    Replies are cached per transcript key for the life of the reader, so counting the
    prompt tokens first and generating afterwards asks the server once per prompt.
    """

    mode = "server"

    def __init__(self, spec: ReaderSpec, url: str, api_key: str | None = None,
                 concurrency: int | None = None, timeout: float | None = None):
        super().__init__(spec, resolve_revision(spec))
        self.url = server.normalise_url(url)
        self.concurrency = server._setting(concurrency, server.CONCURRENCY_ENV,
                                           server.DEFAULT_CONCURRENCY, int, 1,
                                           server.MAX_CONCURRENCY)
        self.timeout = server._setting(timeout, server.TIMEOUT_ENV, server.DEFAULT_TIMEOUT,
                                       float, 0.1, 3600.0)
        api_key = api_key if api_key is not None else os.environ.get(server.API_KEY_ENV)
        self.client = server.open_client(self.url, api_key, self.timeout)
        self.server = self._identify()
        self._cache: dict[tuple, Generation] = {}

    def _identify(self) -> "server.ServerInfo":
        import httpx

        try:
            listing = self.client.models.list()
            listed = [(m.id, getattr(m, "root", None)) for m in listing.data]
        except Exception as error:  # noqa: BLE001 - every failure becomes one clear error
            raise server.ServerError(
                self.url, None,
                f"listing the served models failed: "
                f"{server.describe_api_error(error, self.timeout)}",
            ) from error
        with httpx.Client(timeout=min(self.timeout, 10.0), headers=self.client.auth_headers) \
                as http:
            engine, version, props = server.identify_engine(server._root_url(self.url), http)
        if props.get("model_path") and len(listed) == 1:
            listed = [(listed[0][0], str(props["model_path"]))]
        match = server.match_served_model(self.spec, self.revision, self.url, listed, engine)
        return server.ServerInfo(
            url=self.url, engine=engine, engine_version=version,
            served_model=match.served_model, listed_models=tuple(m for m, _ in listed),
            revision_checked=match.revision_checked, revision_note=match.revision_note,
            served_label=match.served_label,
        )

    @property
    def provenance(self) -> str:
        return self.server.provenance

    def recorder_label(self, constrained: bool = False) -> str:
        """``recorded_by`` for entries recorded from this server."""
        grammar = ", greedy under the reply grammar" if constrained else ""
        return f"server {self.server.engine_label}{grammar}"

    def grammar_settings(self, retrieved_ids, question_id: str | None = None) -> dict:
        """The settings a reply under the reply grammar for ``retrieved_ids`` is keyed by
        (see :func:`server.grammar_request`): a live constrained reply's on vLLM, the GBNF
        grammar's on llama.cpp."""
        return server.grammar_request(self.server, tuple(retrieved_ids), question_id,
                                      self.settings)[1]

    def _one(self, job) -> Generation:
        messages, question_id, grammar = job
        settings = self.settings
        extra, keyed = {}, settings
        if grammar is not None:
            extra, keyed = server.grammar_request(self.server, grammar, question_id, settings)
        try:
            data = server.send(self.client, self.server.served_model, messages, settings,
                               self.server.engine, extra)
        except ValueError as error:
            raise server.ServerError(self.url, question_id, str(error)) from None
        except Exception as error:  # noqa: BLE001 - the openai client's errors
            raise server.ServerError(
                self.url, question_id, server.describe_api_error(error, self.timeout)
            ) from error
        try:
            reply = server.check_reply(data, int(settings["max_new_tokens"]),
                                       self.server.engine)
        except ValueError as error:
            raise server.ServerError(self.url, question_id, str(error)) from None
        return Generation(
            question_id=question_id,
            raw_output=reply.text,
            output_tokens=reply.completion_tokens,
            ended_by_eos=reply.finish_reason == "stop",
            hit_token_cap=reply.finish_reason == "length",
            prompt_tokens=reply.prompt_tokens,
            mode=self.mode,
            model_id=self.model_id,
            revision=self.revision,
            key=self.key(messages, keyed),
            provenance=self.provenance,
            finish_reason=reply.finish_reason,
        )

    def generate_many(self, messages_list, question_ids=None, grammars=None) -> list[Generation]:
        """One reply per prompt, at most ``concurrency`` requests in flight, in input order.

        ``grammars`` (optional) gives, per prompt, the retrieved IDs whose reply grammar
        the server must enforce (lesson 3). Any failure raises a ``ServerError`` naming
        the URL and the question; nothing is returned half-done.
        """
        messages_list = [list(m) for m in messages_list]
        question_ids = list(question_ids) if question_ids is not None else [
            _question_of(m) or "?" for m in messages_list]
        grammars = list(grammars) if grammars is not None else [None] * len(messages_list)
        jobs = [(m, q, None if g is None else tuple(g))
                for m, q, g in zip(messages_list, question_ids, grammars)]
        cache_keys = [(self.key(m), g) for m, _, g in jobs]
        todo = [job for job, k in zip(jobs, cache_keys) if k not in self._cache]
        for job, generation in zip(todo, server.run_bounded(todo, self._one, self.concurrency)):
            self._cache[(self.key(job[0]), job[2])] = generation
        return [dataclasses.replace(self._cache[k], question_id=q)
                for k, q in zip(cache_keys, question_ids)]

    def prompt_tokens(self, messages: list[dict], question_id: str | None = None) -> int:
        return self.generate(messages, question_id).prompt_tokens

    def prompt_token_counts(self, messages_list, question_ids=None) -> list[int]:
        return [g.prompt_tokens for g in self.generate_many(messages_list, question_ids)]

    def generate(self, messages: list[dict], question_id: str | None = None) -> Generation:
        return self.generate_many([messages], [question_id or _question_of(messages) or "?"])[0]


# ---------------------------------------------------------------------------- entry


def load_reader(
    key: str,
    mode: str | None = None,
    transcript: str | os.PathLike = TRANSCRIPT_PATH,
    allow_download: bool = False,
    url: str | None = None,
    api_key: str | None = None,
    concurrency: int | None = None,
    timeout: float | None = None,
) -> Reader:
    """The reader ``key`` in ``mode`` (auto, live, recorded or server; None reads the
    environment).

    ``auto`` asks the server when a server URL is set (``url`` or ``RIVERTON_READER_URL``),
    runs live when the pinned weights are on this machine, and replays the transcript
    otherwise. A set URL is never skipped silently: if that server is down or serves
    another model, loading fails with an error saying so. ``live`` without the weights is
    an error saying how to get them. ``server`` takes ``url``, ``api_key`` (else
    ``RIVERTON_READER_API_KEY``), ``concurrency`` (else ``RIVERTON_READER_CONCURRENCY``,
    default 4) and ``timeout`` in seconds (else ``RIVERTON_READER_TIMEOUT``, default 60).
    """
    spec = get_reader_spec(key)
    chosen = resolve_mode(mode)
    server_url = server.configured_url(url)
    if chosen == "auto":
        if server_url:
            chosen = "server"
        else:
            chosen = "live" if weights_available(spec) else "recorded"
    if chosen == "server":
        if not server_url:
            raise ReaderError(
                f"server mode for reader {key!r} needs the server's URL: set "
                f"{server.URL_ENV}=http://HOST:PORT/v1 or pass url= to load_reader"
            )
        return ServerReader(spec, server_url, api_key=api_key, concurrency=concurrency,
                            timeout=timeout)
    if chosen == "live":
        if not allow_download and not weights_available(spec):
            raise WeightsUnavailableError(
                f"live mode for reader {key!r}: {how_to_get_weights(spec)} "
                f"Or replay the recorded outputs with {MODE_ENV}=recorded."
            )
        return LiveReader(spec, allow_download=allow_download)
    return RecordedReader(spec, transcript)


def generate_all(reader: Reader, inputs_df: pd.DataFrame,
                 max_input_tokens: int = MAX_INPUT_TOKENS) -> pd.DataFrame:
    """Check every prompt against the input budget, then generate one reply per question.

    A server reader counts the prompt tokens in its replies' usage, so it sends every
    prompt first (concurrently) and the budget is checked before any reply is returned.
    A live reader decodes the prompts in batches (:meth:`LiveReader.generate_many`); while
    a person runs it, a progress bar names the questions of the batch in progress (see
    :mod:`helpers.progress`); a book build shows none.
    """
    question_ids = list(inputs_df["question_id"])
    messages_list = list(inputs_df["messages"])
    if isinstance(reader, ServerReader):
        generations = reader.generate_many(messages_list, question_ids)
        check_input_budget({g.question_id: g.prompt_tokens for g in generations},
                           max_input_tokens)
    else:
        counts: Mapping[str, int] = {
            qid: reader.prompt_tokens(messages, qid)
            for qid, messages in zip(question_ids, messages_list)
        }
        check_input_budget(counts, max_input_tokens)
        # A progress bar while a person waits for a model (replaying a transcript is instant).
        label = f"{reader.model_id.rsplit('/', 1)[-1]} ({reader.mode})"
        with QuestionProgress(len(question_ids), label, show=reader.mode != "recorded") as bar:
            if isinstance(reader, LiveReader):
                generations = reader.generate_many(messages_list, question_ids, bar=bar)
            else:
                generations = [reader.generate(messages, qid) for qid, messages in
                               bar.track(zip(question_ids, messages_list))]
    rows = [{column: getattr(g, column) for column in GENERATION_COLUMNS} for g in generations]
    return pd.DataFrame(rows, columns=GENERATION_COLUMNS)
