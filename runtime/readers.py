"""Readers: one interface, three ways to produce a reply (live, recorded, server).

Machinery behind lesson 1, "Ask the reader for two lines", and every later lesson that
asks a model. :func:`load_reader` gives a reader; :func:`generate_all` asks it every
prompt of a table (one row per question: ``question_id``, ``messages`` and, for replies
under lesson 3's grammar, ``retrieved_ids``) and returns one reply per row:

- **live** runs the model on this machine through transformers, greedily, in batches
  (:mod:`runtime.batch`, whose step is :func:`helpers.decoding.next_tokens`);
- **recorded** replays the transcript entry whose key matches the exact model,
  revision, messages and settings (:mod:`runtime.records`), and refuses any other;
- **server** sends the prompts to an OpenAI-compatible server (:mod:`runtime.server`).

A reply under a grammar is asked for with ``constrained=True`` (lesson 3's reply grammar
for each row's retrieved passages) or ``grammar=`` (one grammar for every row, lesson 4's
judge); its key hashes the grammar too. :func:`mode_sentence` is the one sentence of the
page that the machinery writes: which mode ran and where the replies came from.
"""
from __future__ import annotations

import contextlib
import functools
import os
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from helpers.decoding import MAX_INPUT_TOKENS, UNCONSTRAINED, decoding_of, stopping_diagnostics
from helpers.grammar import ANSWER_MAX_TOKENS, ConstrainedDecodingError, GrammarMask, \
    build_grammar, check_ids, constrained_settings, reply_grammar
from helpers.parsing import show_line_breaks
from helpers.prompts import check_input_budget

from . import batch, server, config
from .lessons import ATTACK_COLLECTION, ORDINARY_COLLECTION, QUESTION_FILES, RETRIEVERS, \
    collection_name
from .paths import shown
from .progress import QuestionProgress, quiet_loading
from .records import GENERATED_LIVE, REPLY_COLUMNS, TRANSCRIBED, TRANSCRIPT_PATH, Reply, \
    describe_difference, read_transcript, transcript_key
from .registry import GGUF_PACKAGE, HF_CACHE, ReaderError, ReaderSpec, \
    WeightsUnavailableError, get_reader_spec, hf_snapshot_path, how_to_get_weights, \
    package_gguf_path, resolve_revision, weights_available

MODES = ("auto", "live", "recorded", "server")

class ReplayError(ReaderError, LookupError):
    """Recorded mode has no transcript entry for a request."""


def resolve_mode(mode: str | None = None) -> str:
    """``mode``, else the environment variable ``RIVERTON_READER_MODE``, else ``auto``."""
    chosen = (config.text(config.READER_MODE) or "auto" if mode is None else mode)
    chosen = chosen.strip().lower()
    if chosen not in MODES:
        source = ("argument mode" if mode is not None
                  else f"environment variable {config.READER_MODE}")
        raise ValueError(f"{source} is {chosen!r}; expected one of {', '.join(MODES)}")
    return chosen


class Reader:
    """A reader in one mode. Use :func:`load_reader` to get one.

    :meth:`prompt_token_counts` counts the tokens of each prompt (live and recorded through
    their ``prompt_tokens(messages, question_id)``; a server by asking), and each mode's
    ``generate_many(question_ids, messages_list, settings_list, grammars, bar)`` gives one
    reply per prompt: ``grammars`` holds each row's grammar (or None), ``settings_list``
    the settings each reply is keyed by and ``bar`` the progress bar
    (:class:`runtime.progress.QuestionProgress`).
    """

    mode: str

    def __init__(self, spec: ReaderSpec, revision: str):
        self.spec, self.revision, self.model_id = spec, revision, spec.model_id

    @property
    def settings(self) -> dict:
        return dict(self.spec.settings)

    def key(self, messages: list[dict], settings: dict | None = None) -> str:
        """The transcript key of ``messages`` under ``settings`` (default: the reader's)."""
        return transcript_key(self.model_id, self.revision, messages,
                              self.settings if settings is None else settings)

    def _made(self, question_id: str, messages: list[dict], settings: dict,
              provenance: str = GENERATED_LIVE, **reply) -> Reply:
        """This reader's :class:`Reply` ``reply`` to ``messages`` under ``settings``."""
        return Reply(key=self.key(messages, settings), collection="", question_id=question_id,
                     passage_ids=[], model_id=self.model_id, revision=self.revision,
                     settings=settings, messages=messages, recorded_by="", recorded_on="",
                     provenance=provenance, mode=self.mode, **reply)

    def prompt_token_counts(self, messages_list, question_ids) -> list[int]:
        """The prompt tokens of each of ``messages_list`` (a server counts them concurrently)."""
        return [self.prompt_tokens(m, q) for m, q in zip(messages_list, question_ids)]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec.key} mode={self.mode} revision={self.revision}>"


