"""The book's command line: ``python -m runtime COMMAND ...``.

``record reader``   a reader's replies to a question file's prompts (live, or from an
                    OpenAI-compatible server with ``--server URL``); ``--constrained``
                    decodes under lesson 3's reply grammar
``record baseline`` the sentence baseline's replies that lesson 4 reviews
``record judge``    the live judge's yes-or-no replies to the reviewed replies (lesson 4)
``record attacks``  a reader's replies to lesson 5's prompts
``record corruptions`` lesson 4's rule-made corruptions of supported replies, into the
                    transcript and ``corrupted-replies.csv``
``show``            the entries of a transcript, one line each
``review check``    validate the book's review and every review in ``data/reviews/``
``review template`` write a blank review of the book's replies to fill in
``review second``   the second reading, blind to the first: one reply of its sample at a
                    time from the keyboard; ``--next`` prints the next unread reply and
                    ``--answer ID VERDICT REASON NOTE --reviewer NAME`` records one
``data check``      validate every fixture file the metadata lists
``data update-metadata FILE...``  after a deliberate edit: recount and re-fingerprint

Every recording merges its replies into the transcript, replacing the replies of the same
collection, model and decoding, and rewrites it atomically: a failed or interrupted run
leaves the transcript as it was. Errors name what went wrong (the question, the reply,
the URL, the file, row and column) in one line, with exit status 1.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from helpers.grammar import ConstrainedDecodingError
from helpers.judge import JUDGE_READER, assert_judge_parsed, judge_settings
from helpers.review import REASONS, VERDICTS

from . import config
from .attack_runs import record_prompts
from .claims import package_versions
from .data_check import check_all, update_metadata
from .files import write_csv_atomic
from .fixture import CORRUPTIONS_FILE, QUESTIONS_FILE, SCHEMAS, SECOND_READING_FILE, FixtureError
from .lessons import RETRIEVERS, baseline_entries, collection_name, lesson_reader_inputs
from .paths import DATA_DIR
from .readers import generate_all, load_reader
from .records import TRANSCRIPT_PATH, Reply, read_transcript, record_into, recorded
from .registry import REGISTRY, ReaderError
from .reviews import blind_text, check_reviews, corruption_replies, judge_replies, load_review, \
    next_to_read, record_second_reading, review_requests, vocabulary_text, write_template
from .server import ServerError


def entries_of(reader, inputs: pd.DataFrame, replies: list, collection, command: str,
               constrained: bool = False, grammar_name: str = "the reply grammar") -> list[Reply]:
    """``replies`` (of :func:`runtime.readers.generate_all`, by a live or a server reader)
    to the prompts of ``inputs`` as the transcript records them; ``collection`` is a name,
    or a column of ``inputs``. Who recorded them: the command and the library versions, or
    the server's engine, nothing about the host. A reply under a grammar that did not
    complete it is refused: nothing is recorded."""
    served = reader.mode == "server"
    decoding = f"greedy under {grammar_name}" if constrained else "greedy"
    versions = package_versions("transformers", "torch", *(["llguidance"] if constrained else []))
    recorded_by = (
        f"server {reader.server.engine_label}" + (f", {decoding}" if constrained else "")
        if served else f"{command} ({versions}, CPU, {decoding})")
    for reply in replies:
        if reply.grammar_complete is False or (constrained and not reply.ended_by_eos):
            source = f" from {reader.url}" if served else ""
            raise ConstrainedDecodingError(
                f"{reply.question_id}: the constrained reply {reply.raw_output!r}{source} did "
                "not complete the grammar; nothing was recorded")
    return [recorded(reply, row[collection] if collection in row else collection,
                     row.get("retrieved_ids", ()), recorded_by, question_id=str(row["question_id"]))
            for row, reply in zip(inputs.to_dict("records"), replies)]


def _reader(args):
    """The reader to record from, live or a server's. A constrained reply is keyed by lesson
    3's llguidance grammar, so it is recorded live or from a server that runs that grammar
    (vLLM), never from llama.cpp's GBNF. A damaged transcript is refused first, before the
    reader loads and before any reply is made."""
    read_transcript(args.transcript)
    if not args.server:
        return load_reader(args.reader, mode="live", allow_download=args.allow_download)
    reader = load_reader(args.reader, mode="server", url=args.server)
    print(f"{reader.url}: {reader.server.provenance}")
    if args.constrained and reader.server.engine.grammar != "lark":
        raise ServerError(reader.url, None, (
            f"a constrained reply is keyed by lesson 3's llguidance grammar, so that it replays "
            f"where a live constrained reply would; {reader.server.engine_label} enforces "
            "another form of it (or none), so its replies would be keyed by a grammar they were "
            "not decoded under. Record constrained replies live or from vLLM with the guidance "
            "backend; unconstrained replies record from any server."))
    return reader


def _record(args, reader, inputs, collection: str, command: str) -> list[Reply]:
    """Ask ``reader`` every prompt of ``inputs`` and merge the replies into the transcript."""
    replies = generate_all(reader, inputs, constrained=args.constrained).attrs["generations"]
    return record_into(entries_of(reader, inputs, replies, collection, command, args.constrained),
                       args.transcript)


def record_reader(args) -> list[Reply]:
    questions = Path(args.questions)
    data_dir = questions.parent if questions.parent != Path(".") else DATA_DIR
    reader = _reader(args)
    inputs = lesson_reader_inputs(questions.name, data_dir, retriever=args.retriever)
    command = "python -m runtime record reader" + (" --constrained" if args.constrained else "")
    return _record(args, reader, inputs, collection_name(questions.name, args.retriever), command)


def record_judge(args) -> list[Reply]:
    """The judge's reply to every request of the book's review, live; with
    ``--only-missing``, only to those the transcript holds no reply to, the recorded ones
    kept as they are (a recording replaces the whole "judge" collection). Nothing is
    written unless every reply parses. Returns the replies asked for now."""
    held = {entry.key: entry for entry in read_transcript(args.transcript)}
    judge = load_reader(JUDGE_READER, mode="live")
    book = load_review()
    cited = dict(zip(book["review_id"], book["sources"]))
    requests = review_requests(book).drop_duplicates("request_id")
    # each reply is recorded with the passages its prompt shows: those the reply cites
    requests = requests.assign(question_id=requests["request_id"], retrieved_ids=[
        cited[r] for r in requests["request_id"]])
    kept = []
    if args.only_missing:
        keys = [judge.key(m, judge_settings()) for m in requests["messages"]]
        kept = [held[key] for key in keys if key in held]
        requests = requests[[key not in held for key in keys]]
        if requests.empty:
            return []
    replies = judge_replies(judge, requests)
    assert_judge_parsed(replies)
    new = entries_of(judge, requests, list(replies["judge_generation"]), "judge",
                     "python -m runtime record judge", True, "the yes-or-no grammar")
    record_into(kept + new, args.transcript)
    return new


def record_attacks(args) -> list[Reply]:
    inputs = record_prompts(args.prompts, attack_ids=args.attack)
    return _record(args, _reader(args), inputs, "collection",
                   f"python -m runtime record attacks --prompts {args.prompts}")


def record_corruptions(args) -> list[Reply]:
    """Lesson 4's rule-made corruptions, computed from the review now: their replies into
    the transcript, their rules and sources into ``corrupted-replies.csv``."""
    rows, entries = corruption_replies(args.transcript)
    record_into(entries, args.transcript)
    write_csv_atomic(DATA_DIR / CORRUPTIONS_FILE, SCHEMAS[CORRUPTIONS_FILE].columns, rows)
    print(f"wrote {len(rows)} rows to {CORRUPTIONS_FILE}; after a deliberate change, run "
          f"`python -m runtime data update-metadata {CORRUPTIONS_FILE}`")
    return entries


def _typed(prompt: str) -> str | None:
    """A line from the keyboard, trimmed; None at the end of the input."""
    try:
        return input(prompt).strip()
    except EOFError:
        return None


def _choose(prompt: str, names) -> str | None:
    """A name of ``names``, typed or by its number; None to stop (q, or the input's end)."""
    while (typed := _typed(prompt)) not in ("q", None):
        if typed in names or typed.isdigit() and 1 <= int(typed) <= len(names):
            return typed if typed in names else list(names)[int(typed) - 1]
        print(f"  {typed!r} is none of them; type its number or its words, or q to stop")
    return None


def _second_reading_recorded(answer, reviewer: str) -> None:
    """Record one reading; list the file in the metadata once it has rows, and keep its
    row count and fingerprint there true."""
    record_second_reading(*answer, reviewer)
    update_metadata([SECOND_READING_FILE], described={SECOND_READING_FILE: (
        "A second reading of a sample of the support review, blind to the first: verdict, "
        "reason and note per reply", "Written for this book by a second reviewer, through "
        "`python -m runtime review second`", "CC-BY-4.0")})
    print(f"recorded {answer[0]}; {next_to_read()[1]}")


def review_second(args) -> None:
    """The second reading: print the next unread reply (blind), record one answer, or read
    one reply after another from the keyboard until q or the end of the input."""
    if not args.answer:
        while (review_id := next_to_read()[0]) is not None:
            print(blind_text(review_id, load_review()), vocabulary_text(), next_to_read()[1],
                  sep="\n\n")
            if args.next:
                print(f'Record it: python -m runtime review second --answer {review_id} '
                      '"VERDICT" "REASON" "NOTE" --reviewer NAME')
                return
            args.reviewer = args.reviewer or _typed("Your name, as the second reader: ")
            verdict = args.reviewer and _choose("Verdict (number or words; q to stop): ", VERDICTS)
            reason = verdict and _choose("Reason (number or words; q to stop): ", REASONS)
            if not reason:
                return
            try:
                _second_reading_recorded((review_id, verdict, reason, _typed("Note: ") or ""),
                                         args.reviewer)
            except FixtureError as error:
                print(f"not recorded: {error}")
        print(f"Every reply of the sample is read: {next_to_read()[1]}")
    elif not args.reviewer:
        raise ValueError("a second reading names its reader: give --reviewer NAME")
    else:
        _second_reading_recorded(args.answer, args.reviewer)


def run(args) -> int:
    if args.command == "show":
        for entry in read_transcript(args.transcript):
            print(f"{entry.question_id}\t{entry.model_id}\t{entry.output_tokens}\t"
                  f"{entry.provenance}\t{entry.raw_output.replace(chr(10), ' ⏎ ')}")
    elif args.command == "review":
        if args.action == "second":
            review_second(args)
        elif args.action == "template":
            book = load_review()
            print(f"wrote {write_template(args.path, book)} with {len(book)} replies to "
                  "review; fill in verdict, reason, note, reviewer and reviewed_on (leave a "
                  "row blank to skip it), then run `python -m runtime review check`")
        else:
            print("\n".join(check_reviews()))
    elif args.command == "data":
        if args.action == "update-metadata":
            update_metadata(args.artifacts, args.data_dir)
        print("\n".join(check_all(args.data_dir)))
    else:
        record = {"reader": record_reader, "judge": record_judge, "attacks": record_attacks,
                  "corruptions": record_corruptions,
                  "baseline": lambda args: record_into(baseline_entries(), args.transcript)}
        entries = record[args.kind](args)
        for entry in entries:
            print(f"{entry.question_id}: {entry.raw_output!r} ({entry.output_tokens} tokens)")
        print(f"wrote {len(entries)} {args.kind} replies to {args.transcript}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    # the options several commands share, as parent parsers
    transcript, asks = (argparse.ArgumentParser(add_help=False) for _ in range(2))
    transcript.add_argument("--transcript", default=str(TRANSCRIPT_PATH))
    asks.add_argument("--reader", required=True, choices=sorted(REGISTRY))
    asks.add_argument("--server", metavar="URL", help="record from an OpenAI-compatible "
                      "server instead of running the model here; an API key, the requests in "
                      f"flight and the seconds per request come from {config.READER_API_KEY}, "
                      f"{config.READER_CONCURRENCY} and {config.READER_TIMEOUT}")
    asks.add_argument("--constrained", action="store_true", help="decode under lesson "
                      "3's reply grammar (live, or vLLM with the guidance backend)")
    asks.add_argument("--allow-download", action="store_true",
                      help="let transformers download missing pinned weights")
    commands = parser.add_subparsers(dest="command", required=True)
    record = commands.add_parser("record", help="record replies into the transcript")
    kinds = record.add_subparsers(dest="kind", required=True)
    for kind, parents in (("reader", [asks]), ("baseline", []), ("judge", []),
                          ("attacks", [asks]), ("corruptions", [])):
        kinds.add_parser(kind, parents=[transcript, *parents])
    reader, judge, attacks = (kinds.choices[kind] for kind in ("reader", "judge", "attacks"))
    reader.add_argument("--questions", default=QUESTIONS_FILE)
    reader.add_argument("--retriever", default="tfidf", choices=RETRIEVERS)
    judge.add_argument("--only-missing", action="store_true")
    attacks.add_argument("--prompts", default="attacks", choices=("attacks", "ordinary"))
    attacks.add_argument("--attack", action="append", metavar="ID")
    commands.add_parser("show", help="list the entries of a transcript", parents=[transcript])
    review = commands.add_parser("review", help="check reviews or start one")
    review_commands = review.add_subparsers(dest="action", required=True)
    review_commands.add_parser("check")
    review_commands.add_parser("template").add_argument("path")
    second = review_commands.add_parser("second", help="the second reading, blind")
    second.add_argument("--next", action="store_true", help="print the next unread reply")
    second.add_argument("--answer", nargs=4, metavar=("REVIEW_ID", "VERDICT", "REASON", "NOTE"))
    second.add_argument("--reviewer", help="the second reader's name")
    data = commands.add_parser("data", help="check the fixture or update its metadata")
    data.add_argument("--data-dir", default=str(DATA_DIR))
    data_commands = data.add_subparsers(dest="action", required=True)
    data_commands.add_parser("check")
    data_commands.add_parser("update-metadata").add_argument("artifacts", nargs="+")
    args = parser.parse_args(argv)
    try:
        return run(args)
    except (ReaderError, ConstrainedDecodingError, FileExistsError, LookupError,
            ValueError) as error:
        # The message names what went wrong (a FixtureError and an InputBudgetError are
        # ValueErrors); the transcript has not been touched.
        print(f"error: {error}", file=sys.stderr)
        return 1
