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
from .transcript import (
    GENERATED_LIVE,
    TRANSCRIPT_PATH,
    TranscriptEntry,
    merge_entries,
    read_transcript,
    write_transcript,
)


def recorder_label() -> str:
    """Who recorded: the command and the library versions, nothing about the host."""
    versions = []
    for package in ("transformers", "torch"):
        try:
            versions.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return f"python -m helpers.reader record ({', '.join(versions)}, CPU, greedy)"


def record_entries(reader: Reader, inputs_df: pd.DataFrame,
                   recorded_by: str | None = None,
                   recorded_on: str | None = None) -> list[TranscriptEntry]:
    """Generate for every row of ``inputs_df`` (live or on a server) and return entries.

    A server's entries have the same keys as a live run's (model, revision, messages,
    settings), so they replay wherever a live run's would; their ``recorded_by`` and
    ``provenance`` say "server" and the engine and version the server reported.
    """
    if reader.mode not in ("live", "server"):
        raise ValueError(f"recording needs a live or server reader, not a {reader.mode} one")
    generations = generate_all(reader, inputs_df)
    if reader.mode == "server":
        recorded_by = recorded_by or reader.recorder_label()
        provenance = reader.provenance
    else:
        recorded_by = recorded_by or recorder_label()
        provenance = GENERATED_LIVE
    recorded_on = recorded_on or datetime.date.today().isoformat()
    entries = []
    for messages, row in zip(inputs_df["messages"], generations.itertuples(index=False)):
        entries.append(
            TranscriptEntry(
                key=reader.key(messages),
                question_id=row.question_id,
                model_id=row.model_id,
                revision=row.revision,
                settings=reader.settings,
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
                recorded_by: str | None = None) -> list[TranscriptEntry]:
    """Record ``inputs_df`` (live or on a server) and rewrite ``transcript`` atomically.

    The existing transcript is validated first; entries for the same question and model
    are replaced, all others kept. Nothing is written if any step fails.
    """
    existing = read_transcript(transcript)
    new = record_entries(reader, inputs_df, recorded_by)
    write_transcript(transcript, merge_entries(existing, new))
    return new
