"""The book's own machinery: building the site, Quarto cell options, the execution cache.

Nothing here is taught in the lessons. `python -m helpers.book` builds the book (see
:mod:`helpers.book.build`, and :mod:`helpers.book.cellopts` for the `#|` cell options);
:mod:`helpers.book.cache` decides when a lesson must execute again;
:mod:`helpers.book.freeze` applies the same decision to Quarto's `_freeze/` folder;
:mod:`helpers.book.quarto` finds (or installs) Quarto and runs its preview;
:mod:`helpers.book.kernel_config` quiets kernels that Quarto starts.
"""

import sys


def skip_unused_schema_grammars() -> None:
    """Keep jsonschema from compiling grammars that notebook validation never uses.

    nbformat validates notebooks with jsonschema, and jsonschema, when the optional
    ``rfc3987-syntax`` package is installed (Jupyter's event schemas pull it in),
    compiles some forty grammars at import to check "iri" strings, which no notebook
    schema asks for. That costs seconds on a slow CPU in every process that reads a
    notebook. Called by the book's command-line entry points only, never on import.
    """
    sys.modules.setdefault("rfc3987_syntax", None)  # a None entry makes the import fail
