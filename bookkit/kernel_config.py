"""Quiet the kernel's "running over TCP without encryption" warning under Quarto.

ipykernel warns on every start when its connection is plain TCP. The build without Quarto
removes the cause: it asks jupyter_client for CurveZMQ keys, so the kernel's sockets are
encrypted (see :func:`bookkit.build.kernel_manager_config`). Quarto starts kernels
through a jupyter_client it configures itself, without keys, and the warning lands in the
middle of every render, where a reader takes it for an error.

For those kernels, `python -m bookkit.kernel_config` writes an IPython kernel
configuration file into the environment (``PREFIX/etc/ipython/ipython_kernel_config.py``,
which ipykernel reads at start-up in that environment only) with a logging filter that
drops exactly that one message. `make` runs it when it creates `.venv`. Every other
message of the kernel is left alone.
"""
from __future__ import annotations

import sys
from pathlib import Path

MARKER = "# bookkit.kernel_config"
#: The marker of files written when this module was ``helpers.book.kernel_config``.
EARLIER_MARKERS = ("# helpers.book.kernel_config",)
MESSAGE = "Kernel is running over TCP without encryption"

CONFIG = f'''{MARKER}: written by `python -m bookkit.kernel_config`; safe to delete.
# ipykernel warns "{MESSAGE}" on every start when the program that
# started it (Quarto, for one) gave it no CurveZMQ keys; this filter drops that one message.
import logging as _logging

_drop_unencrypted_tcp_warning = _logging.Filter()
_drop_unencrypted_tcp_warning.filter = lambda record: not str(record.msg).startswith({MESSAGE!r})
_logging.getLogger("IPKernelApp").addFilter(_drop_unencrypted_tcp_warning)
'''


def install(prefix: str | Path | None = None) -> Path:
    """Write the configuration file into ``prefix`` (this environment by default).

    An existing file that this module did not write is left as it is, with a message.
    """
    path = Path(prefix or sys.prefix) / "etc" / "ipython" / "ipython_kernel_config.py"
    if path.exists() and not path.read_text(encoding="utf-8").startswith((MARKER,
                                                                          *EARLIER_MARKERS)):
        raise FileExistsError(f"{path} exists and was not written by bookkit.kernel_config; "
                              "add its filter by hand, or delete the file and run this again")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CONFIG, encoding="utf-8")
    return path


if __name__ == "__main__":
    try:
        print(f"wrote {install()}")
    except FileExistsError as error:
        print(error, file=sys.stderr)
        sys.exit(1)
