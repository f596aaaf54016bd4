"""Project paths, resolved from this file so lessons, tests and scripts agree.

Introduced in lesson 1, "Set up".
"""
import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = PROJECT_ROOT / "data" / "riverton"
LESSONS_DIR = PROJECT_ROOT / "lessons"


def shown(path: Path) -> str:
    """A path as messages print it, with the home folder written as ``~`` (the messages
    that say where a model was loaded from, lesson 1, "Load the reader and the handbook")."""
    text = str(path)
    home = str(Path.home())
    return "~" + text[len(home):] if home != "/" and (text == home or text.startswith(home + os.sep)) else text
