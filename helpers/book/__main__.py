"""`python -m helpers.book`: build the book (see :mod:`helpers.book.build`)."""
import sys

from helpers.book.build import main

sys.exit(main())
