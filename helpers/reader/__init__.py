"""The passage reader: registry, prompts, budget, live, recorded and server generation.

Introduced in lesson 1, "Ask the reader for two lines".
"""
from .generation import (
    MODE_ENV,
    MODES,
    Generation,
    LiveReader,
    Reader,
    RecordedReader,
    ReplayError,
    ServerReader,
    generate_all,
    load_model_and_tokenizer,
    load_reader,
    resolve_mode,
    stopping_diagnostics,
)
from .prompts import (
    NO_PASSAGES,
    SYSTEM_PROMPT,
    SYSTEM_PROMPT_PARTS,
    InputBudgetError,
    build_messages,
    build_user_prompt,
    check_input_budget,
    format_passage_block,
    reader_inputs,
)
from .report import mode_sentence, token_count_note
from .server import (
    API_KEY_ENV,
    CONCURRENCY_ENV,
    ENGINES,
    TIMEOUT_ENV,
    UNKNOWN_ENGINE,
    URL_ENV,
    ServerError,
    WrongModelError,
    configured_url,
)
from .registry import (
    DEFAULT_SETTINGS,
    MAX_INPUT_TOKENS,
    MAX_NEW_TOKENS,
    REGISTRY,
    REPETITION_PENALTY,
    ReaderError,
    ReaderSpec,
    WeightsUnavailableError,
    get_reader_spec,
    resolve_revision,
    weights_available,
)
from .transcript import (
    TRANSCRIPT_PATH,
    TranscriptEntry,
    TranscriptError,
    read_transcript,
    transcript_key,
)

__all__ = [
    "API_KEY_ENV", "CONCURRENCY_ENV", "ENGINES", "TIMEOUT_ENV", "UNKNOWN_ENGINE", "URL_ENV", "ServerError",
    "ServerReader", "WrongModelError", "configured_url", "mode_sentence", "token_count_note",
    "DEFAULT_SETTINGS", "MAX_INPUT_TOKENS", "MAX_NEW_TOKENS", "MODES", "MODE_ENV",
    "NO_PASSAGES", "REGISTRY", "REPETITION_PENALTY", "SYSTEM_PROMPT", "SYSTEM_PROMPT_PARTS",
    "TRANSCRIPT_PATH", "Generation", "InputBudgetError", "LiveReader", "Reader",
    "ReaderError", "ReaderSpec", "RecordedReader", "ReplayError", "TranscriptEntry",
    "TranscriptError", "WeightsUnavailableError", "build_messages", "build_user_prompt",
    "check_input_budget", "format_passage_block", "generate_all", "get_reader_spec",
    "load_model_and_tokenizer", "load_reader", "read_transcript", "reader_inputs",
    "resolve_mode", "resolve_revision", "stopping_diagnostics", "transcript_key",
    "weights_available",
]
