"""Constrained decoding: a grammar that only lets the reader write the two-line reply.

Introduced in lesson 3, "Force the format with a grammar". The grammar
(:mod:`helpers.reader.grammar`, whose names this module also offers) is written in
llguidance's Lark dialect and enforced token by token through a transformers
``LogitsProcessor``:
before each greedy step, every token that would leave the grammar gets a score of
minus infinity. The grammar fixes the *shape* of the reply (``Answer:`` line,
``Sources:`` line, end of sequence) and the set of IDs it may cite; it says nothing
about whether the answer is true, which is the lesson's point.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import pandas as pd
from transformers import LogitsProcessor, LogitsProcessorList

from ..progress import QuestionProgress
from . import decoding
from .generation import Generation, cpu_threads, stopping_diagnostics
from .grammar import (  # noqa: F401 - the grammar's names, as lesson 3 uses them
    ANSWER_MAX_CHARS,
    ANSWER_MAX_TOKENS,
    ANSWER_PATTERN,
    CONSTRAINED_DECODING,
    MAX_CITABLE_IDS,
    ConstrainedDecodingError,
    build_gbnf,
    build_grammar,
    check_ids,
    constrained_settings,
    reply_matches_gbnf,
    source_lists,
)
from .registry import DEFAULT_SETTINGS
from .transcript import transcript_key

# --- the llguidance side --------------------------------------------------------------

# One llguidance tokenizer per Hugging Face tokenizer object (building one takes ~0.5 s).
_LL_TOKENIZERS: dict[int, tuple[Any, Any]] = {}


def ll_tokenizer(hf_tokenizer: Any) -> Any:
    """The llguidance tokenizer for a fast Hugging Face tokenizer, built once per object."""
    import llguidance.hf

    cached = _LL_TOKENIZERS.get(id(hf_tokenizer))
    if cached is not None and cached[0] is hf_tokenizer:
        return cached[1]
    built = llguidance.hf.from_tokenizer(hf_tokenizer)
    _LL_TOKENIZERS[id(hf_tokenizer)] = (hf_tokenizer, built)
    return built


def new_matcher(hf_tokenizer: Any, grammar: str) -> Any:
    """A fresh ``llguidance.LLMatcher`` for ``grammar``; raises if the grammar is invalid."""
    import llguidance

    matcher = llguidance.LLMatcher(
        ll_tokenizer(hf_tokenizer), llguidance.LLMatcher.grammar_from_lark(grammar), log_level=0
    )
    if matcher.is_error():
        raise ConstrainedDecodingError(f"llguidance refused the grammar: {matcher.get_error()}")
    return matcher


def grammar_accepts(hf_tokenizer: Any, retrieved_ids: Iterable[str], text: str, *,
                    answer_pattern: str = ANSWER_PATTERN) -> bool:
    """Whether ``text`` followed by end of sequence is a complete reply under the grammar.

    The text is tokenized the usual way and fed to a fresh matcher; used by the tests and
    by lesson 3 to show which replies the grammar admits.
    """
    matcher = new_matcher(hf_tokenizer, build_grammar(retrieved_ids, answer_pattern=answer_pattern))
    tokens = hf_tokenizer(text, add_special_tokens=False)["input_ids"]
    if not matcher.consume_tokens(list(tokens)):
        return False
    # An accepting matcher allows end of sequence next, and nothing else once complete.
    return bool(matcher.is_accepting())


def reply_token_bound(
    hf_tokenizer: Any,
    retrieved_ids: Iterable[str],
    *,
    answer_max_tokens: int = ANSWER_MAX_TOKENS,
) -> int:
    """An upper bound on the tokens a constrained reply can take, end of sequence included.

    The fixed keys are forced token by token in their usual tokenization, so they cost
    what the tokenizer says; the answer costs at most ``answer_max_tokens``; the
    ``Sources:`` value is chosen by the model and is bounded by its length in bytes
    (a token is at least one byte), plus one for the space after the colon.
    """
    longest = max(len(value.encode()) for value in source_lists(retrieved_ids))

    def count(text: str) -> int:
        return len(hf_tokenizer(text, add_special_tokens=False)["input_ids"])

    return count("Answer:") + answer_max_tokens + count("\nSources:") + 1 + longest + 1


class GrammarLogitsProcessor(LogitsProcessor):
    """A transformers logits processor that masks every token leaving the grammar.

    Lesson 3, "Force the format with a grammar". At each step it feeds the tokens
    generated since the last call to the llguidance matcher, asks the matcher which tokens
    may come next and sets the scores of all others to minus infinity. Where the grammar
    forces text (``Answer:``, ``Sources:``), only the first of the matcher's fast-forward
    tokens is allowed, so forced text is spelled in the tokenizer's usual tokens. Greedy
    search then takes the best allowed token. One processor follows one sequence; a
    batch gives each row its own (:meth:`allowed_after`).
    """

    def __init__(self, hf_tokenizer: Any, grammar: str, prompt_length: int) -> None:
        import llguidance.torch

        self.hf_tokenizer = hf_tokenizer
        self.matcher = new_matcher(hf_tokenizer, grammar)
        self.prompt_length = int(prompt_length)
        self.consumed: list[int] = []
        self.vocab_size = ll_tokenizer(hf_tokenizer).vocab_size
        self._bitmask = llguidance.torch.allocate_token_bitmask(1, self.vocab_size)

    def consume(self, new: list[int]) -> None:
        """Feed tokens to the matcher; leaving the grammar is an error."""
        if new and not self.matcher.consume_tokens(list(new)):
            raise ConstrainedDecodingError(
                "the generated tokens left the grammar after "
                f"{self.hf_tokenizer.decode(self.consumed + new)!r}: {self.matcher.get_error()}"
            )
        self.consumed += new

    def allowed_mask(self, vocab_width: int) -> Any:
        """A boolean tensor (1, vocab_width): which tokens the grammar allows next."""
        import llguidance.torch
        import torch

        allowed = torch.zeros((1, vocab_width), dtype=torch.bool)
        forced = self.matcher.compute_ff_tokens()
        if forced:
            allowed[0, forced[0]] = True
            return allowed
        llguidance.torch.fill_next_token_bitmask(self.matcher, self._bitmask)
        # Unpack the 32-bit words: bit j of word i says whether token 32*i + j is allowed.
        # (llguidance.torch's own apply function is wrapped in torch.compile, which would
        # need a compiler toolchain on first use; this plain unpacking needs none.)
        shifts = torch.arange(32, dtype=torch.int32)
        bits = ((self._bitmask.unsqueeze(-1) >> shifts) & 1).bool().reshape(1, -1)
        width = min(vocab_width, bits.shape[1], self.vocab_size)
        allowed[0, :width] = bits[0, :width]
        return allowed

    def allowed_after(self, generated: list[int], vocab_width: int) -> Any:
        """The tokens allowed after the row's ``generated`` tokens (a boolean tensor of
        ``vocab_width``): what one row of a batch asks (:mod:`helpers.reader.decoding`)."""
        self.consume(generated[len(self.consumed):])
        return self.allowed_mask(vocab_width)[0]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if input_ids.shape[0] != 1:
            raise ValueError("GrammarLogitsProcessor handles a batch of one sequence")
        self.consume(input_ids[0, self.prompt_length + len(self.consumed) :].tolist())
        allowed = self.allowed_mask(scores.shape[-1]).to(scores.device)
        return scores.masked_fill(~allowed, float("-inf"))


# --- generation -----------------------------------------------------------------------

@dataclass(frozen=True)
class ConstrainedGeneration(Generation):
    """One constrained reply: the reader's ``Generation`` fields plus grammar facts.

    Lesson 3, "Force the format with a grammar". ``grammar_complete`` says whether the matcher reached
    the end of the grammar before end of sequence (it should, every time; ``None`` for a
    replayed reply, where no matcher ran); ``seconds`` is the wall time of the
    ``generate`` call; ``settings`` are the ones the transcript key hashes
    (:func:`constrained_settings`).
    """

    constrained: bool = True
    retrieved_ids: tuple[str, ...] = ()
    grammar_complete: bool | None = False
    seconds: float = 0.0
    settings: dict = field(default_factory=dict)


class _PairReader:
    """A minimal live reader around a (model, tokenizer) pair, with the book's settings."""

    mode = "live"

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.model_id = getattr(model.config, "_name_or_path", "") or type(model).__name__
        self.revision = ""
        self.settings = dict(DEFAULT_SETTINGS)
        eos = model.generation_config.eos_token_id
        eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
        self.eos_ids = {int(i) for i in eos} | {int(tokenizer.eos_token_id)}

    @property
    def pad_id(self) -> int:
        pad_id = self.tokenizer.pad_token_id
        return min(self.eos_ids) if pad_id is None else int(pad_id)

    def encode(self, messages: list[dict]) -> Any:
        return self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )

    def key(self, messages: list[dict], settings: dict | None = None) -> str:
        settings = self.settings if settings is None else settings
        return transcript_key(self.model_id, self.revision, messages, settings)


