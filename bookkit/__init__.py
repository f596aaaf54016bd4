"""The book's own machinery: building the site, cell options, the execution cache, checks.

Nothing here is taught in the lessons, and no lesson imports it; the lessons import the
`helpers` package (what they teach) and the `runtime` package (what serves them).
`python -m bookkit` builds the book (:mod:`bookkit.build`, with :mod:`bookkit.cellopts`
for the `#|` cell options); :mod:`bookkit.cache` decides when a lesson must execute again,
from a key that hashes `helpers/`, `exercises/`, `runtime/` and `data/` (not this
package: an edit here changes how pages are written, which the page cache tracks);
:mod:`bookkit.freeze` applies the same decision to Quarto's `_freeze/` folder as its
pre-render and post-render steps; :mod:`bookkit.quarto` finds (or installs) Quarto and
runs its preview, restarted when those folders change; :mod:`bookkit.offline` keeps
pages free of network assets; :mod:`bookkit.kernel_config` quiets kernels that Quarto
starts. The fixture's data check is part of the runtime (`python -m runtime data check`).
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
