"""A per-user cache of dequantised GGUF weights, so that SmolLM2 loads in seconds.

Introduced in lesson 3, "A reader small enough for any laptop". transformers reads a GGUF
file by turning every quantised tensor back into an ordinary PyTorch tensor, which takes
tens of seconds each time. The first load therefore saves the result (config, weights as
safetensors, tokenizer) in a folder named after the GGUF file's SHA-256 and the versions
of transformers and gguf that dequantised it; later loads read that folder.

The folder lives under ``$RIVERTON_MODEL_CACHE`` when that is set, else
``$XDG_CACHE_HOME/riverton-qa-book/models`` (``~/.cache/...`` by default). It is written
into a temporary folder and renamed into place, so it is either complete or absent. A
folder that is damaged anyway (a missing or truncated file, unreadable JSON, weights that
will not load) counts as absent: a :class:`ModelCacheWarning` says so, and it is rebuilt
from the GGUF file.

What is not caught: weights damaged in place with their size unchanged (bytes flipped on
disk inside the tensors, say) load without a complaint, since the file's header still
says where every tensor lies. Catching that would mean hashing the 540 MB weights file on
every load, which would add a good part of the load's own time to every load; so the
cache checks sizes, the JSON files and that the weights load, not their bytes. If
generations from a cached load look wrong, delete the folder: the next load rebuilds it.
"""
from __future__ import annotations

import contextlib
import copy
import importlib.metadata
import json
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path

from . import config
from .files import read_json, write_json_atomic
from .paths import shown
from .registry import ReaderSpec, file_sha256

MANIFEST = "manifest.json"
#: The packages whose versions the manifest records.
VERSIONED = ("transformers", "gguf", "torch")


class ModelCacheWarning(UserWarning):
    """A cached dequantised model was damaged (or could not be written) and is rebuilt."""


def cache_root() -> Path:
    """Where dequantised models are kept for this user."""
    if override := config.text(config.MODEL_CACHE):
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "riverton-qa-book" / "models"


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def gguf_sha256(path: Path) -> str:
    """The file's SHA-256, remembered in the cache root between runs.

    Hashing the GGUF file takes a noticeable part of a cached load; the remembered value
    is used only while the file has the same size, modification time (to the nanosecond)
    and inode as when it was hashed.
    """
    stat = path.stat()
    stamp = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
    index = cache_root() / "gguf-sha256.json"
    known = read_json(index)
    known = known if isinstance(known, dict) else {}
    entry = known.get(str(path))
    if isinstance(entry, dict) and entry.get("stamp") == stamp and isinstance(entry.get("sha256"),
                                                                              str):
        return file_sha256(path, known=entry["sha256"])
    sha = file_sha256(path)
    known[str(path)] = {"stamp": stamp, "sha256": sha}
    with contextlib.suppress(OSError):  # the next run hashes the file again
        write_json_atomic(index, known, sort_keys=False)
    return sha


def problem_with(folder: Path, gguf_sha256: str) -> str | None:
    """Why the cache ``folder`` cannot be used (None when it looks complete)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"{MANIFEST} is missing"
    except (OSError, ValueError) as error:
        return f"{MANIFEST} is not readable JSON ({error})"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return f"{MANIFEST} does not list the files"
    if manifest.get("gguf_sha256") != gguf_sha256:
        return "it was made from another GGUF file"
    for name, size in sorted(manifest["files"].items()):
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if (actual := path.stat().st_size) != size:
            return f"{name} has {actual} bytes, not {size} (truncated?)"
        if name.endswith(".json") and size < 65536:  # a larger file is checked by loading it
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                return f"{name} is not readable JSON ({error})"
    return None


def save_dequantised(model, tokenizer, folder: Path) -> None:
    """Write ``model`` and ``tokenizer`` into ``folder`` as an ordinary safetensors checkpoint.

    ``save_pretrained`` refuses a model loaded from GGUF ("not serializable"), so the
    config is written without its quantisation entry (its ``save_pretrained`` makes the
    folder) and the weights with safetensors.
    """
    from safetensors.torch import save_model

    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(folder)
    model.generation_config.save_pretrained(folder)
    save_model(model, str(folder / "model.safetensors"), metadata={"format": "pt"})
    tokenizer.save_pretrained(folder)


def _write_cache(model, tokenizer, folder: Path, spec: ReaderSpec, gguf_path: Path,
                 sha: str) -> None:
    """Save into a temporary sibling folder, list the files in the manifest, rename into place."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent))
    try:
        save_dequantised(model, tokenizer, staging)
        files = {p.relative_to(staging).as_posix(): p.stat().st_size
                 for p in sorted(staging.rglob("*")) if p.is_file()}
        manifest = {"model_id": spec.model_id, "gguf_file": Path(gguf_path).name,
                    "gguf_sha256": sha, **{name: _version(name) for name in VERSIONED},
                    "dtype": str(next(model.parameters()).dtype), "files": files}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        try:
            staging.rename(folder)
        except OSError:
            if problem_with(folder, sha) is not None:  # not another process's complete copy
                raise
    finally:  # gone once renamed into place
        shutil.rmtree(staging, ignore_errors=True)


def load_gguf(spec: ReaderSpec, gguf_path: Path, say=print):
    """Load ``spec``'s GGUF file through the cache: ``(model, tokenizer)`` on the CPU.

    Says in one line what it loads and from where.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    sha = gguf_sha256(gguf_path)
    # the cache folder: the model, the file's SHA-256 and the dequantising versions name it
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", spec.model_id).strip("-")
    folder = cache_root() / (f"{slug}-gguf-{sha[:16]}-transformers-{_version('transformers')}"
                             f"-gguf-{_version('gguf')}")
    if folder.exists():
        problem = problem_with(folder, sha)
        if problem is None:
            say(f"Loading {spec.model_id} from the dequantised cache {shown(folder)} "
                f"(GGUF sha256 {sha[:8]}...)")
            try:
                tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
                model = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True,
                                                             device_map="cpu")
                return model, tokenizer
            except Exception as error:  # noqa: BLE001 - any unreadable cache is rebuilt
                problem = f"loading it failed ({type(error).__name__}: {error})"
        warnings.warn(f"the dequantised cache {folder} is damaged: {problem}; rebuilding it "
                      f"from {gguf_path.name}", ModelCacheWarning, stacklevel=2)
        doomed = folder.with_name(f".{folder.name}.damaged-{os.getpid()}")
        folder.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
    say(f"Loading {spec.model_id} from its GGUF file {shown(gguf_path)} (sha256 {sha[:8]}...): "
        f"dequantising, then saving the weights to {shown(folder)} so that later loads take "
        "seconds")
    kwargs = {"gguf_file": gguf_path.name, "local_files_only": True}
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), **kwargs)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), device_map="cpu", **kwargs)
    try:
        _write_cache(model, tokenizer, folder, spec, gguf_path, sha)
    except Exception as error:  # noqa: BLE001 - the model is loaded; only the saving failed
        warnings.warn(f"could not save the dequantised model to {folder} ({type(error).__name__}: "
                      f"{error}); the next load will dequantise the GGUF file again",
                      ModelCacheWarning, stacklevel=2)
    return model, tokenizer