def _live_reader(reader_or_model: Any) -> Any:
    if isinstance(reader_or_model, tuple) and len(reader_or_model) == 2:
        return _PairReader(*reader_or_model)
    mode = getattr(reader_or_model, "mode", None)
    if mode != "live":
        raise ConstrainedDecodingError(
            "constrained decoding steers the model token by token, so it needs a live "
            f"reader; this reader is in {mode!r} mode. Load it with "
            "helpers.reader.load_reader(key, mode='live'), or replay recorded "
            "constrained replies with helpers.reader.constrained.replay_constrained."
        )
    return reader_or_model


def _finish_under_grammar(live, messages: list[dict], question_id: str, n_prompt: int,
                          new_ids: list[int], processor: GrammarLogitsProcessor, grammar: str,
                          settings: dict, retrieved_ids: tuple[str, ...],
                          seconds: float) -> ConstrainedGeneration:
    """The :class:`ConstrainedGeneration` of a reply decoded under ``processor``'s grammar."""
    cap = int(settings["max_new_tokens"])
    eos_ids = set(live.eos_ids)
    count, ended_by_eos, hit_cap = stopping_diagnostics(new_ids, eos_ids, cap)
    new_ids = new_ids[:count]
    # Feed the matcher every generated token but the final end of sequence: it must then
    # be in an accepting state, which is what "the reply completed the grammar" means.
    body = new_ids[:-1] if ended_by_eos else new_ids
    try:
        processor.consume(body[len(processor.consumed):])
    except ConstrainedDecodingError as error:
        raise ConstrainedDecodingError(f"{question_id}: {error}") from error
    keyed = constrained_settings(settings, grammar)
    return ConstrainedGeneration(
        question_id=question_id,
        raw_output=live.tokenizer.decode(new_ids, skip_special_tokens=True),
        output_tokens=count,
        ended_by_eos=ended_by_eos,
        hit_token_cap=hit_cap,
        prompt_tokens=n_prompt,
        mode="live",
        model_id=live.model_id,
        revision=live.revision,
        key=live.key(messages, keyed),
        token_ids=tuple(new_ids),
        constrained=True,
        retrieved_ids=tuple(retrieved_ids),
        grammar_complete=ended_by_eos and bool(processor.matcher.is_accepting()),
        seconds=seconds,
        settings=keyed,
    )


