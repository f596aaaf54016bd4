"""Generation: one interface, two ways to produce a reply (live model or recorded transcript).

Introduced in lesson 1, "Ask the reader for two lines". Live mode runs the model through
transformers with greedy decoding; recorded mode replays a transcript entry whose key
matches the exact model, revision, messages and settings.
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .model_cache import load_gguf, shown
from .prompts import check_input_budget
from .registry import (
    GGUF_PACKAGE,
    HF_CACHE,
    LOCAL_FOLDER,
    MAX_INPUT_TOKENS,
    ReaderError,
    ReaderSpec,
    WeightsUnavailableError,
    get_reader_spec,
    hf_snapshot_path,
    how_to_get_weights,
    package_gguf_path,
    resolve_revision,
    weights_available,
)
from .transcript import (
    TRANSCRIPT_PATH,
    TranscriptEntry,
    describe_difference,
    read_transcript,
    transcript_key,
)

MODE_ENV = "RIVERTON_READER_MODE"
MODES = ("auto", "live", "recorded")

GENERATION_COLUMNS = [
    "question_id", "raw_output", "output_tokens", "ended_by_eos", "hit_token_cap",
    "prompt_tokens", "mode", "model_id", "revision", "provenance",
]


class ReplayError(ReaderError, LookupError):
    """Recorded mode has no transcript entry for a request."""


@dataclass(frozen=True)
class Generation:
    """One reader reply with its stopping diagnostics and how it was produced."""

    question_id: str
    raw_output: str
    output_tokens: int  # generated tokens, the end-of-sequence token included
    ended_by_eos: bool
    hit_token_cap: bool
    prompt_tokens: int
    mode: str  # "live" or "recorded"
    model_id: str
    revision: str
    key: str
    recorded_by: str | None = None
    recorded_on: str | None = None
    provenance: str | None = None  # None for a live generation
    token_ids: tuple[int, ...] | None = None  # live only: the generated ids, EOS included


def _question_of(messages: list[dict]) -> str | None:
    """The QUESTION ID written in the user prompt, for error messages."""
    for message in messages:
        for line in str(message.get("content", "")).splitlines():
            if line.startswith("QUESTION ID: "):
                return line.removeprefix("QUESTION ID: ").strip()
    return None


def resolve_mode(mode: str | None = None) -> str:
    """``mode``, else the environment variable ``RIVERTON_READER_MODE``, else ``auto``."""
    chosen = mode if mode is not None else os.environ.get(MODE_ENV, "auto")
    chosen = chosen.strip().lower()
    if chosen not in MODES:
        source = "argument mode" if mode is not None else f"environment variable {MODE_ENV}"
        raise ValueError(f"{source} is {chosen!r}; expected one of {', '.join(MODES)}")
    return chosen


class Reader:
    """A reader in one mode. Use :func:`load_reader` to get one."""

    mode: str
    spec: ReaderSpec

    def __init__(self, spec: ReaderSpec, revision: str):
        self.spec = spec
        self.revision = revision

    @property
    def model_id(self) -> str:
        return self.spec.model_id

    @property
    def settings(self) -> dict:
        return dict(self.spec.settings)

    def key(self, messages: list[dict]) -> str:
        """The transcript key of ``messages`` for this reader."""
        return transcript_key(self.model_id, self.revision, messages, self.settings)

    def prompt_tokens(self, messages: list[dict], question_id: str | None = None) -> int:
        raise NotImplementedError

    def generate(self, messages: list[dict], question_id: str | None = None) -> Generation:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec.key} mode={self.mode} revision={self.revision}>"


# ----------------------------------------------------------------------------- live


_LOADED: dict[tuple, tuple] = {}


def _load_source(spec: ReaderSpec, allow_download: bool) -> tuple[str, dict]:
    """The path or id and the keyword arguments that ``from_pretrained`` needs."""
    if spec.weights_source == HF_CACHE:
        if allow_download:
            return spec.model_id, {"revision": spec.revision}
        folder = hf_snapshot_path(spec)
        if folder is None:
            raise WeightsUnavailableError(how_to_get_weights(spec))
        return str(folder), {"local_files_only": True}
    if spec.weights_source == GGUF_PACKAGE:
        path = package_gguf_path(spec)
        return str(path.parent), {"gguf_file": path.name, "local_files_only": True}
    if spec.weights_source == LOCAL_FOLDER:
        if not weights_available(spec):
            raise WeightsUnavailableError(how_to_get_weights(spec))
        return str(spec.local_path), {"local_files_only": True}
    raise ReaderError(f"reader {spec.key!r}: unknown weights source {spec.weights_source!r}")


def load_model_and_tokenizer(spec: ReaderSpec, allow_download: bool = False):
    """Load (once per process) the model and tokenizer of ``spec`` on the CPU, in eval mode.

    Nothing is downloaded unless ``allow_download`` is true.
    """
    cache_key = (spec.key, spec.weights_source, spec.local_path)
    if cache_key in _LOADED:
        return _LOADED[cache_key]
    source, kwargs = _load_source(spec, allow_download)
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging
    except ImportError as error:
        raise ReaderError(
            "live mode needs torch and transformers: "
            "`pip install torch==2.13.0` then `pip install -e '.[reader]'`"
        ) from error
    if spec.weights_source == GGUF_PACKAGE:
        missing = [name for name in ("gguf", "accelerate") if not _importable(name)]
        if missing:
            raise ReaderError(
                f"loading {spec.gguf_filename} through transformers needs "
                f"{' and '.join(missing)}: `pip install {' '.join(missing)}`"
            )
    with _quiet_progress(hf_logging):
        if spec.weights_source == GGUF_PACKAGE:
            # Dequantised once, then read from a per-user cache (see model_cache).
            model, tokenizer = load_gguf(spec, Path(source) / kwargs["gguf_file"], say=_say)
        else:
            _say(f"Loading {spec.model_id} {_describe_source(spec, source, allow_download)}")
            tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(source, device_map="cpu", **kwargs)
    model.eval()
    _LOADED[cache_key] = (model, tokenizer)
    return model, tokenizer


def _say(line: str) -> None:
    """Print a loading message where a student running the notebook sees it."""
    print(line, flush=True)


def _describe_source(spec: ReaderSpec, source: str, allow_download: bool) -> str:
    if spec.weights_source == HF_CACHE and allow_download:
        return f"at revision {spec.revision} from the Hugging Face Hub (downloads allowed)"
    if spec.weights_source == HF_CACHE:
        return f"at revision {spec.revision[:12]} from the Hugging Face cache {shown(Path(source))}"
    return f"from the folder {shown(Path(source))}"


@contextlib.contextmanager
def _quiet_progress(hf_logging):
    """Hide loading progress bars (they would land in rendered pages), then restore them."""
    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    gguf_utils = sys.modules.get("transformers.modeling_gguf_pytorch_utils")
    if gguf_utils is None:
        try:
            import transformers.modeling_gguf_pytorch_utils as gguf_utils
        except ImportError:
            gguf_utils = None
    original = getattr(gguf_utils, "tqdm", None)
    if original is not None:
        # The GGUF de-quantizer calls tqdm directly, outside transformers' switch.
        gguf_utils.tqdm = functools.partial(original, disable=True)
    try:
        yield
    finally:
        if original is not None:
            gguf_utils.tqdm = original
        if enabled:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def _cpu_threads(count: int | None):
    """Run with ``count`` torch CPU threads, then restore the previous number."""
    if count is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _eos_ids(model, tokenizer) -> set[int]:
    ids = model.generation_config.eos_token_id
    if ids is None:
        ids = []
    elif isinstance(ids, int):
        ids = [ids]
    found = set(int(i) for i in ids)
    if tokenizer.eos_token_id is not None:
        found.add(int(tokenizer.eos_token_id))
    return found


def stopping_diagnostics(new_ids: list[int], eos_ids: set[int], max_new_tokens: int):
    """Output tokens (through the first EOS), whether EOS came, whether the cap was hit."""
    for position, token in enumerate(new_ids):
        if token in eos_ids:
            return position + 1, True, False
    count = len(new_ids)
    return count, False, count >= max_new_tokens


class LiveReader(Reader):
    """Runs the model on this machine through transformers, greedily."""

    mode = "live"

    def __init__(self, spec: ReaderSpec, allow_download: bool = False):
        self.model, self.tokenizer = load_model_and_tokenizer(spec, allow_download)
        super().__init__(spec, resolve_revision(spec))
        self.eos_ids = _eos_ids(self.model, self.tokenizer)

    def encode(self, messages: list[dict]):
        """The chat template applied with the generation prompt, as a batch of one."""
        return self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )

    def prompt_text(self, messages: list[dict]) -> str:
        """The chat-formatted prompt as text (for display)."""
        return self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )

    def prompt_tokens(self, messages: list[dict], question_id: str | None = None) -> int:
        return int(self.encode(messages)["input_ids"].shape[1])

    def generate(self, messages: list[dict], question_id: str | None = None) -> Generation:
        import torch

        question_id = question_id or _question_of(messages) or "?"
        encoded = self.encode(messages)
        n_prompt = int(encoded["input_ids"].shape[1])
        settings = self.settings
        pad_id = self.tokenizer.pad_token_id
        if pad_id is None:
            pad_id = min(self.eos_ids)
        with torch.inference_mode(), _cpu_threads(self.spec.cpu_threads):
            output = self.model.generate(
                **encoded,
                max_new_tokens=settings["max_new_tokens"],
                do_sample=settings["do_sample"],
                repetition_penalty=settings["repetition_penalty"],
                eos_token_id=sorted(self.eos_ids),
                pad_token_id=pad_id,
                temperature=None,
                top_p=None,
                top_k=None,
            )
        new_ids = [int(t) for t in output[0, n_prompt:]]
        count, ended_by_eos, hit_cap = stopping_diagnostics(
            new_ids, self.eos_ids, settings["max_new_tokens"]
        )
        text = self.tokenizer.decode(new_ids[:count], skip_special_tokens=True)
        return Generation(
            question_id=question_id,
            raw_output=text,
            output_tokens=count,
            ended_by_eos=ended_by_eos,
            hit_token_cap=hit_cap,
            prompt_tokens=n_prompt,
            mode=self.mode,
            model_id=self.model_id,
            revision=self.revision,
            key=self.key(messages),
            token_ids=tuple(new_ids[:count]),
        )


# ------------------------------------------------------------------------- recorded


class RecordedReader(Reader):
    """Replays generations from a transcript; refuses any request it does not hold."""

    mode = "recorded"

    def __init__(self, spec: ReaderSpec, transcript: str | os.PathLike = TRANSCRIPT_PATH):
        super().__init__(spec, resolve_revision(spec))
        self.transcript_path = Path(transcript)
        self.entries = read_transcript(self.transcript_path)
        self._by_key = {entry.key: entry for entry in self.entries}

    def entry(self, messages: list[dict], question_id: str | None = None) -> TranscriptEntry:
        """The transcript entry for ``messages``, or a :class:`ReplayError` saying why not."""
        key = self.key(messages)
        if key in self._by_key:
            return self._by_key[key]
        question_id = question_id or _question_of(messages) or "?"
        same_question = [
            entry for entry in self.entries
            if entry.question_id == question_id and entry.model_id == self.model_id
        ]
        if same_question:
            reason = describe_difference(
                same_question[-1], self.model_id, self.revision, messages, self.settings
            )
            found = f"Its recorded entry was made for another request: {reason}."
        else:
            found = f"The transcript holds no entry for {question_id} with this model."
        raise ReplayError(
            f"question {question_id}: no recorded generation of reader {self.spec.key!r} "
            f"({self.model_id}) matches its prompt (key {key[:12]}...) in "
            f"{self.transcript_path}. {found} To run the model live instead, set "
            f"{MODE_ENV}=live (its weights must be on this machine), or regenerate the "
            f"entries with `python -m helpers.reader record --reader {self.spec.key}`."
        )

    def prompt_tokens(self, messages: list[dict], question_id: str | None = None) -> int:
        return self.entry(messages, question_id).prompt_tokens

    def generate(self, messages: list[dict], question_id: str | None = None) -> Generation:
        entry = self.entry(messages, question_id)
        return Generation(
            question_id=question_id or entry.question_id,
            raw_output=entry.raw_output,
            output_tokens=entry.output_tokens,
            ended_by_eos=entry.ended_by_eos,
            hit_token_cap=entry.hit_token_cap,
            prompt_tokens=entry.prompt_tokens,
            mode=self.mode,
            model_id=entry.model_id,
            revision=entry.revision,
            key=entry.key,
            recorded_by=entry.recorded_by,
            recorded_on=entry.recorded_on,
            provenance=entry.provenance,
        )


# ---------------------------------------------------------------------------- entry


def load_reader(
    key: str,
    mode: str | None = None,
    transcript: str | os.PathLike = TRANSCRIPT_PATH,
    allow_download: bool = False,
) -> Reader:
    """The reader ``key`` in ``mode`` (auto, live or recorded; None reads the environment).

    ``auto`` runs live when the pinned weights are on this machine and replays the
    transcript otherwise. ``live`` without the weights is an error saying how to get them.
    """
    spec = get_reader_spec(key)
    chosen = resolve_mode(mode)
    if chosen == "auto":
        chosen = "live" if weights_available(spec) else "recorded"
    if chosen == "live":
        if not allow_download and not weights_available(spec):
            raise WeightsUnavailableError(
                f"live mode for reader {key!r}: {how_to_get_weights(spec)} "
                f"Or replay the recorded outputs with {MODE_ENV}=recorded."
            )
        return LiveReader(spec, allow_download=allow_download)
    return RecordedReader(spec, transcript)


def generate_all(reader: Reader, inputs_df: pd.DataFrame,
                 max_input_tokens: int = MAX_INPUT_TOKENS) -> pd.DataFrame:
    """Check every prompt against the input budget, then generate one reply per question."""
    counts: Mapping[str, int] = {
        qid: reader.prompt_tokens(messages, qid)
        for qid, messages in zip(inputs_df["question_id"], inputs_df["messages"])
    }
    check_input_budget(counts, max_input_tokens)
    rows = []
    for qid, messages in zip(inputs_df["question_id"], inputs_df["messages"]):
        generation = reader.generate(messages, qid)
        rows.append({column: getattr(generation, column) for column in GENERATION_COLUMNS})
    return pd.DataFrame(rows, columns=GENERATION_COLUMNS)
