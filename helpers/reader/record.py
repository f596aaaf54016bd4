"""Recording a reader's generations into the transcript (the ``record`` command).

Introduced in lesson 1, "Ask the reader for two lines", where the page says how the
recorded outputs were made and how to make them again.
"""
from __future__ import annotations

import datetime
import importlib.metadata
import os

import pandas as pd

from .generation import Reader, generate_all
from .grammar import ConstrainedDecodingError
from .prompts import check_input_budget
from .transcript import (
    GENERATED_LIVE,
    TRANSCRIPT_PATH,
    TranscriptEntry,
    merge_entries,
    read_transcript,
    write_transcript,
)


def recorder_label(constrained: bool = False, *, command: str | None = None,
                   grammar: str = "the reply grammar") -> str:
    """Who recorded: the command and the library versions, nothing about the host.

    ``command`` and ``grammar`` name another recording command and the grammar it
    decodes under (lesson 4's judge records with its own).
    """
    packages = ("transformers", "torch") + (("llguidance",) if constrained else ())
    versions = []
    for package in packages:
        try:
            versions.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    if command is None:
        command = "python -m helpers.reader record" + (" --constrained" if constrained else "")
    decoding = f"greedy under {grammar}" if constrained else "greedy"
    return f"{command} ({', '.join(versions)}, CPU, {decoding})"


def _complete(generation, source: str = ""):
    """``generation``, if its constrained reply completed the grammar; else the error that
    names the question, the reply and ``source`` (where it came from, if not live)."""
    if not generation.grammar_complete:
        raise ConstrainedDecodingError(
            f"{generation.question_id}: the constrained reply {generation.raw_output!r}"
            f"{source} did not complete the grammar; nothing was recorded"
        )
    return generation


def _constrained_generations(reader: Reader, inputs_df: pd.DataFrame) -> list:
    """Lesson 3's grammar-constrained reply for every row, after the input budget check."""
    from .constrained import generate_constrained_batches

    check_input_budget({qid: reader.prompt_tokens(messages, qid) for qid, messages in
                        zip(inputs_df["question_id"], inputs_df["messages"])})
    generations = generate_constrained_batches(
        reader, list(inputs_df["messages"]), list(inputs_df["retrieved_ids"]),
        list(inputs_df["question_id"]))
    return [_complete(generation) for generation in generations]


def _server_constrained_generations(reader, inputs_df: pd.DataFrame) -> list:
    """Lesson 3's grammar-constrained reply for every row, from a server that runs the
    llguidance grammar itself (vLLM's guidance backend), after the input budget check."""
    from .constrained import generate_constrained_many
    from .server import ServerError

    info = reader.server
    if info.engine.grammar != "lark":
        enforced = ("the GBNF form of the grammar, whose answer is bounded in characters "
                    "rather than tokens" if info.engine.grammar == "gbnf"
                    else "no grammar that the book knows how to send")
        raise ServerError(
            info.url, None,
            f"`record --constrained` keys each reply by lesson 3's llguidance grammar, so "
            f"that it replays where a live constrained reply would; {info.engine_label} "
            f"enforces {enforced}, so its replies would be keyed by a grammar they were not "
            f"decoded under. Record constrained replies live (`python -m helpers.reader "
            f"record --reader {reader.spec.key} --constrained`) or from vLLM with the "
            "guidance backend; unconstrained replies record from any server.",
        )
    generations = generate_constrained_many(
        reader, list(inputs_df["messages"]), list(inputs_df["retrieved_ids"]),
        list(inputs_df["question_id"]))
    check_input_budget({g.question_id: g.prompt_tokens for g in generations})
    return [_complete(generation, f" from {info.url}") for generation in generations]


def record_entries(reader: Reader, inputs_df: pd.DataFrame,
                   recorded_by: str | None = None,
                   recorded_on: str | None = None,
                   constrained: bool = False) -> list[TranscriptEntry]:
    """Generate for every row of ``inputs_df`` (live or on a server) and return entries.

    A server's entries have the same keys as a live run's (model, revision, messages,
    settings), so they replay wherever a live run's would; their ``recorded_by`` and
    ``provenance`` say "server" and the engine and version the server reported.
    With ``constrained``, each reply is decoded under lesson 3's two-line grammar for the
    row's ``retrieved_ids`` and keyed by the reader's settings plus the grammar
    (:func:`helpers.reader.grammar.constrained_settings`): live, or on a server that runs that
    same llguidance grammar (vLLM's guidance backend). A server that enforces another form
    of it (GBNF on llama.cpp) is refused before any prompt is sent, since its replies
    would carry a key they were not decoded under.
    """
    if reader.mode not in ("live", "server"):
        raise ValueError(f"recording needs a live or server reader, not a {reader.mode} one")
    if constrained:
        generate = (_server_constrained_generations if reader.mode == "server"
                    else _constrained_generations)
        generations = generate(reader, inputs_df)
        settings = [g.settings for g in generations]
    else:
        table = generate_all(reader, inputs_df)
        generations = list(table.itertuples(index=False))
        settings = [reader.settings] * len(generations)
    if reader.mode == "server":
        recorded_by = recorded_by or reader.recorder_label(constrained)
        provenance = reader.provenance
    else:
        recorded_by = recorded_by or recorder_label(constrained)
        provenance = GENERATED_LIVE
    recorded_on = recorded_on or datetime.date.today().isoformat()
    entries = []
    for messages, row, used in zip(inputs_df["messages"], generations, settings):
        entries.append(
            TranscriptEntry(
                key=reader.key(messages, used),
                question_id=row.question_id,
                model_id=row.model_id,
                revision=row.revision,
                settings=used,
                messages=messages,
                raw_output=row.raw_output,
                output_tokens=int(row.output_tokens),
                ended_by_eos=bool(row.ended_by_eos),
                hit_token_cap=bool(row.hit_token_cap),
                prompt_tokens=int(row.prompt_tokens),
                recorded_by=recorded_by,
                recorded_on=recorded_on,
                provenance=provenance,
            )
        )
    return entries


def record_into(reader: Reader, inputs_df: pd.DataFrame,
                transcript: str | os.PathLike = TRANSCRIPT_PATH,
                recorded_by: str | None = None,
                constrained: bool = False) -> list[TranscriptEntry]:
    """Record ``inputs_df`` (live or on a server) and rewrite ``transcript`` atomically.

    The existing transcript is validated first; entries in the same slot (question,
    model and decoding) are replaced, all others kept, so a constrained recording leaves
    the unconstrained replies alone. Nothing is written if any step fails.
    """
    existing = read_transcript(transcript)
    new = record_entries(reader, inputs_df, recorded_by, constrained=constrained)
    write_transcript(transcript, merge_entries(existing, new))
    return new
