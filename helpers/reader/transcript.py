"""Recorded generations: a JSONL transcript keyed by model, revision, messages and settings.

Introduced in lesson 1, "Ask the reader for two lines" (where a render replays what a
reader wrote earlier when the model cannot run). Each line is one generation; its key is
the SHA-256 of the canonical JSON of exactly what produced it, so a changed prompt, model
or setting never replays an old answer.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from ..files import write_text_atomic
from ..paths import DATA_DIR

TRANSCRIPT_PATH = DATA_DIR / "reader-transcript.jsonl"

#: Every field a transcript line must have, with the JSON types it may take.
FIELDS: dict[str, tuple[type, ...]] = {
    "key": (str,),
    "question_id": (str,),
    "model_id": (str,),
    "revision": (str,),
    "settings": (dict,),
    "messages": (list,),
    "raw_output": (str,),
    "output_tokens": (int,),
    "ended_by_eos": (bool,),
    "hit_token_cap": (bool,),
    "prompt_tokens": (int,),
    "recorded_by": (str,),
    "recorded_on": (str,),
    "provenance": (str,),
}

TRANSCRIBED = "transcribed from a reference render of lesson 1 made with the pinned model"
GENERATED_LIVE = "generated live"

#: The settings field that names how a reply was decoded. Plain greedy decoding leaves it
#: out (so the keys of earlier entries stay as they were); any other decoding, such as
#: lesson 3's grammar, names itself there and hashes whatever else defines it (the grammar).
DECODING_FIELD = "decoding"
UNCONSTRAINED = "unconstrained"
#: Lesson 3's decoding: greedy, under an llguidance grammar that the settings also hold.
CONSTRAINED = "grammar-constrained (llguidance)"
DECODINGS = (UNCONSTRAINED, CONSTRAINED)
#: A reply that llama.cpp's server decoded under the GBNF form of lesson 3's grammar. Its
#: answer is bounded in characters, not tokens, so it is another decoding than
#: :data:`CONSTRAINED` and its key never equals a live constrained reply's; the record
#: command does not write such replies (see :mod:`helpers.reader.record`).
CONSTRAINED_GBNF = "grammar-constrained (GBNF)"


def decoding_of(settings: dict) -> str:
    """The decoding a settings dict describes: its ``decoding`` field, else unconstrained."""
    return str(settings.get(DECODING_FIELD, UNCONSTRAINED))


class TranscriptError(ValueError):
    """A transcript line is not valid JSON, lacks a field or contradicts its key."""


def canonical_json(value) -> str:
    """JSON with sorted keys, no spaces and unescaped Unicode: the text that is hashed."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def transcript_key(model_id: str, revision: str, messages: list[dict], settings: dict) -> str:
    """SHA-256 (hex) of the canonical JSON of model id, revision, messages and settings."""
    payload = {
        "model_id": model_id,
        "revision": revision,
        "messages": messages,
        "settings": settings,
    }
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TranscriptEntry:
    """One recorded generation (one line of the transcript)."""

    key: str
    question_id: str
    model_id: str
    revision: str
    settings: dict
    messages: list
    raw_output: str
    output_tokens: int
    ended_by_eos: bool
    hit_token_cap: bool
    prompt_tokens: int
    recorded_by: str
    recorded_on: str
    provenance: str

    @property
    def decoding(self) -> str:
        """How the reply was decoded (see :func:`decoding_of`)."""
        return decoding_of(self.settings)

    @property
    def slot(self) -> tuple[str, str, str, tuple[str, ...]]:
        """What a new recording replaces: the same question, model, decoding and passages.

        The passages are the IDs the prompt shows (:func:`prompt_passage_ids`), so the
        replies to lesson 2's hybrid prompts sit beside lesson 1's tf-idf replies to the
        same questions instead of replacing them.
        """
        return (self.question_id, self.model_id, self.decoding,
                prompt_passage_ids(self.messages))

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=False)


def _entry_from_line(path: Path, number: int, line: str) -> TranscriptEntry:
    where = f"{path}, line {number}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise TranscriptError(
            f"{where}: not valid JSON ({error.msg} at column {error.colno})"
        ) from None
    if not isinstance(record, dict):
        raise TranscriptError(f"{where}: expected a JSON object, found {type(record).__name__}")
    missing = [name for name in FIELDS if name not in record]
    if missing:
        raise TranscriptError(f"{where}: missing field(s) {', '.join(missing)}")
    for name, types in FIELDS.items():
        value = record[name]
        # bool is a subclass of int; a count written as true/false is still wrong.
        wrong_bool = isinstance(value, bool) and bool not in types
        if not isinstance(value, types) or wrong_bool:
            raise TranscriptError(
                f"{where}: field {name!r} should be {types[0].__name__}, "
                f"found {json.dumps(value)[:40]}"
            )
    unknown = sorted(set(record) - set(FIELDS))
    if unknown:
        raise TranscriptError(f"{where}: unknown field(s) {', '.join(unknown)}")
    entry = TranscriptEntry(**record)
    expected = transcript_key(entry.model_id, entry.revision, entry.messages, entry.settings)
    if entry.key != expected:
        raise TranscriptError(
            f"{where}: field 'key' does not match the entry's model_id, revision, messages "
            f"and settings (expected {expected[:12]}..., found {entry.key[:12]}...)"
        )
    return entry


