"""Command line of the reader: ``python -m helpers.reader record --reader KEY``.

``record`` loads the reader live (or, with ``--server URL``, on an OpenAI-compatible
server), builds the lesson's prompts (fixture, top 3 of ``--retriever``: tf-idf for
lesson 1, hybrid for lesson 2), checks the input budget, generates every reply and
rewrites the transcript atomically, replacing the entries in the same slot (question,
model, decoding and the passages the prompt shows); a failed or interrupted run leaves
the transcript as it was. ``--constrained`` decodes under lesson 3's reply grammar.
``show`` prints a transcript.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..fixture import QUESTIONS_FILE
from ..paths import DATA_DIR
from .generation import load_reader
from .grammar import ConstrainedDecodingError
from .lesson import RETRIEVERS, lesson_reader_inputs
from .prompts import InputBudgetError
from .record import record_into
from .registry import REGISTRY, ReaderError
from .transcript import TRANSCRIPT_PATH, read_transcript


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m helpers.reader")
    commands = parser.add_subparsers(dest="command", required=True)
    record = commands.add_parser(
        "record", help="generate a reader's entries, live or on an OpenAI-compatible server")
    record.add_argument("--reader", required=True, choices=sorted(REGISTRY))
    record.add_argument(
        "--questions", default=QUESTIONS_FILE,
        help="question CSV: a file name in the data folder, or a path next to the "
             f"handbook and metadata (default {QUESTIONS_FILE})",
    )
    record.add_argument("--transcript", default=str(TRANSCRIPT_PATH))
    record.add_argument("--recorded-by", default=None,
                        help="label stored with each entry (default: command and versions)")
    record.add_argument("--allow-download", action="store_true",
                        help="let transformers download the pinned weights if they are missing")
    record.add_argument("--retriever", default="tfidf", choices=RETRIEVERS,
                        help="whose top 3 passages make the prompts: tfidf (lesson 1, "
                             "default) or hybrid (lesson 2's reader section)")
    record.add_argument("--server", default=None, metavar="URL",
                        help="record from an OpenAI-compatible server at URL "
                             "(e.g. http://HOST:8000/v1) instead of running the model here; "
                             "an API key comes from RIVERTON_READER_API_KEY")
    record.add_argument("--concurrency", type=int, default=None,
                        help="server requests in flight at once (default 4)")
    record.add_argument("--timeout", type=float, default=None,
                        help="seconds one server request may take (default 60)")
    record.add_argument("--constrained", action="store_true",
                        help="decode under lesson 3's two-line reply grammar (llguidance); "
                             "kept beside, not in place of, the unconstrained replies. With "
                             "--server, the server must run that grammar itself (vLLM with "
                             "the guidance backend); llama.cpp's GBNF form is refused")
    show = commands.add_parser("show", help="list the entries of a transcript")
    show.add_argument("--transcript", default=str(TRANSCRIPT_PATH))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except Exception as error:
        if not isinstance(error, _reported_errors()):
            raise
        # A refused server, missing weights, an over-long prompt or a constrained reply
        # that did not complete the grammar: the message names what went wrong (the
        # question, the reply, the URL), and the transcript has not been touched.
        print(f"error: {error}", file=sys.stderr)
        return 1


def _reported_errors() -> tuple[type[Exception], ...]:
    """The errors ``record`` reports in one line instead of a traceback."""
    return (ReaderError, InputBudgetError, ConstrainedDecodingError)


def _run(args) -> int:
    if args.command == "show":
        for entry in read_transcript(args.transcript):
            shown = entry.raw_output.replace("\n", " ⏎ ")
            print(f"{entry.question_id}\t{entry.model_id}\t{entry.output_tokens}\t"
                  f"{entry.provenance}\t{shown}")
        return 0
    questions = Path(args.questions)
    data_dir = questions.parent if questions.parent != Path(".") else DATA_DIR
    if args.server:
        reader = load_reader(args.reader, mode="server", url=args.server,
                             concurrency=args.concurrency, timeout=args.timeout)
        print(f"server {reader.url}: {reader.server.engine_label} serving "
              f"{reader.server.label}; {reader.server.revision_note}")
    else:
        reader = load_reader(args.reader, mode="live", allow_download=args.allow_download)
    inputs = lesson_reader_inputs(questions.name, data_dir, retriever=args.retriever)
    entries = record_into(reader, inputs, args.transcript, args.recorded_by,
                          constrained=args.constrained)
    for entry in entries:
        shown = entry.raw_output.replace("\n", " ⏎ ")
        print(f"{entry.question_id}: {shown} ({entry.output_tokens} tokens, "
              f"EOS {entry.ended_by_eos}, cap {entry.hit_token_cap})")
    decoding = " (constrained)" if args.constrained else ""
    print(f"wrote {len(entries)} entries of {args.reader}{decoding} to {args.transcript}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
