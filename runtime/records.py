"""Recorded replies: one JSONL transcript, one format for every system that replies.

A line holds one reply and the exact request that produced it: the reader's (lessons 1-3
and 5), the sentence baseline's and lesson 4's rule-made corruptions (computed, recorded so
that lesson 4's review can name the text it judged) and the judge's (lesson 4, with its
probability of "yes" in ``choice_probabilities``). Its key is the SHA-256 of the canonical JSON
of the model, revision, messages and settings, so a changed prompt, model or setting never
replays an old reply. What the request was about travels beside it, never parsed back
out of the prompt: ``question_id``, ``passage_ids`` (the passages the prompt shows, in
order) and ``collection`` (the set of requests it was recorded with; recording a set
again replaces that set's replies of the same model and decoding, and nothing else).
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from helpers.decoding import decoding_of

from .files import write_text_atomic
from .paths import DATA_DIR

TRANSCRIPT_PATH = DATA_DIR / "reader-transcript.jsonl"

TRANSCRIBED = "transcribed from a reference render of lesson 1 made with the pinned model"
GENERATED_LIVE = "generated live"
COMPUTED = "computed by the book's code"


class TranscriptError(ValueError):
    """A transcript line is not valid JSON, lacks a field or contradicts its key."""


def canonical_json(value) -> str:
    """JSON with sorted keys, no spaces and unescaped Unicode: the text that is hashed."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def transcript_key(model_id: str, revision: str, messages: list[dict], settings: dict) -> str:
    """SHA-256 (hex) of the canonical JSON of model id, revision, messages and settings."""
    payload = {"model_id": model_id, "revision": revision, "messages": messages,
               "settings": settings}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


#: A field of :class:`Reply` that says how this run obtained the reply; never written.
_RUN = {"transcript": False}


@dataclass(frozen=True)
class Reply:
    """One reply and the request that produced it: what a reader returns (live, replayed or
    from a server) and, with what it was recorded for, one line of the transcript. A reply
    made now is written with :func:`recorded`."""

    key: str
    collection: str
    question_id: str
    passage_ids: list
    model_id: str
    revision: str
    settings: dict
    messages: list
    raw_output: str
    # Generated tokens, end of sequence included; a server's count is its own
    # usage.completion_tokens (llama-cpp-python leaves the end of sequence out). None for a
    # reply the book's code computes.
    output_tokens: int | None
    ended_by_eos: bool | None
    hit_token_cap: bool | None
    prompt_tokens: int | None
    recorded_by: str
    recorded_on: str
    provenance: str
    #: For a reply that chooses among a few words (the judge's "yes" or "no"): the
    #: probability of each choice's first token at the first step, renormalised over the
    #: choices; null for every other reply.
    choice_probabilities: dict | None = None
    mode: str = field(default="recorded", metadata=_RUN)  # "live", "recorded" or "server"
    #: Under a grammar: whether the reply completed it (None: replayed, nothing checked).
    grammar_complete: bool | None = field(default=None, metadata=_RUN)
    seconds: float = field(default=0.0, metadata=_RUN)  # its batch's wall time, shared
    token_ids: tuple | None = field(default=None, metadata=_RUN)  # live only

    @property
    def decoding(self) -> str:
        """How the reply was made (see :func:`helpers.decoding.decoding_of`)."""
        return decoding_of(self.settings)

    @property
    def slot(self) -> tuple[str, str, str]:
        """What a new recording replaces: the same collection, model and decoding."""
        return (self.collection, self.model_id, self.decoding)

    def to_json(self) -> str:
        return json.dumps({name: getattr(self, name) for name in FIELDS}, ensure_ascii=False)


#: Every field of a transcript line, with the JSON types it may take (NoneType: the field
#: may be null, as a computed reply's token counts are), as :class:`Reply` declares them.
FIELDS: dict[str, tuple] = {
    field.name: tuple({"str": str, "int": int, "bool": bool, "list": list, "dict": dict,
                       "None": type(None)}[kind] for kind in field.type.split(" | "))
    for field in fields(Reply) if field.metadata.get("transcript", True)}


#: The columns of a table of replies (:func:`runtime.readers.generate_all`), in order.
REPLY_COLUMNS = ["question_id", "raw_output", "output_tokens", "ended_by_eos", "hit_token_cap",
                 "prompt_tokens", "grammar_complete", "seconds", "mode", "model_id", "revision",
                 "provenance", "key"]


def recorded(reply: Reply, collection: str, passage_ids, recorded_by: str,
             recorded_on: str | None = None, **changes) -> Reply:
    """``reply`` as the transcript records it: the set of requests it belongs to, the
    passages its prompt shows, who recorded it and when (default: today)."""
    return replace(reply, collection=collection, passage_ids=list(passage_ids),
                   recorded_by=recorded_by,
                   recorded_on=recorded_on or datetime.date.today().isoformat(), **changes)


def computed_reply(model_id: str, revision: str, messages: list, settings: dict,
                   raw_output: str, question_id: str) -> Reply:
    """A reply the book's code computes (the sentence baseline's, a rule-made corruption),
    under the prompt it answers: keyed like a model's, with no token counts."""
    return Reply(transcript_key(model_id, revision, messages, settings), "", question_id, [],
                 model_id, revision, settings, messages, raw_output, None, None, None, None,
                 "", "", COMPUTED)


