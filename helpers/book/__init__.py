"""The book's own machinery: building the site, Quarto cell options, the execution cache.

Nothing here is taught in the lessons. `python -m helpers.book` builds the book (see
:mod:`helpers.book.build`); :mod:`helpers.book.cache` decides when a lesson must execute
again; :mod:`helpers.book.freeze` applies the same decision to Quarto's `_freeze/` folder.
"""