# ----------------------------------------------------------------------------- live

_LOADED: dict[tuple, tuple] = {}


def load_model_and_tokenizer(spec: ReaderSpec, allow_download: bool = False):
    """Load (once per process) the model and tokenizer of ``spec`` on the CPU, in eval mode.

    Nothing is downloaded unless ``allow_download`` is true.
    """
    cache_key = (spec.key, spec.weights_source, spec.local_path)
    if cache_key in _LOADED:
        return _LOADED[cache_key]
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as error:
        raise ReaderError("live mode needs torch and transformers: `pip install "
                          "torch==2.13.0` then `pip install -e '.[reader]'`") from error
    from .weights import load_gguf

    hub = spec.weights_source == HF_CACHE
    with quiet_loading():
        if spec.weights_source == GGUF_PACKAGE:
            # Dequantised once, then read from a per-user cache (see runtime.weights).
            model, tokenizer = load_gguf(spec, package_gguf_path(spec), say=_say)
        else:
            if hub and allow_download:
                source, kwargs = spec.model_id, {"revision": spec.revision}
                where = f"at revision {spec.revision} from the Hugging Face Hub"
            else:
                folder = hf_snapshot_path(spec) if hub else (
                    spec.local_path if weights_available(spec) else None)
                if folder is None:
                    raise WeightsUnavailableError(how_to_get_weights(spec))
                source, kwargs = str(folder), {"local_files_only": True}
                where = (f"at revision {spec.revision[:12]} from the Hugging Face cache "
                         if hub else "from the folder ") + shown(folder)
            _say(f"Loading {spec.model_id} {where}")
            tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(source, device_map="cpu", **kwargs)
    model.eval()
    _LOADED[cache_key] = (model, tokenizer)
    return model, tokenizer


#: Prints a loading message where a student running the notebook sees it.
_say = functools.partial(print, flush=True)