def _entry_from_line(path: Path, number: int, line: str) -> Reply:
    where = f"{path}, line {number}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise TranscriptError(f"{where}: not valid JSON ({error.msg} at column {error.colno})"
                              ) from None
    if not isinstance(record, dict):
        raise TranscriptError(f"{where}: expected a JSON object, found {type(record).__name__}")
    if missing := [name for name in FIELDS if name not in record]:
        raise TranscriptError(f"{where}: missing field(s) {', '.join(missing)}")
    if unknown := sorted(set(record) - set(FIELDS)):
        raise TranscriptError(f"{where}: unknown field(s) {', '.join(unknown)}")
    for name, kinds in FIELDS.items():
        # JSON gives exact types: a count written as true/false is wrong, though bool is an int
        if type(record[name]) not in kinds:
            raise TranscriptError(f"{where}: field {name!r} should be {kinds[0].__name__}, "
                                  f"found {json.dumps(record[name])[:40]}")
    if (chances := record["choice_probabilities"]) is not None and (
            not chances or any(isinstance(p, bool) or not isinstance(p, (int, float))
                               or not 0 <= p <= 1 for p in chances.values())
            or abs(sum(chances.values()) - 1) > 1e-6):
        raise TranscriptError(f"{where}: field 'choice_probabilities' should map each choice "
                              f"to a probability, summing to 1; found {json.dumps(chances)[:60]}")
    entry = Reply(**record)
    expected = transcript_key(entry.model_id, entry.revision, entry.messages, entry.settings)
    if entry.key != expected:
        raise TranscriptError(
            f"{where}: field 'key' does not match the entry's model_id, revision, messages "
            f"and settings (expected {expected[:12]}..., found {entry.key[:12]}...)")
    return entry


def read_transcript(path: str | os.PathLike = TRANSCRIPT_PATH) -> list[Reply]:
    """Every entry of a transcript, validated; a bad line is refused with its line number.

    A missing file reads as an empty transcript. Blank lines are skipped.
    """
    path = Path(path)
    if not path.exists():
        return []
    seen: dict[str, tuple[int, Reply]] = {}  # by key: the line and the entry, in file order
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        entry = _entry_from_line(path, number, line)
        if entry.key in seen:
            raise TranscriptError(f"{path}, line {number}: key {entry.key[:12]}... repeats "
                                  f"line {seen[entry.key][0]}")
        seen[entry.key] = (number, entry)
    return [entry for _, entry in seen.values()]


def merge_entries(existing: Iterable[Reply],
                  new: Iterable[Reply]) -> list[Reply]:
    """``existing`` with every entry in the slot of a ``new`` one (same collection, model
    and decoding) replaced by the new ones, so a re-recorded set leaves no stale reply
    behind; so is an entry of the same request (key) recorded in another set, so that no
    key is ever held twice. The new entries take the place of the first entry they replace
    (or go at the end); two new entries with one key are an error."""
    new = list(new)
    keys = {entry.key for entry in new}
    if len(keys) != len(new):
        raise TranscriptError("two new entries have the same key (the same request twice)")
    slots, existing = {entry.slot for entry in new}, list(existing)
    replaced = [entry.slot in slots or entry.key in keys for entry in existing]
    first = replaced.index(True) if True in replaced else len(existing)
    kept = [entry for entry, gone in zip(existing, replaced) if not gone]
    return kept[:first] + new + kept[first:]  # every entry before the first replaced is kept


def write_transcript(path: str | os.PathLike, entries: Iterable[Reply]) -> None:
    """Write ``entries`` as JSONL, atomically: a reader never sees a half-written file."""
    write_text_atomic(path, "".join(entry.to_json() + "\n" for entry in entries))


def record_into(new: Iterable[Reply], transcript: str | os.PathLike) -> list[Reply]:
    """Merge ``new`` into ``transcript`` (validated first) and rewrite it atomically."""
    new = list(new)
    write_transcript(transcript, merge_entries(read_transcript(transcript), new))
    return new


def describe_difference(recorded: Reply, model_id: str, revision: str,
                        messages: list[dict], settings: dict) -> str:
    """Say what differs between a recorded entry and a request for the same question."""
    changes = []
    if recorded.model_id != model_id:
        changes.append(f"the model changed ({recorded.model_id} recorded, {model_id} now)")
    if recorded.revision != revision:
        changes.append(f"the revision changed ({recorded.revision} recorded, {revision} now)")
    if recorded.settings != settings:
        def shown(values: dict, name: str) -> str:
            text = canonical_json(values[name]) if name in values else "absent"
            return text if len(text) <= 60 else f"{len(text)} characters, sha256 " + \
                hashlib.sha256(text.encode("utf-8")).hexdigest()[:12] + "..."
        names = sorted(n for n in set(recorded.settings) | set(settings)
                       if recorded.settings.get(n, ...) != settings.get(n, ...))
        changes.append("the generation settings changed (" + "; ".join(
            f"{n}: {shown(recorded.settings, n)} recorded, {shown(settings, n)} now"
            for n in names) + ")")
    if recorded.messages != messages:
        changes.append(_message_difference(recorded.messages, messages))
    return "; ".join(changes) or "the entry differs only in its key"


def _message_difference(recorded: list, current: list) -> str:
    """Where two different lists of messages first differ."""
    if len(recorded) != len(current):
        return f"the number of messages changed ({len(recorded)} recorded, {len(current)} now)"
    old, new = next((old, new) for old, new in zip(recorded, current) if old != new)
    old_text, new_text = str(old.get("content", "")), str(new.get("content", ""))
    at = next((i for i, (a, b) in enumerate(zip(old_text, new_text)) if a != b),
              min(len(old_text), len(new_text)))
    start = max(0, at - 20)
    return (f"the {new.get('role', '?')} prompt changed at character {at}: recorded "
            f"{old_text[start:at + 30]!r}, now {new_text[start:at + 30]!r}")
