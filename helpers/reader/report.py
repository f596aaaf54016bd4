"""What a page says about how its reader replies were made.

Introduced in lesson 1, "Ask the reader for two lines": the reader-mode sentence above the
raw outputs (:func:`mode_sentence`) and, when the replies came from a serving engine, the
note on how that engine counts output tokens (:func:`token_count_note`).
"""
from __future__ import annotations

import pandas as pd

from .server import ENGINES, UNKNOWN_ENGINE, EngineFacts
from .transcript import TRANSCRIBED


def mode_sentence(reader, results: pd.DataFrame) -> str:
    """The reader-mode sentence: mode, where the outputs came from, model and revision.

    Live and recorded renders of the transcribed Qwen entries read exactly as they did
    before server mode existed; a server render names the engine, the served model, the
    URL and what could and could not be checked about the revision.
    """
    modes = sorted(set(results["mode"]))
    if len(modes) != 1:
        raise ValueError(f"the replies were produced in more than one mode: {modes}")
    mode = modes[0]
    revision = results["revision"].iloc[0]
    if mode == "recorded":
        provenance = "replayed from the recorded transcript `data/riverton/reader-transcript.jsonl`"
    elif mode == "server":
        provenance = reader.server.sentence()
    else:
        provenance = "generated live on this machine with transformers"
    sentence = (f"**Reader mode for this render:** {mode}. The outputs below were {provenance}, "
                f"for `{reader.spec.model_id}` at revision `{revision}`.")
    if mode == "recorded":
        made = sorted(set(results["provenance"]))
        if made == [TRANSCRIBED]:
            sentence += (" The recorded entries were transcribed from a reference render of "
                         "this lesson made with the pinned model; running the model live "
                         "needs its weights in the local Hugging Face cache (see the README).")
        else:
            sentence += " The recorded entries say how they were made: " + "; ".join(made) + "."
    elif mode == "server":
        note = reader.server.revision_note
        sentence += (f" About that revision: {note[0].lower() + note[1:]}. The prompt tokens "
                     "in the budget table are the server's count, made as it read each "
                     "prompt; the budget was checked before any reply was used.")
    return sentence


def engine_of(provenance: str | None) -> EngineFacts | None:
    """The engine a provenance string names (``server <engine> ...``), or None."""
    if not provenance or not provenance.startswith("server "):
        return None
    rest = provenance.removeprefix("server ")
    # Longest names first: "llama-cpp-python" must not be read as "llama.cpp".
    for name in sorted(ENGINES, key=len, reverse=True):
        if rest.startswith(name + " ") or rest == name:
            return ENGINES[name]
    return UNKNOWN_ENGINE


def token_count_note(results: pd.DataFrame) -> str | None:
    """How the replies' output token counts differ from transformers', or None.

    Live replies and transcribed or live-recorded entries count the end-of-sequence
    token, as the page says; replies from a server carry the server's ``usage`` counts,
    and this note says where those differ, naming the replies concerned.
    """
    engines = {row.question_id: engine_of(row.provenance)
               for row in results.itertuples(index=False)}
    served = {qid: engine for qid, engine in engines.items() if engine is not None}
    if not served:
        return None
    by_engine: dict[str, list[str]] = {}
    for qid, engine in served.items():
        by_engine.setdefault(engine.name, []).append(qid)
    parts = []
    ended = results.set_index("question_id")["ended_by_eos"]
    for name, qids in by_engine.items():
        engine = ENGINES.get(name, UNKNOWN_ENGINE)
        with_eos = [q for q in qids if bool(ended[q])]
        if engine.counts_eos is False:
            listed = ", ".join(with_eos) if with_eos else "none in this render"
            parts.append(
                f"{name} leaves the end-of-sequence token out of its count, so each reply "
                f"that ended with it ({listed}) shows one token fewer than a live run "
                "counts for the same tokens"
            )
        elif engine.counts_eos is True:
            parts.append(f"{name} counts the end-of-sequence token, as transformers does")
        else:
            parts.append(f"{name} does not say how it counts, so these counts may differ "
                         "from a live run's by the end-of-sequence token")
    return ("The output token counts above are the server's own (`usage.completion_tokens`): "
            + "; ".join(parts) + ". The text and the stopping diagnostics do not depend on "
            "the count.")
