"""Command line of the reader: ``python -m helpers.reader record --reader KEY``.

``record`` loads the reader live, builds the lesson's prompts (fixture, tf-idf top 3),
checks the input budget, generates every reply and rewrites the transcript atomically,
replacing the entries of the same questions, model and decoding (``--constrained``
decodes under lesson 3's reply grammar). ``show`` prints a transcript.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..fixture import QUESTIONS_FILE
from ..paths import DATA_DIR
from .generation import load_reader
from .lesson import lesson_reader_inputs
from .record import record_into
from .registry import REGISTRY
from .transcript import TRANSCRIPT_PATH, read_transcript


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m helpers.reader")
    commands = parser.add_subparsers(dest="command", required=True)
    record = commands.add_parser("record", help="generate a reader's entries live")
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
    record.add_argument("--constrained", action="store_true",
                        help="decode under lesson 3's two-line reply grammar (llguidance); "
                             "kept beside, not in place of, the unconstrained replies")
    show = commands.add_parser("show", help="list the entries of a transcript")
    show.add_argument("--transcript", default=str(TRANSCRIPT_PATH))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "show":
        for entry in read_transcript(args.transcript):
            shown = entry.raw_output.replace("\n", " ⏎ ")
            print(f"{entry.question_id}\t{entry.model_id}\t{entry.output_tokens}\t"
                  f"{entry.provenance}\t{shown}")
        return 0
    questions = Path(args.questions)
    data_dir = questions.parent if questions.parent != Path(".") else DATA_DIR
    inputs = lesson_reader_inputs(questions.name, data_dir)
    reader = load_reader(args.reader, mode="live", allow_download=args.allow_download)
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
