"""`python -m helpers.book`: build the book (see :mod:`helpers.book.build`)."""
import sys

from helpers.book import skip_unused_schema_grammars

skip_unused_schema_grammars()

from helpers.book.build import main  # noqa: E402

sys.exit(main())