def read_transcript(path: str | os.PathLike = TRANSCRIPT_PATH) -> list[TranscriptEntry]:
    """Every entry of a transcript, validated; a bad line is refused with its line number.

    A missing file reads as an empty transcript. Blank lines are skipped.
    """
    path = Path(path)
    if not path.exists():
        return []
    entries: list[TranscriptEntry] = []
    seen: dict[str, int] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            entry = _entry_from_line(path, number, line)
            if entry.key in seen:
                raise TranscriptError(
                    f"{path}, line {number}: key {entry.key[:12]}... repeats line "
                    f"{seen[entry.key]}"
                )
            seen[entry.key] = number
            entries.append(entry)
    return entries


def write_transcript(path: str | os.PathLike, entries: Iterable[TranscriptEntry]) -> None:
    """Write ``entries`` as JSONL, atomically: a reader never sees a half-written file."""
    write_text_atomic(path, "".join(entry.to_json() + "\n" for entry in entries))


_PASSAGE_LINE = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*): ")


def prompt_passage_ids(messages: list) -> tuple[str, ...]:
    """The passage IDs a lesson prompt shows, in order (empty when it shows none).

    Reads the ``PASSAGES:`` block of the user message (``ID: text`` lines, see
    :func:`helpers.reader.prompts.format_passage_block`); a prompt without such a block
    shows none.
    """
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        text = str(message.get("content", ""))
        _, found, rest = text.partition("PASSAGES:\n")
        if not found:
            continue
        block = rest.split("\n\n", 1)[0]
        return tuple(match.group(1) for line in block.splitlines()
                     if (match := _PASSAGE_LINE.match(line)))
    return ()


def merge_entries(
    existing: Iterable[TranscriptEntry], new: Iterable[TranscriptEntry]
) -> list[TranscriptEntry]:
    """``existing`` with every entry in the slot of a ``new`` one replaced by it.

    A slot is a question, a model, a decoding and the passages the prompt shows
    (:attr:`TranscriptEntry.slot`): a new recording of Q1 replaces the old reply of the
    same model decoded the same way over the same passages, so a changed prompt leaves no
    stale entry behind, while an unconstrained and a grammar-constrained reply to the
    same question, or replies over tf-idf's and the hybrid's passages, live side by side. Entries keep the
    order of ``existing``; replacements take the place of the first entry they replace,
    and entries for new slots go at the end. Two new entries in one slot are an error.
    """
    new = list(new)
    replacing: dict[tuple, TranscriptEntry] = {}
    for entry in new:
        if entry.slot in replacing:
            question, model, decoding, passages = entry.slot
            shown = ", ".join(passages) or "no passages"
            raise TranscriptError(
                f"two new entries for question {question} of {model} ({decoding} decoding, "
                f"{shown})"
            )
        replacing[entry.slot] = entry
    merged: list[TranscriptEntry] = []
    placed: set[tuple] = set()
    for entry in existing:
        if entry.slot in replacing:
            if entry.slot not in placed:
                merged.append(replacing[entry.slot])
                placed.add(entry.slot)
            continue
        merged.append(entry)
    merged.extend(entry for entry in new if entry.slot not in placed)
    return merged


def describe_difference(recorded: TranscriptEntry, model_id: str, revision: str,
                        messages: list[dict], settings: dict) -> str:
    """Say what differs between a recorded entry and a request for the same question."""
    changes = []
    if recorded.model_id != model_id:
        changes.append(f"the model changed ({recorded.model_id} recorded, {model_id} now)")
    if recorded.revision != revision:
        changes.append(f"the revision changed ({recorded.revision} recorded, {revision} now)")
    if recorded.settings != settings:
        changes.append(_settings_difference(recorded.settings, settings))
    if recorded.messages != messages:
        changes.append(_message_difference(recorded.messages, messages))
    return "; ".join(changes) or "the entry differs only in its key"


def _settings_difference(recorded: dict, current: dict) -> str:
    """Name each setting that differs; long values (a grammar) are named, not printed."""
    def shown(settings: dict, name: str) -> str:
        if name not in settings:
            return "absent"
        text = canonical_json(settings[name])
        return text if len(text) <= 60 else f"{len(text)} characters, sha256 " + \
            hashlib.sha256(text.encode("utf-8")).hexdigest()[:12] + "..."

    names = sorted(set(recorded) | set(current))
    changed = [n for n in names if recorded.get(n, _ABSENT) != current.get(n, _ABSENT)]
    listed = "; ".join(
        f"{name}: {shown(recorded, name)} recorded, {shown(current, name)} now" for name in changed
    )
    return f"the generation settings changed ({listed})"


_ABSENT = object()


def _message_difference(recorded: list, current: list) -> str:
    if len(recorded) != len(current):
        return f"the number of messages changed ({len(recorded)} recorded, {len(current)} now)"
    for old, new in zip(recorded, current):
        if old == new:
            continue
        role = new.get("role", "?") if isinstance(new, dict) else "?"
        old_text = old.get("content", "") if isinstance(old, dict) else str(old)
        new_text = new.get("content", "") if isinstance(new, dict) else str(new)
        if old_text == new_text:
            return f"the {role} message changed outside its text"
        at = next(
            (i for i, (a, b) in enumerate(zip(old_text, new_text)) if a != b),
            min(len(old_text), len(new_text)),
        )
        start = max(0, at - 20)
        return (
            f"the {role} prompt changed at character {at}: recorded "
            f"{old_text[start:at + 30]!r}, now {new_text[start:at + 30]!r}"
        )
    return "the messages changed"