@contextlib.contextmanager
def cpu_threads(count: int | None):
    """Run with ``count`` torch CPU threads (None: as many as now), then restore the number."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count or before)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class LiveReader(Reader):
    """Runs the model on this machine through transformers, greedily, in batches."""

    mode = "live"

    def __init__(self, spec: ReaderSpec, allow_download: bool = False):
        self.model, self.tokenizer = load_model_and_tokenizer(spec, allow_download)
        super().__init__(spec, resolve_revision(spec))
        ids = self.model.generation_config.eos_token_id
        ids = [ids] if isinstance(ids, int) else list(ids or ())
        self.eos_ids = {int(i) for i in [*ids, self.tokenizer.eos_token_id] if i is not None}
        pad = self.tokenizer.pad_token_id
        self.pad_id = min(self.eos_ids) if pad is None else int(pad)

    def encode(self, messages: list[dict]) -> list[int]:
        """The chat template applied with the generation prompt, as token ids."""
        return list(self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_dict=True)["input_ids"])

    def prompt_tokens(self, messages: list[dict], question_id: str = "?") -> int:
        return len(self.encode(messages))

    def generate_many(self, question_ids, messages_list, settings_list, grammars,
                      bar, choices=None) -> list[Reply]:
        """Decode the prompts in batches of :func:`runtime.batch.batch_size`, longest
        first, so that prompts of about one length share a batch. With ``choices`` (words
        such as "yes" and "no"), each reply also gets the probability of each choice's
        first token at the first step, renormalised over the choices, from the scores
        that step chooses from. Choices whose first tokens are one, or a repetition penalty
        (which would change the scores the first step chooses from), are refused."""
        import torch

        first = choices and [self.tokenizer.encode(c, add_special_tokens=False)[0] for c in choices]
        if first and (len(set(first)) < len(first) or any(
                s["repetition_penalty"] != 1.0 for s in settings_list)):
            raise ReaderError(f"choices {list(choices)} need distinct first tokens and no "
                              "repetition penalty")
        chances: dict[int, dict] = {}
        prompts = [self.encode(m) for m in messages_list]
        width = self.model.get_output_embeddings().weight.shape[0]
        replies: dict[int, Reply] = {}
        for chunk in batch.batches_by_length([len(p) for p in prompts], batch.batch_size()):
            bar.working_on_batch([question_ids[i] for i in chunk])
            masks = {i: GrammarMask(self.tokenizer, grammars[i]) for i in chunk
                     if grammars[i] is not None}
            settings = settings_list[chunk[0]]
            started = time.perf_counter()
            with torch.inference_mode(), cpu_threads(self.spec.cpu_threads):
                new_ids = batch.greedy_batch(
                    self.model, [prompts[i] for i in chunk],
                    max_new_tokens=int(settings["max_new_tokens"]),
                    repetition_penalty=settings["repetition_penalty"],
                    eos_ids=self.eos_ids, pad_id=self.pad_id,
                    allowed=[functools.partial(_named, question_ids[i], masks[i].allowed_after,
                                               width=width) if i in masks else None
                             for i in chunk],
                    first_scores=first and (lambda scores, rows=chunk: chances.update({
                        row: dict(zip(choices, map(float, torch.softmax(
                            scores[place, first].double(), dim=-1))))
                        for place, row in enumerate(rows)})))
            seconds = (time.perf_counter() - started) / len(chunk)
            for i, ids in zip(chunk, new_ids):
                count, ended_by_eos, hit_cap = stopping_diagnostics(
                    ids, self.eos_ids, int(settings_list[i]["max_new_tokens"]))
                ids = ids[:count]
                complete = None if i not in masks else _named(
                    question_ids[i], masks[i].complete, ids, ended_by_eos)
                replies[i] = self._made(
                    question_ids[i], messages_list[i], settings_list[i], output_tokens=count,
                    raw_output=self.tokenizer.decode(ids, skip_special_tokens=True),
                    ended_by_eos=ended_by_eos, hit_token_cap=hit_cap, prompt_tokens=len(prompts[i]),
                    token_ids=tuple(ids), grammar_complete=complete, seconds=seconds,
                    choice_probabilities=chances.get(i))
            bar.finished(len(chunk))
        return [replies[i] for i in range(len(prompts))]


def _named(question_id: str, call, *args, **kwargs):
    """``call(*args, **kwargs)``, whose grammar error, if any, names the question."""
    try:
        return call(*args, **kwargs)
    except ConstrainedDecodingError as error:
        raise ConstrainedDecodingError(f"{question_id}: {error}") from error


# ------------------------------------------------------------------------- recorded


class RecordedReader(Reader):
    """Replays replies from a transcript; refuses any request it does not hold."""

    mode = "recorded"

    def __init__(self, spec: ReaderSpec, transcript: str | os.PathLike = TRANSCRIPT_PATH):
        super().__init__(spec, resolve_revision(spec))
        self.transcript_path = Path(transcript)
        self.entries = read_transcript(self.transcript_path)
        self._by_key = {entry.key: entry for entry in self.entries}

    def entry(self, messages: list[dict], question_id: str, settings: dict | None = None):
        """The transcript entry for ``messages`` under ``settings`` (default: the reader's),
        or a :class:`ReplayError` saying what differs from the closest entry."""
        settings = self.settings if settings is None else settings
        key = self.key(messages, settings)
        if key in self._by_key:
            return self._by_key[key]
        decoding = decoding_of(settings)
        asked = [e for e in self.entries if e.question_id == question_id]
        # This model's entries for the question (else another model's for the same prompt),
        # the most alike first: the same prompt, the same system prompt, the same decoding.
        near = [e for e in asked if e.model_id == self.model_id] or [
            e for e in asked if e.messages == messages]
        closest = max(near, default=None, key=lambda e: (
            e.messages == messages, e.messages[:1] == messages[:1], e.decoding == decoding))
        differ = closest and describe_difference(closest, self.model_id, self.revision,
                                                 messages, settings)
        found = (f"Its recorded entry was made for another request: {differ}." if closest else
                 f"The transcript holds no entry for {question_id} with this model.")
        raise ReplayError(
            f"question {question_id}: no recorded reply of reader {self.spec.key!r} "
            f"({self.model_id}) matches its prompt (key {key[:12]}...) in "
            f"{shown(self.transcript_path)}. {found} To run the model live instead, set "
            f"{config.READER_MODE}=live (its weights must be on this machine), or record the "
            f"replies again with "
            f"`{record_command(self.spec.key, closest, decoding != UNCONSTRAINED)}`.")

    def holds(self, messages: list[dict], settings: dict | None = None) -> bool:
        """Whether the transcript holds a reply to ``messages`` under ``settings``."""
        return self.key(messages, settings) in self._by_key

    def prompt_tokens(self, messages: list[dict], question_id: str = "?") -> int:
        return self.entry(messages, question_id).prompt_tokens

    def generate_many(self, question_ids, messages_list, settings_list, grammars,
                      bar=None) -> list[Reply]:
        # The entry is the reply: its key hashes the request's model, revision, messages
        # and settings. It answers the question asked, under the name asked.
        return [replace(self.entry(m, q, s), question_id=q)
                for q, m, s in zip(question_ids, messages_list, settings_list)]


def record_command(key: str, entry=None, constrained: bool = False) -> str:
    """The command that records again the set of requests ``entry`` was recorded with (its
    collection: a question file over a retriever, lesson 5's prompts, the judge's), for
    reader ``key``; lesson 1's questions when there is no entry."""
    collection = entry.collection if entry is not None else ""
    flag = " --constrained" if constrained else ""
    if collection == "judge":
        return "python -m runtime record judge"
    if collection.startswith((ATTACK_COLLECTION, ORDINARY_COLLECTION)):
        which = (f"--attack {collection.removeprefix(ATTACK_COLLECTION)}"
                 if collection.startswith(ATTACK_COLLECTION) else "--prompts ordinary")
        return f"python -m runtime record attacks --reader {key} {which}{flag}"
    files = {collection_name(name, retriever): f" --questions {name} --retriever {retriever}"
             for name in QUESTION_FILES for retriever in RETRIEVERS}
    return f"python -m runtime record reader --reader {key}{files.get(collection, '')}{flag}"


# --------------------------------------------------------------------------- server


class ServerReader(Reader):
    """Sends each prompt to an OpenAI-compatible server, greedily, a few at a time.

    The server must serve the registered model (:func:`runtime.server.match_served_model`).
    Replies are cached per key for the life of the reader, so counting the prompt tokens
    first and generating afterwards asks the server once per prompt.
    """

    mode = "server"

    def __init__(self, spec: ReaderSpec, url: str, api_key: str | None = None,
                 concurrency: int | None = None, timeout: float | None = None):
        super().__init__(spec, resolve_revision(spec))
        self.url = server.normalise_url(url)
        self.concurrency = config.number(
            config.READER_CONCURRENCY, concurrency, default=server.DEFAULT_CONCURRENCY, low=1,
            high=server.MAX_CONCURRENCY, error=ReaderError)
        self.timeout = config.number(config.READER_TIMEOUT, timeout,
                                       default=server.DEFAULT_TIMEOUT, low=0.1, high=3600.0,
                                       kind=float, error=ReaderError)
        try:
            import openai
        except ImportError as error:
            raise ReaderError("server mode needs the openai package: "
                              "`pip install -e '.[server]'`") from error
        # A client that never retries (errors stay visible); servers without authentication
        # accept any key, and the client insists on one.
        api_key = api_key if api_key is not None else config.text(config.READER_API_KEY)
        self.client = openai.OpenAI(base_url=self.url, api_key=api_key or "not-needed",
                                    timeout=self.timeout, max_retries=0)
        self.server = server.identify(self.client, self.url, self.spec, self.revision,
                                      self.timeout)
        self._cache: dict[tuple, Reply] = {}

    def _one(self, job) -> Reply:
        question_id, messages, grammar_ids = job
        extra, keyed = ({}, self.settings) if grammar_ids is None else server.grammar_request(
            self.server, grammar_ids, question_id, self.settings)
        reply = server.ask(self.client, self.server, messages, self.settings, extra, question_id,
                           self.timeout)
        return self._made(
            question_id, messages, keyed, raw_output=reply.text,
            output_tokens=reply.completion_tokens, ended_by_eos=reply.finish_reason == "stop",
            hit_token_cap=reply.finish_reason == "length", prompt_tokens=reply.prompt_tokens,
            provenance=self.server.provenance)

    def ask(self, question_ids, messages_list, grammar_ids=None) -> list[Reply]:
        """One reply per prompt, at most ``concurrency`` requests in flight, in input order.

        ``grammar_ids`` gives, per prompt, the retrieved IDs whose reply grammar the server
        must enforce (lesson 3), or None. Any failure raises a ``ServerError`` naming the
        URL and the question; nothing is returned half-done.
        """
        grammar_ids = grammar_ids or [None] * len(messages_list)
        jobs = [(q, list(m), None if g is None else tuple(g))
                for q, m, g in zip(question_ids, messages_list, grammar_ids)]
        keys = [(self.key(m), g) for _, m, g in jobs]
        todo = [job for job, k in zip(jobs, keys) if k not in self._cache]
        for job, reply in zip(todo, server.run_bounded(todo, self._one, self.concurrency)):
            self._cache[(self.key(job[1]), job[2])] = reply
        return [replace(self._cache[k], question_id=q) for k, q in zip(keys, question_ids)]

    def prompt_token_counts(self, messages_list, question_ids) -> list[int]:
        return [g.prompt_tokens for g in self.ask(list(question_ids), list(messages_list))]

    def generate_many(self, question_ids, messages_list, settings_list, grammars,
                      bar=None) -> list[Reply]:
        if any(g is not None and not isinstance(g, tuple) for g in grammars):
            raise ReaderError("a server enforces lesson 3's reply grammar only "
                              "(constrained=True), not a grammar of its own")
        return self.ask(question_ids, messages_list, grammars)


# ---------------------------------------------------------------------------- entry


def load_reader(key: str, mode: str | None = None,
                transcript: str | os.PathLike = TRANSCRIPT_PATH,
                allow_download: bool = False, url: str | None = None,
                api_key: str | None = None, concurrency: int | None = None,
                timeout: float | None = None) -> Reader:
    """The reader ``key`` in ``mode`` (auto, live, recorded or server; None reads
    ``RIVERTON_READER_MODE``).

    ``auto`` asks the server when a server URL is set (``url`` or ``RIVERTON_READER_URL``),
    runs live when the weights are on this machine, and replays the transcript
    otherwise. A set URL is never skipped silently: a server that is down or serves
    another model fails the load with an error saying so. ``live`` without the weights is
    an error saying how to get them.
    """
    spec = get_reader_spec(key)
    chosen = resolve_mode(mode)
    server_url = (url if url is not None else config.text(config.READER_URL)).strip() or None
    if chosen == "auto":
        chosen = "server" if server_url else "live" if weights_available(spec) else "recorded"
    if chosen == "server":
        if not server_url:
            raise ReaderError(f"server mode for reader {key!r} needs the server's URL: set "
                              f"{config.READER_URL}=http://HOST:PORT/v1 or pass url= to "
                              "load_reader")
        return ServerReader(spec, server_url, api_key, concurrency, timeout)
    if chosen == "live":
        if not allow_download and not weights_available(spec):
            raise WeightsUnavailableError(
                f"live mode for reader {key!r}: {how_to_get_weights(spec)} "
                f"Or replay the recorded outputs with {config.READER_MODE}=recorded.")
        return LiveReader(spec, allow_download=allow_download)
    return RecordedReader(spec, transcript)


def _grammars(reader: Reader, inputs: pd.DataFrame, constrained: bool, grammar: str | None,
              answer_max_tokens: int, settings: dict) -> tuple[list, list]:
    """Each row's grammar (what the reader enforces) and the settings it is keyed by."""
    n = len(inputs)
    if grammar is not None:
        return [grammar] * n, [constrained_settings(settings, grammar)] * n
    if not constrained:
        return [None] * n, [settings] * n
    ids = [check_ids(r) for r in inputs["retrieved_ids"]]
    if isinstance(reader, ServerReader):  # keyed as a live reply on vLLM, by GBNF on llama.cpp
        return ids, [server.grammar_request(reader.server, r, q, reader.settings)[1]
                     for r, q in zip(ids, inputs["question_id"])]
    live = isinstance(reader, LiveReader)
    grammars = [_named(q, reply_grammar, reader.tokenizer, r, int(settings["max_new_tokens"]),
                       answer_max_tokens=answer_max_tokens) if live else
                _named(q, build_grammar, r, answer_max_tokens=answer_max_tokens)
                for q, r in zip(inputs["question_id"], ids)]
    return grammars, [constrained_settings(settings, g) for g in grammars]


def generate_all(reader: Reader, inputs: pd.DataFrame, *, constrained: bool = False,
                 grammar: str | None = None, settings: dict | None = None,
                 answer_max_tokens: int = ANSWER_MAX_TOKENS,
                 max_input_tokens: int | None = MAX_INPUT_TOKENS,
                 choices: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Check every prompt of ``inputs`` against the input budget, then ask ``reader``.

    ``inputs`` has one row per prompt: ``question_id``, ``messages`` and, with ``constrained``,
    ``retrieved_ids`` (each reply is then decoded under lesson 3's reply grammar for those
    passages). ``grammar`` decodes every reply under one grammar instead, with ``settings``
    in place of the reader's (lesson 4's judge). A live reader counts every prompt's tokens
    before it decodes any; a server's or a transcript's counts are checked on the replies,
    before any is returned. ``choices`` (the judge's words) has a live reader record each
    choice's probability at the first step (see :meth:`LiveReader.generate_many`); a
    transcript replays it. While a person waits for a model, a progress bar names the
    questions of the batch in progress; a book build shows none. Returns
    :data:`runtime.records.REPLY_COLUMNS` (and ``retrieved_ids``, when ``inputs`` has them).
    """
    settings = reader.settings if settings is None else dict(settings)
    if settings.get("do_sample"):
        raise ReaderError("the book's readers decode greedily only (do_sample=False)")
    question_ids = [str(q) for q in inputs["question_id"]]
    messages_list = [list(m) for m in inputs["messages"]]
    grammars, keyed = _grammars(reader, inputs, constrained, grammar, answer_max_tokens,
                                settings)
    live = isinstance(reader, LiveReader)
    if max_input_tokens is not None and live:
        check_input_budget({q: reader.prompt_tokens(m, q)
                            for q, m in zip(question_ids, messages_list)}, max_input_tokens)
    name = reader.model_id.rsplit("/", 1)[-1]
    label = f"{name} ({reader.mode}{', under a grammar' if grammar or constrained else ''})"
    with QuestionProgress(len(question_ids), label, show=reader.mode != "recorded") as bar:
        replies = reader.generate_many(question_ids, messages_list, keyed, grammars, bar,
                                       **({"choices": choices} if choices and live else {}))
    if max_input_tokens is not None and not live:
        # A server counts the prompt as it reads it, a transcript recorded its count: both
        # are checked before any reply is returned.
        check_input_budget({g.question_id: g.prompt_tokens for g in replies}, max_input_tokens)
    table = pd.DataFrame([{c: getattr(g, c) for c in REPLY_COLUMNS} for g in replies],
                         columns=REPLY_COLUMNS)
    if "retrieved_ids" in inputs:
        table.insert(1, "retrieved_ids", list(inputs["retrieved_ids"]))
    table.attrs["generations"] = replies
    return table


def mode_sentence(reader: Reader, results: pd.DataFrame | None = None) -> str:
    """The reader-mode sentence: which mode ran, where the replies came from, the model
    and its revision. One of the two sentences of a page that the machinery writes (the
    other is :func:`live_check`). Without ``results`` it describes the reader itself (a
    recorded reader: the provenance of its model's entries in the transcript)."""
    if results is None:
        mode, revision = reader.mode, reader.revision
        made = sorted({e.provenance for e in getattr(reader, "entries", ())
                       if e.model_id == reader.model_id})
    else:
        modes = sorted(set(results["mode"]))
        if len(modes) != 1:
            raise ValueError(f"the replies were produced in more than one mode: {modes}")
        mode, revision = modes[0], results["revision"].iloc[0]
        made = sorted(set(results["provenance"].dropna()))
    where = {"recorded": "replayed from the recorded transcript "
                         "`data/riverton/reader-transcript.jsonl`",
             "live": "generated live on this machine with transformers"}
    sentence = (f"**Reader mode for this render:** {mode}. Its replies are "
                f"{where.get(mode) or reader.server.sentence()}, for "
                f"`{reader.spec.model_id}` at revision `{revision}`.")
    if mode == "recorded" and made == [TRANSCRIBED]:
        sentence += (" Those entries were transcribed by hand from the printed reference "
                     "render of this lesson, which ran the pinned model: its raw replies, "
                     "their token counts and stopping flags, and the prompt token counts. "
                     "Running the model live needs its weights in the local Hugging Face "
                     "cache (see the appendix for authors and instructors).")
    elif mode == "recorded":
        sentence += " The recorded entries say how they were made: " + "; ".join(made) + "."
    elif mode == "server":
        sentence += (f" About that revision: {reader.server.revision_note}. The prompt "
                     "and output token counts are the server's own (`usage`).")
    return sentence


def live_check(recorded: pd.DataFrame, live: pd.DataFrame) -> str:
    """The live-check sentence under a page's replayed replies: the same prompts run live
    on this machine, how long that took, and which replies differ from the recorded ones
    (text, token count and end of sequence). It reports and never stops the page: greedy
    decoding can take another token on another CPU where two tokens score almost alike
    (lesson 3, "Run the six prompts as they are")."""
    if list(recorded["question_id"]) != list(live["question_id"]):
        raise ValueError("the live check needs the same prompts, in the same order, as the "
                         "recorded replies")
    fields = ["raw_output", "output_tokens", "ended_by_eos"]
    same = (recorded[fields].to_numpy() == live[fields].to_numpy()).all(axis=1)
    differ = [f"{q} (live: {show_line_breaks(text)[:80]!r})" for q, text, alike
              in zip(live["question_id"], live["raw_output"], same) if not alike]
    return (f"**Live check:** run live on this machine in {live['seconds'].sum():.1f} seconds, "
            f"`{live['model_id'].iloc[0]}` gave the recorded reply, token for token, to "
            f"{int(same.sum())} of the {len(same)} prompts. Replies that differ: "
            f"{'; '.join(differ) or 'none'}.")