def _greedy_settings(live, settings: dict | None, question_id: str) -> dict:
    settings = dict(live.settings if settings is None else settings)
    if settings.get("do_sample"):
        raise ConstrainedDecodingError(f"{question_id}: constrained decoding here is greedy only")
    return settings


def generate_under_grammar(
    reader_or_model: Any,
    messages: Sequence[dict],
    grammar: str,
    question_id: str,
    settings: dict | None = None,
    retrieved_ids: Iterable[str] = (),
) -> ConstrainedGeneration:
    """Generate one reply greedily under any llguidance ``grammar``, through transformers'
    own ``generate``.

    ``settings`` (greedy, ``max_new_tokens``, ``repetition_penalty``) default to the
    reader's; the returned generation is keyed by them plus the grammar
    (:func:`constrained_settings`). :func:`generate_constrained` calls this with the
    two-line reply grammar; lesson 4's judge with a one-word grammar. Several prompts
    decode together with :func:`generate_under_grammars`.
    """
    import torch

    live = _live_reader(reader_or_model)
    tokenizer = live.tokenizer
    settings = _greedy_settings(live, settings, question_id)
    cap = int(settings["max_new_tokens"])
    messages = list(messages)
    encoded = live.encode(messages)
    n_prompt = int(encoded["input_ids"].shape[1])
    processor = GrammarLogitsProcessor(tokenizer, grammar, n_prompt)
    eos_ids = sorted(live.eos_ids)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    started = time.perf_counter()
    try:
        # The same torch thread count as the reader's own generate (SmolLM2: one thread).
        threads = getattr(getattr(live, "spec", None), "cpu_threads", None)
        with torch.inference_mode(), cpu_threads(threads):
            output = live.model.generate(
                **encoded,
                max_new_tokens=cap,
                do_sample=False,
                repetition_penalty=settings["repetition_penalty"],
                logits_processor=LogitsProcessorList([processor]),
                eos_token_id=eos_ids,
                pad_token_id=pad_id,
                temperature=None,
                top_p=None,
                top_k=None,
            )
    except ConstrainedDecodingError as error:
        raise ConstrainedDecodingError(f"{question_id}: {error}") from error
    seconds = time.perf_counter() - started
    new_ids = [int(t) for t in output[0, n_prompt:]]
    return _finish_under_grammar(live, messages, question_id, n_prompt, new_ids, processor,
                                 grammar, settings, tuple(retrieved_ids), seconds)


