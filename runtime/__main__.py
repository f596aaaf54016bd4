"""``python -m runtime``: the book's command line (see :mod:`runtime.cli`)."""
import sys

from runtime.cli import main

sys.exit(main())
