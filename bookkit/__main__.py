"""`python -m bookkit`: build the book (see :mod:`bookkit.build`)."""
import sys

from bookkit import skip_unused_schema_grammars

skip_unused_schema_grammars()

from bookkit.build import main  # noqa: E402

sys.exit(main())