def generate_under_grammars(
    reader_or_model: Any,
    messages_list: Sequence[Sequence[dict]],
    grammars: Sequence[str],
    question_ids: Sequence[str],
    settings: dict | None = None,
    retrieved_ids_list: Sequence[Iterable[str]] | None = None,
    *,
    size: int | None = None,
    bar: Any = None,
) -> list[ConstrainedGeneration]:
    """One greedy reply per prompt, each under its own llguidance grammar, decoded
    ``size`` prompts at a time (default: :func:`helpers.reader.decoding.batch_size`).

    Each row of a batch keeps its own grammar state; batch size 1 runs
    :func:`generate_under_grammar` for each prompt. ``seconds`` is a batch's wall time
    divided by its prompts. ``bar``, when given, names the questions of the batch in
    progress. Lesson 3, "Run the same six prompts under the grammar".
    """
    import torch

    live = _live_reader(reader_or_model)
    messages_list = [list(m) for m in messages_list]
    question_ids = list(question_ids)
    ids_list = [tuple(ids) for ids in (retrieved_ids_list or [()] * len(messages_list))]
    size = decoding.batch_size(size)
    settings = _greedy_settings(live, settings, question_ids[0] if question_ids else "?")
    jobs = list(zip(question_ids, messages_list, grammars, ids_list))
    if size == 1:
        results: list[ConstrainedGeneration] = []
        for q, m, g, ids in jobs:
            if bar is not None:
                bar.working_on(q)
            results.append(generate_under_grammar(live, m, g, q, settings, ids))
            if bar is not None:
                bar.finished()
        return results
    prompts = [live.encode(m)["input_ids"][0].tolist() for m in messages_list]
    width = live.model.get_output_embeddings().weight.shape[0]
    threads = getattr(getattr(live, "spec", None), "cpu_threads", None)

    def rule(processor, question_id):
        def allowed(generated):
            try:
                return processor.allowed_after(generated, width)
            except ConstrainedDecodingError as error:
                raise ConstrainedDecodingError(f"{question_id}: {error}") from error
        return allowed

    done: dict[int, ConstrainedGeneration] = {}
    for chunk in decoding.batches_by_length([len(p) for p in prompts], size):
        if bar is not None:
            bar.working_on_batch([question_ids[i] for i in chunk])
        processors = {i: GrammarLogitsProcessor(live.tokenizer, grammars[i], len(prompts[i]))
                      for i in chunk}
        started = time.perf_counter()
        with torch.inference_mode(), cpu_threads(threads):
            replies = decoding.greedy_batch(
                live.model, [prompts[i] for i in chunk],
                max_new_tokens=int(settings["max_new_tokens"]),
                repetition_penalty=settings["repetition_penalty"], eos_ids=set(live.eos_ids),
                pad_id=live.pad_id,
                allowed=[rule(processors[i], question_ids[i]) for i in chunk])
        seconds = (time.perf_counter() - started) / len(chunk)
        for i, ids in zip(chunk, replies):
            q, m, g, rids = jobs[i]
            done[i] = _finish_under_grammar(live, m, q, len(prompts[i]), ids, processors[i], g,
                                            settings, rids, seconds)
        if bar is not None:
            bar.finished(len(chunk))
    return [done[i] for i in range(len(jobs))]


