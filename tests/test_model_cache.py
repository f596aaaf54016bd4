"""SmolLM2's dequantised cache: a cached load generates exactly what the GGUF load does.

Slow: it dequantises the GGUF file (tens of seconds) and reloads the saved copy, in a
temporary cache folder named by RIVERTON_MODEL_CACHE. The damaged-cache cases damage a
copy of that folder and check that loading notices, warns and rebuilds it.
"""
from __future__ import annotations

import json
import os
import shutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402

from helpers.reader import generation, get_reader_spec  # noqa: E402
from helpers.reader.model_cache import (  # noqa: E402
    CACHE_ENV,
    MANIFEST,
    ModelCacheWarning,
    problem_with,
)
from helpers.reader.registry import file_sha256, package_gguf_path  # noqa: E402

pytestmark = pytest.mark.slow

SMOL = get_reader_spec("smollm2_135m_instruct")


def fresh_load(monkeypatch, cache, capsys):
    """Load SmolLM2 as a new process would (nothing loaded yet), with ``cache`` as the cache."""
    monkeypatch.setenv(CACHE_ENV, str(cache))
    monkeypatch.setattr(generation, "_LOADED", {})
    reader = generation.LiveReader(SMOL)
    return reader, capsys.readouterr().out


def model_folders(cache):
    """The model folders in a cache root (beside them: the remembered GGUF hashes)."""
    return [p for p in cache.iterdir() if p.is_dir() and not p.name.startswith(".")]


def generate_first(reader, inputs):
    """The token ids of the reply to the first lesson prompt."""
    return reader.generate(inputs["messages"].iloc[0], inputs["question_id"].iloc[0]).token_ids


def tensors(model) -> dict:
    """Every parameter and buffer of ``model`` by name (what a forward pass computes with)."""
    return {**dict(model.named_parameters()), **dict(model.named_buffers())}


@pytest.fixture(scope="module")
def gguf_and_cached(tmp_path_factory, inputs):
    """The GGUF load and the cached load compared, a reply from each, and the cache folder."""
    import torch

    cache = tmp_path_factory.mktemp("model-cache")
    with pytest.MonkeyPatch.context() as monkeypatch:
        capture = _Capture()
        monkeypatch.setattr(generation, "_say", capture)
        monkeypatch.setenv(CACHE_ENV, str(cache))
        monkeypatch.setattr(generation, "_LOADED", {})
        first = generation.LiveReader(SMOL)
        gguf_tokens = generate_first(first, inputs)
        gguf_message = capture.take()
        monkeypatch.setattr(generation, "_LOADED", {})
        second = generation.LiveReader(SMOL)
        cached_message = capture.take()
        cached_tokens = generate_first(second, inputs)
        gguf_tensors, cached_tensors = tensors(first.model), tensors(second.model)
        # Bit for bit: equal tensors give equal logits, so every prompt generates the same
        # tokens under both loads; one reply each shows it end to end.
        unequal = sorted(name for name in set(gguf_tensors) | set(cached_tensors)
                         if name not in gguf_tensors or name not in cached_tensors
                         or not torch.equal(gguf_tensors[name], cached_tensors[name]))
        dtypes = {str(p.dtype) for p in second.model.parameters()}
        del first
    return {"cache": cache, "gguf": gguf_tokens, "cached": cached_tokens, "unequal": unequal,
            "n_tensors": len(cached_tensors), "gguf_message": gguf_message,
            "cached_message": cached_message, "dtypes": dtypes}


class _Capture:
    def __init__(self):
        self.lines = []

    def __call__(self, line):
        self.lines.append(line)

    def take(self):
        lines, self.lines = self.lines, []
        return lines


def test_cached_load_generates_the_gguf_load_token_for_token(gguf_and_cached):
    assert gguf_and_cached["n_tensors"] > 100
    assert gguf_and_cached["unequal"] == [], "the cached model's tensors differ from the GGUF load's"
    assert len(gguf_and_cached["gguf"]) > 0
    assert gguf_and_cached["cached"] == gguf_and_cached["gguf"], "the cached model generated other tokens"
    assert gguf_and_cached["dtypes"] == {"torch.float32"}


def test_each_load_says_what_it_loads_and_from_where(gguf_and_cached):
    gguf = package_gguf_path(SMOL)
    sha = file_sha256(gguf)
    (first,) = gguf_and_cached["gguf_message"]
    (second,) = gguf_and_cached["cached_message"]
    assert first.startswith(f"Loading {SMOL.model_id} from its GGUF file ")
    assert f"(sha256 {sha[:8]}...)" in first and "dequantising" in first
    folders = model_folders(gguf_and_cached["cache"])
    assert len(folders) == 1, folders
    folder = folders[0]
    assert second == (f"Loading {SMOL.model_id} from the dequantised cache {folder} "
                      f"(GGUF sha256 {sha[:8]}...)")
    assert sha[:16] in folder.name
    import transformers

    assert f"transformers-{transformers.__version__}" in folder.name
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["gguf_sha256"] == sha and problem_with(folder, sha) is None
    assert not [p for p in gguf_and_cached["cache"].iterdir() if p.name.startswith(".")], \
        "a temporary folder was left behind"


