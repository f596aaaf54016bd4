"""Project paths, resolved from this file so lessons, tests and scripts agree.

Introduced in lesson 1, "Set up".
"""
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = PROJECT_ROOT / "data" / "riverton"
LESSONS_DIR = PROJECT_ROOT / "lessons"
