"""SmolLM2's dequantised cache (runtime/weights.py): a cached load generates exactly what the
GGUF load does, and a damaged cache is noticed, warned about and rebuilt.

Slow: it dequantises the GGUF file (tens of seconds) and reloads the saved copy, in a
temporary cache folder named by RIVERTON_MODEL_CACHE. The damaged-cache cases damage a
copy of that folder.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402

from runtime import config, readers  # noqa: E402
from runtime.paths import shown  # noqa: E402
from runtime.registry import file_sha256, get_reader_spec, package_gguf_path  # noqa: E402
from runtime.weights import MANIFEST, ModelCacheWarning, gguf_sha256, problem_with  # noqa: E402

pytestmark = pytest.mark.slow

SMOL = get_reader_spec("smollm2_135m_instruct")
SHA = file_sha256(package_gguf_path(SMOL))


def fresh_load(monkeypatch, cache, said=None):
    """Load SmolLM2 as a new process would (nothing loaded yet), with ``cache`` as the cache;
    the lines it says go to ``said``."""
    monkeypatch.setenv(config.MODEL_CACHE, str(cache))
    monkeypatch.setattr(readers, "_LOADED", {})
    if said is not None:
        monkeypatch.setattr(readers, "_say", said.append)
    return readers.LiveReader(SMOL)


def model_folders(cache):
    """The model folders in a cache root (beside them: the remembered GGUF hashes)."""
    return [p for p in cache.iterdir() if p.is_dir() and not p.name.startswith(".")]


def first_reply(reader, inputs):
    """The token ids of the reply to the first lesson prompt."""
    return readers.generate_all(reader, inputs.iloc[:1]).attrs["generations"][0].token_ids


@pytest.fixture(scope="module")
def loads(tmp_path_factory, inputs):
    """The GGUF load, then the cached load, each with what it said and its first reply."""
    import torch

    cache = tmp_path_factory.mktemp("model-cache")
    said_gguf, said_cached = [], []
    with pytest.MonkeyPatch.context() as monkeypatch:
        first = fresh_load(monkeypatch, cache, said_gguf)
        gguf_tokens = first_reply(first, inputs)
        second = fresh_load(monkeypatch, cache, said_cached)
        cached_tokens = first_reply(second, inputs)
        one = {**dict(first.model.named_parameters()), **dict(first.model.named_buffers())}
        two = {**dict(second.model.named_parameters()), **dict(second.model.named_buffers())}
        # Bit for bit: equal tensors give equal logits, so every prompt generates the same
        # tokens under both loads; one reply each shows it end to end.
        unequal = sorted(n for n in set(one) | set(two)
                         if n not in one or n not in two or not torch.equal(one[n], two[n]))
        dtypes = {str(p.dtype) for p in second.model.parameters()}
    return {"cache": cache, "gguf": gguf_tokens, "cached": cached_tokens, "unequal": unequal,
            "n_tensors": len(two), "said_gguf": said_gguf, "said_cached": said_cached, "dtypes": dtypes}


def test_the_cached_load_generates_the_gguf_load_token_for_token_and_says_so(loads):
    assert loads["n_tensors"] > 100 and loads["unequal"] == []
    assert len(loads["gguf"]) > 0 and loads["cached"] == loads["gguf"]
    assert loads["dtypes"] == {"torch.float32"}
    (folder,) = model_folders(loads["cache"])
    (first,) = loads["said_gguf"]
    assert first.startswith(f"Loading {SMOL.model_id} from its GGUF file ")
    assert f"(sha256 {SHA[:8]}...)" in first and "dequantising" in first
    assert loads["said_cached"] == [f"Loading {SMOL.model_id} from the dequantised cache "
                                    f"{shown(folder)} (GGUF sha256 {SHA[:8]}...)"]
    import transformers

    assert SHA[:16] in folder.name and f"transformers-{transformers.__version__}" in folder.name
    assert json.loads((folder / MANIFEST).read_text())["gguf_sha256"] == SHA
    assert problem_with(folder, SHA) is None
    assert not [p for p in loads["cache"].iterdir() if p.name.startswith(".")], \
        "a temporary folder was left behind"


def _damaged_copy(source, target, damage):
    """A copy of the cache in ``source`` (weights hard-linked, not copied), then damaged."""
    shutil.copytree(source, target, copy_function=lambda src, dst: (
        os.link if src.endswith(".safetensors") else shutil.copy2)(src, dst))
    (folder,) = model_folders(target)
    damage(folder)
    return folder


def _weights(folder, offset, data=b"", truncate=False):
    """Damage a private copy of the (hard-linked) weights: write ``data`` at ``offset``, or
    cut the file there."""
    weights, private = folder / "model.safetensors", folder / "private.tmp"
    shutil.copyfile(weights, private)
    private.replace(weights)  # the original, linked, stays intact
    with open(weights, "r+b") as handle:
        handle.truncate(offset) if truncate else (handle.seek(offset), handle.write(data))


def _truncate(folder):
    _weights(folder, (folder / "model.safetensors").stat().st_size // 2, truncate=True)


def _corrupt_header(folder):
    """Same size, but the JSON header that says where each tensor lies is garbage."""
    _weights(folder, 8, b"not a header")


def _same_size_garbage(path):
    path.write_bytes(b"{" + b"x" * (path.stat().st_size - 1))


@pytest.mark.parametrize("damage, sha, expected", [
    (lambda f: (f / "tokenizer.json").unlink(), SHA, "tokenizer.json is missing"),
    (_truncate, SHA, "model.safetensors has"),
    (lambda f: (f / MANIFEST).write_text("{not json"), SHA, f"{MANIFEST} is not readable JSON"),
    (lambda f: _same_size_garbage(f / "config.json"), SHA, "config.json is not readable JSON"),
    (lambda f: (f / MANIFEST).unlink(), SHA, f"{MANIFEST} is missing"),
    (lambda f: None, "0" * 64, "it was made from another GGUF file"),
    (_corrupt_header, SHA, None),  # only loading the weights shows this damage
], ids=["tokenizer", "truncated", "manifest", "config", "no manifest", "other gguf", "header"])
def test_damage_is_noticed_before_loading(loads, tmp_path, damage, sha, expected):
    folder = _damaged_copy(loads["cache"], tmp_path / "cache", damage)
    problem = problem_with(folder, sha)
    assert problem == expected if expected is None else expected in problem, problem


@pytest.mark.parametrize("damage, warned", [(_corrupt_header, "loading it failed"),
                                            (_truncate, "model.safetensors has")])
def test_a_damaged_cache_is_warned_about_and_rebuilt(loads, tmp_path, monkeypatch, inputs, damage, warned):
    folder = _damaged_copy(loads["cache"], tmp_path / "cache", damage)
    said = []
    with pytest.warns(ModelCacheWarning, match=f"is damaged: {warned}"):
        reader = fresh_load(monkeypatch, tmp_path / "cache", said)
    assert "from its GGUF file" in said[-1] and "dequantising" in said[-1]
    assert problem_with(folder, SHA) is None, "the rebuilt cache is not complete"
    assert first_reply(reader, inputs) == loads["gguf"]
    with warnings.catch_warnings():  # the rebuilt folder serves the next load silently
        warnings.simplefilter("error", ModelCacheWarning)
        said.clear()
        fresh_load(monkeypatch, tmp_path / "cache", said)
    assert "from the dequantised cache" in said[0]


def test_the_remembered_gguf_hash_follows_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv(config.MODEL_CACHE, str(tmp_path / "cache"))
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"first contents")
    assert gguf_sha256(weights) == hashlib.sha256(b"first contents").hexdigest()
    index = json.loads((tmp_path / "cache" / "gguf-sha256.json").read_text())
    assert index[str(weights)]["sha256"] == hashlib.sha256(b"first contents").hexdigest()
    weights.write_bytes(b"other contents")  # same size, a new modification time
    assert gguf_sha256(weights) == hashlib.sha256(b"other contents").hexdigest()