def generate_constrained(
    reader_or_model: Any,
    messages: Sequence[dict],
    retrieved_ids: Iterable[str],
    question_id: str,
    *,
    answer_max_tokens: int = ANSWER_MAX_TOKENS,
    answer_pattern: str = ANSWER_PATTERN,
) -> ConstrainedGeneration:
    """Generate one reply greedily under the two-line grammar for ``retrieved_ids``.

    ``reader_or_model`` is a live reader from ``helpers.reader.load_reader`` (the model
    is loaded once per process there), a ``(model, tokenizer)`` pair, or a server reader
    (the server then enforces the grammar, see :func:`generate_constrained_many`). The
    settings are the reader's: greedy, repetition penalty 1.05, 48 new tokens at most.
    Raises ``ConstrainedDecodingError`` naming the question if the grammar's longest
    reply would not fit in the token cap, or if generation leaves the grammar.
    ``answer_pattern`` replaces the answer rule's regular expression (see
    :func:`build_grammar`); the token bound holds for any pattern. A live reply's
    transcript key hashes the grammar too (:func:`constrained_settings`).
    Lesson 3, "Force the format with a grammar".
    """
    ids = check_ids(retrieved_ids)
    if getattr(reader_or_model, "mode", None) == "server":
        return generate_constrained_many(reader_or_model, [messages], [ids], [question_id])[0]
    live = _live_reader(reader_or_model)
    grammar = _reply_grammar(live, ids, question_id, answer_max_tokens, answer_pattern)
    return generate_under_grammar(live, messages, grammar, question_id, retrieved_ids=ids)


def _reply_grammar(live, ids: tuple[str, ...], question_id: str, answer_max_tokens: int,
                   answer_pattern: str = ANSWER_PATTERN) -> str:
    """The two-line reply grammar for ``ids``, once its longest reply is shown to fit the
    reader's token cap (a ``ConstrainedDecodingError`` naming the question otherwise)."""
    cap = int(live.settings["max_new_tokens"])
    bound = reply_token_bound(live.tokenizer, ids, answer_max_tokens=answer_max_tokens)
    if bound > cap:
        raise ConstrainedDecodingError(
            f"{question_id}: the longest reply the grammar allows takes {bound} tokens, "
            f"over the cap of {cap}; lower answer_max_tokens"
        )
    return build_grammar(ids, answer_max_tokens=answer_max_tokens, answer_pattern=answer_pattern)


def generate_constrained_batches(
    reader_or_model: Any,
    messages_list: Sequence[Sequence[dict]],
    retrieved_ids_list: Sequence[Iterable[str]],
    question_ids: Sequence[str],
    *,
    answer_max_tokens: int = ANSWER_MAX_TOKENS,
    size: int | None = None,
    bar: Any = None,
) -> list[ConstrainedGeneration]:
    """:func:`generate_constrained` for many prompts of a live reader, decoded ``size``
    at a time (:func:`generate_under_grammars`), in input order. Lesson 3, "Run the
    same six prompts under the grammar"."""
    live = _live_reader(reader_or_model)
    ids_list = [check_ids(ids) for ids in retrieved_ids_list]
    grammars = [_reply_grammar(live, ids, q, answer_max_tokens)
                for ids, q in zip(ids_list, question_ids)]
    return generate_under_grammars(live, messages_list, grammars, question_ids,
                                   retrieved_ids_list=ids_list, size=size, bar=bar)


def replay_constrained(
    recorded_reader: Any,
    messages: Sequence[dict],
    retrieved_ids: Iterable[str],
    question_id: str,
    *,
    answer_max_tokens: int = ANSWER_MAX_TOKENS,
) -> ConstrainedGeneration:
    """The recorded constrained reply to ``messages`` under the grammar for ``retrieved_ids``.

    Looks the reply up by the same key a live :func:`generate_constrained` gives it, so
    a changed prompt or grammar is refused with the recorded reader's ``ReplayError``.
    Lesson 4, "The replies under review".
    """
    ids = check_ids(retrieved_ids)
    grammar = build_grammar(ids, answer_max_tokens=answer_max_tokens)
    keyed = constrained_settings(recorded_reader.settings, grammar)
    replayed = recorded_reader.generate(list(messages), question_id, settings=keyed)
    return ConstrainedGeneration(
        **{name: getattr(replayed, name) for name in Generation.__dataclass_fields__},
        constrained=True,
        retrieved_ids=ids,
        grammar_complete=None,
        seconds=0.0,
        settings=keyed,
    )


