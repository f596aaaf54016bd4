"""Project paths, resolved from this file so lessons, tests and scripts agree.

A page never publishes a path of the machine that built it: every message that names a
file goes through :func:`shown`.
"""
import site
import sysconfig
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = PROJECT_ROOT / "data" / "riverton"
LESSONS_DIR = PROJECT_ROOT / "lessons"


def shown(path) -> str:
    """A path as a message prints it, without the machine's folders: relative to the
    installed packages (``<site-packages>/...``), the project (``data/riverton/...``) or
    the home folder (``~/...``); else only its last two parts."""
    path = Path(path).expanduser()
    resolved = path.resolve() if path.is_absolute() or path.exists() else path
    packages = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                *site.getsitepackages(), site.getusersitepackages()}
    places = [*((Path(p), "<site-packages>/") for p in packages), (PROJECT_ROOT, ""),
              (Path.home(), "~/")]
    for root, prefix in places:
        try:
            return prefix + resolved.relative_to(Path(root).resolve()).as_posix()
        except (ValueError, OSError):
            continue
    return path.as_posix() if not path.is_absolute() else ".../" + "/".join(path.parts[-2:])
