"""Provenance: a reply may cite only passages of the fingerprinted handbook.

Lesson 5, "Every defence on every reply". Trust comes from the file a passage was loaded
from, never from what it says: the handbook table is trusted only when it gives exactly
the fingerprint the fixture's metadata records for its file (:func:`check_fingerprinted`),
and a citation of any other passage is held.
"""
from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

@dataclass(frozen=True)
class Provenance:
    """The provenance verdict on one reply's citations."""

    held: bool
    untrusted: tuple[str, ...]  # cited IDs that are not fingerprinted handbook passages


def trusted_ids(index: pd.DataFrame) -> frozenset[str]:
    """IDs of the rows of an index that came from the fingerprinted handbook.

    Lesson 5, "Every defence on every reply". ``index`` is a table from
    :func:`helpers.attacks.attack_index`, whose ``trusted`` column is set from the file a
    row was loaded from.
    """
    return frozenset(index.loc[index["trusted"].astype(bool), "passage_id"])


def provenance_check(sources: Iterable[str], trusted: Iterable[str]) -> Provenance:
    """Hold a reply that cites any passage outside ``trusted``.

    Lesson 5, "Every defence on every reply". A reply that cites nothing
    is not held here (the screen's ``answer_has_citation`` covers an answer without a
    source); a citation is judged by its ID alone, never by the cited text.
    """
    allowed = set(trusted)
    untrusted = tuple(source for source in sources if source not in allowed)
    return Provenance(bool(untrusted), untrusted)


class UntrustedHandbookError(ValueError):
    """A handbook table that is not the fingerprinted handbook was offered as trusted."""


#: The handbook's file, whose fingerprint the metadata records (lesson 1's fixture).
HANDBOOK_FILE = "riverton-handbook.csv"


def handbook_fingerprint(handbook: pd.DataFrame) -> str:
    """SHA-256 of the handbook table written back as its CSV file is written (its columns
    in order, a header, minimal quoting, LF line ends): for lesson 1's validated table,
    the file's own bytes. Lesson 5, "Plant the passages"."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(handbook.columns)
    writer.writerows(handbook.itertuples(index=False, name=None))
    return hashlib.sha256(buffer.getvalue().encode("utf-8")).hexdigest()


def check_fingerprinted(handbook: pd.DataFrame, metadata: pd.DataFrame) -> str:
    """Refuse a handbook table whose fingerprint is not the one ``metadata`` (the fixture's,
    as ``runtime.load_riverton`` gives it) records for the handbook file; returns the
    fingerprint. Lesson 5, "Plant the passages"."""
    recorded = metadata.loc[metadata["artifact"] == HANDBOOK_FILE, "fingerprint"]
    if recorded.empty:
        raise UntrustedHandbookError(f"the metadata has no row for {HANDBOOK_FILE}")
    actual = handbook_fingerprint(handbook)
    if actual != recorded.iloc[0]:
        raise UntrustedHandbookError(
            f"the handbook table is not the fingerprinted {HANDBOOK_FILE}: its rows give "
            f"SHA-256 {actual[:12]}..., the metadata records {recorded.iloc[0][:12]}...; "
            "only the validated handbook of lesson 1 (load_riverton()) is trusted")
    return actual