def generate_constrained_many(
    server_reader: Any,
    messages_list: Sequence[Sequence[dict]],
    retrieved_ids_list: Sequence[Iterable[str]],
    question_ids: Sequence[str],
) -> list[ConstrainedGeneration]:
    """Constrained replies from a server reader, sent concurrently, in question order.

    The server enforces the grammar itself (GBNF for llama.cpp, the Lark grammar for
    vLLM; an engine that cannot is refused with an error). ``grammar_complete`` is
    checked here on the returned text: the reply ended with end of sequence and lies in
    the grammar's language. ``seconds`` is the wall time of the whole batch divided by
    the number of prompts; ``settings`` are the ones the reply's key hashes (on vLLM a
    live constrained reply's, on llama.cpp the GBNF grammar's). Lesson 3, "The grammar on
    a serving engine".
    """
    ids_list = [check_ids(ids) for ids in retrieved_ids_list]
    started = time.perf_counter()
    generations = server_reader.generate_many(messages_list, question_ids, grammars=ids_list)
    seconds = (time.perf_counter() - started) / max(1, len(generations))
    # A Lark grammar bounds the answer in tokens; check only the shape of its language.
    gbnf = server_reader.server.engine.grammar == "gbnf"
    bound = ANSWER_MAX_CHARS if gbnf else 10_000
    return [
        ConstrainedGeneration(
            **{f.name: getattr(g, f.name) for f in dataclasses.fields(Generation)},
            constrained=True,
            retrieved_ids=ids,
            grammar_complete=g.ended_by_eos and reply_matches_gbnf(ids, g.raw_output,
                                                                   answer_max_chars=bound),
            seconds=seconds,
            settings=server_reader.grammar_settings(ids, g.question_id),
        )
        for g, ids in zip(generations, ids_list)
    ]


#: The columns of :func:`generate_all_constrained`'s table, in order.
CONSTRAINED_COLUMNS = [
    "question_id", "raw_output", "output_tokens", "ended_by_eos", "hit_token_cap",
    "grammar_complete", "retrieved_ids", "prompt_tokens", "seconds",
]


def generate_all_constrained(
    reader_or_model: Any,
    inputs_df: pd.DataFrame,
    *,
    answer_max_tokens: int = ANSWER_MAX_TOKENS,
) -> pd.DataFrame:
    """One constrained reply per row of ``inputs_df`` (``question_id``, ``messages``,
    ``retrieved_ids``), as a table with :data:`CONSTRAINED_COLUMNS`.

    Each reply is :func:`generate_constrained` under that question's grammar, decoded in
    batches (:func:`generate_constrained_batches`). While a person runs it, a progress
    bar names the questions of the batch in progress (see :mod:`helpers.progress`); a
    book build shows none. A server reader sends the prompts concurrently through
    :func:`generate_constrained_many` instead. Lesson 3, "Run the same six prompts under
    the grammar".
    """
    if getattr(reader_or_model, "mode", None) == "server":
        # The server enforces the grammar and answers the prompts concurrently.
        generations = generate_constrained_many(
            reader_or_model, list(inputs_df["messages"]), list(inputs_df["retrieved_ids"]),
            list(inputs_df["question_id"]))
    else:
        live = _live_reader(reader_or_model)
        label = f"{live.model_id.rsplit('/', 1)[-1]} (live, under the grammar)"
        with QuestionProgress(len(inputs_df), label) as bar:
            generations = generate_constrained_batches(
                live, list(inputs_df["messages"]), list(inputs_df["retrieved_ids"]),
                list(inputs_df["question_id"]), answer_max_tokens=answer_max_tokens, bar=bar)
    return pd.DataFrame(
        [{column: getattr(g, column) for column in CONSTRAINED_COLUMNS} for g in generations],
        columns=CONSTRAINED_COLUMNS,
    )
