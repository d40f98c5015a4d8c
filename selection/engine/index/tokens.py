"""The tokeniser: the one definition of a term, shared by BM25, overlap signals and the reference."""

from __future__ import annotations

import re

TOKENISER = "lowercase-unicode-words-v1"
_WORD = re.compile(r"\w+")


def tokenise(text: str) -> list[str]:
    """Lowercase, then every run of Unicode word characters (letters, digits, underscore).

    No stop words, no stemming, no minimum length; the BM25 reference test feeds these exact tokens
    to rank_bm25.BM25Okapi.
    """
    return _WORD.findall(text.lower())
