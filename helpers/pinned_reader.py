"""Ask the transcript about new prompts, and choose where the pinned reader's replies come from.

Introduced in lesson 2, "Handing the hybrid's passages to a reader"; lesson 5 uses it
again in "Does the transcript hold Qwen replies?", where :func:`pinned_replies` also
replays the prompts the transcript holds when it cannot answer them all. A lesson that builds prompts lesson 1
never sent cannot assume that the pinned reader can answer them: its weights may be
missing, and its transcript holds only the prompts someone recorded. So the lesson asks,
prompt by prompt, and then takes the first way that can answer every prompt:

1. a server, when ``RIVERTON_READER_URL`` names one (:func:`helpers.reader.configured_url`);
2. the live model, when its pinned weights are on this machine
   (:func:`helpers.reader.weights_available`);
3. the transcript, when it holds an entry for every prompt;
4. none: the lesson then says so, and shows no reply rather than an invented one.

The lessons write the prose for each case; this module holds none.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from .reader import (
    TRANSCRIPT_PATH,
    Reader,
    RecordedReader,
    ReplayError,
    configured_url,
    generate_all,
    get_reader_spec,
    load_reader,
    weights_available,
)

#: The registry key of lesson 1's pinned reader.
PINNED_READER = "qwen_1_5b_instruct"

#: The ways :func:`pinned_source` can choose, in the order it tries them.
SOURCES = ("server", "live", "recorded", "none")


def transcript_lookup(recorded: RecordedReader, prompts: pd.DataFrame,
                      label_columns: Sequence[str] = ("question_id",)) -> pd.DataFrame:
    """Whether the transcript holds an entry for each prompt, and the prompt's key.

    Lesson 2, "Handing the hybrid's passages to a reader". ``recorded`` is a reader in
    recorded mode; ``prompts`` has ``question_id``, ``messages`` and the
    ``label_columns``. One row per prompt: the labels, ``key`` (the first 12 hex digits
    of the transcript key, then "…") and ``recorded``.
    """
    rows = []
    for prompt in prompts.to_dict("records"):
        try:
            recorded.entry(prompt["messages"], prompt["question_id"])
            found = True
        except ReplayError:
            found = False
        rows.append({**{c: prompt[c] for c in label_columns},
                     "key": recorded.key(prompt["messages"])[:12] + "…", "recorded": found})
    return pd.DataFrame(rows, columns=[*label_columns, "key", "recorded"])


@dataclass(frozen=True)
class PinnedSource:
    """Where the pinned reader's replies to a set of prompts come from."""

    how: str                # one of SOURCES
    reader: Reader | None   # None when ``how`` is "none"
    lookup: pd.DataFrame    # :func:`transcript_lookup` of the prompts

    @property
    def n_recorded(self) -> int:
        """Prompts the transcript holds an entry for."""
        return int(self.lookup["recorded"].sum())


def pinned_source(prompts: pd.DataFrame, label_columns: Sequence[str] = ("question_id",),
                  key: str = PINNED_READER, transcript=TRANSCRIPT_PATH) -> PinnedSource:
    """Ask the transcript about every prompt, then choose the first way that answers all.

    Lesson 2, "Handing the hybrid's passages to a reader" (see the module docstring for
    the order). A configured server is never skipped: if it is down or serves another
    model, loading it fails with an error saying so, as :func:`helpers.reader.load_reader`
    does. The transcript is asked in every case, so a page can show which prompts it
    holds whichever way the replies came.
    """
    recorded = load_reader(key, mode="recorded", transcript=transcript)
    lookup = transcript_lookup(recorded, prompts, label_columns)
    if configured_url():
        return PinnedSource("server", load_reader(key, mode="server"), lookup)
    if weights_available(get_reader_spec(key)):
        return PinnedSource("live", load_reader(key, mode="live"), lookup)
    if len(lookup) and bool(lookup["recorded"].all()):
        return PinnedSource("recorded", recorded, lookup)
    return PinnedSource("none", None, lookup)


def pinned_replies(source: PinnedSource, prompts: pd.DataFrame, key: str = PINNED_READER,
                   transcript=TRANSCRIPT_PATH) -> pd.DataFrame | None:
    """The pinned reader's replies to ``prompts``, as many as can be had.

    Lesson 5, "Does the transcript hold Qwen replies?". When ``source`` answers every
    prompt (a server, the live model or the transcript), every reply; when it is "none"
    but the transcript holds some of the prompts, the recorded ones, replayed; else None.
    The rows of ``prompts`` that got a reply, with ``raw_output``.
    """
    if source.how != "none":
        reader, asked = source.reader, prompts
    elif source.n_recorded:
        reader = load_reader(key, mode="recorded", transcript=transcript)
        asked = prompts[source.lookup["recorded"].to_numpy()]
    else:
        return None
    replies = generate_all(reader, asked)
    return asked.assign(raw_output=replies["raw_output"].to_numpy())