def _damaged_copy(source, target, damage):
    """A copy of the cache in ``source`` (weights hard-linked, not copied), then damaged."""
    def link_weights(src, dst):
        if src.endswith(".safetensors"):
            os.link(src, dst)
        else:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link_weights)
    (folder,) = model_folders(target)
    damage(folder)
    return folder


def _own_weights(folder):
    """Replace the hard link by a private copy, so damaging it leaves the original intact."""
    weights = folder / "model.safetensors"
    linked = weights.with_name("linked.tmp")
    weights.rename(linked)
    shutil.copyfile(linked, weights)
    linked.unlink()
    return weights


def _truncate(folder):
    weights = _own_weights(folder)
    with open(weights, "r+b") as handle:
        handle.truncate(weights.stat().st_size // 2)


def _corrupt_header(folder):
    """Same size, but the JSON header that says where each tensor lies is garbage."""
    weights = _own_weights(folder)
    with open(weights, "r+b") as handle:
        handle.seek(8)
        handle.write(b"not a header")


def _same_size_garbage(path):
    size = path.stat().st_size
    path.write_bytes(b"{" + b"x" * (size - 1))


DAMAGES = {
    "missing tokenizer": (lambda f: (f / "tokenizer.json").unlink(), "tokenizer.json is missing"),
    "truncated weights": (_truncate, "model.safetensors has"),
    "manifest not JSON": (lambda f: (f / MANIFEST).write_text("{not json"), f"{MANIFEST} is not readable JSON"),
    "config not JSON": (lambda f: _same_size_garbage(f / "config.json"), "config.json is not readable JSON"),
    "missing manifest": (lambda f: (f / MANIFEST).unlink(), f"{MANIFEST} is missing"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damage_is_noticed_before_loading(gguf_and_cached, tmp_path, damage):
    hurt, expected = DAMAGES[damage]
    folder = _damaged_copy(gguf_and_cached["cache"], tmp_path / "cache", hurt)
    problem = problem_with(folder, file_sha256(package_gguf_path(SMOL)))
    assert problem is not None and expected in problem, problem


def test_a_cache_made_from_another_gguf_file_is_not_used(gguf_and_cached):
    (folder,) = model_folders(gguf_and_cached["cache"])
    assert problem_with(folder, "0" * 64) == "it was made from another GGUF file"


def test_a_damaged_cache_is_rebuilt_with_a_warning(gguf_and_cached, tmp_path, monkeypatch, capsys,
                                                    inputs):
    """Weights of the right size whose header is garbage: only loading them shows the
    damage, which is warned about, and the cache is rebuilt. (Damage that the sizes and
    the JSON already show takes the same way from the warning on; it is detected in
    test_damage_is_noticed_before_loading.)"""
    folder = _damaged_copy(gguf_and_cached["cache"], tmp_path / "cache", _corrupt_header)
    assert problem_with(folder, file_sha256(package_gguf_path(SMOL))) is None
    with pytest.warns(ModelCacheWarning, match="is damaged: loading it failed"):
        reader, said = fresh_load(monkeypatch, tmp_path / "cache", capsys)
    assert "from its GGUF file" in said and "dequantising" in said
    sha = file_sha256(package_gguf_path(SMOL))
    assert problem_with(folder, sha) is None, "the rebuilt cache is not complete"
    assert generate_first(reader, inputs) == gguf_and_cached["gguf"]
    # and the rebuilt folder serves the next load without a warning
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", ModelCacheWarning)
        _, said = fresh_load(monkeypatch, tmp_path / "cache", capsys)
    assert "from the dequantised cache" in said


def test_damage_seen_before_loading_is_warned_about_and_rebuilt(gguf_and_cached, tmp_path,
                                                                monkeypatch, capsys):
    """Truncated weights: the sizes show the damage before any load is tried, the warning
    names it, and the folder is rebuilt complete (the rebuilt weights generate as the GGUF
    load does: test_a_damaged_cache_is_rebuilt_with_a_warning)."""
    hurt, expected = DAMAGES["truncated weights"]
    folder = _damaged_copy(gguf_and_cached["cache"], tmp_path / "cache", hurt)
    with pytest.warns(ModelCacheWarning, match=f"is damaged: {expected}"):
        _, said = fresh_load(monkeypatch, tmp_path / "cache", capsys)
    assert "from its GGUF file" in said and "dequantising" in said
    assert "loading it failed" not in said
    assert problem_with(folder, file_sha256(package_gguf_path(SMOL))) is None


def test_the_remembered_gguf_hash_follows_the_file(tmp_path, monkeypatch):
    import hashlib

    from helpers.reader.model_cache import gguf_sha256

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"first contents")
    assert gguf_sha256(weights) == hashlib.sha256(b"first contents").hexdigest()
    index = json.loads((tmp_path / "cache" / "gguf-sha256.json").read_text())
    assert index[str(weights)]["sha256"] == hashlib.sha256(b"first contents").hexdigest()
    weights.write_bytes(b"other contents")  # same size, a new modification time
    assert gguf_sha256(weights) == hashlib.sha256(b"other contents").hexdigest()
