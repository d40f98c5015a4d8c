"""The corpus-format metrics, exactly as docs define them. A folded unit counts as admitted;
unlabelled is DISTRACTOR.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence

from .outputs import ContextBundle

MUST, SHOULD, HARMFUL, DISTRACTOR = "MUST", "SHOULD", "HARMFUL", "DISTRACTOR"

# every per-task metric of the corpus format, in its order
METRICS = (
    "must_include_recall",
    "precision",
    "leakage",
    "harmful_admission",
    "redundancy",
    "tokens",
)


def label(ledger: Mapping[str, str], unit_id: str) -> str:
    return ledger.get(unit_id, DISTRACTOR)


def must_include_recall(admitted: Iterable[str], ledger: Mapping[str, str]) -> float:
    """|A ∩ MUST| / |MUST|; 1.0 when the task has no MUST unit."""
    must = {u for u, lab in ledger.items() if lab == MUST}
    if not must:
        return 1.0
    return len(must & set(admitted)) / len(must)


def precision(admitted: Iterable[str], ledger: Mapping[str, str]) -> float:
    """|A ∩ (MUST ∪ SHOULD)| / |A|; 0.0 when nothing is admitted."""
    a = set(admitted)
    if not a:
        return 0.0
    return sum(1 for u in a if label(ledger, u) in (MUST, SHOULD)) / len(a)


def leakage(
    admitted: Iterable[str], project_of: Mapping[str, str], scope: Collection[str]
) -> float:
    """Share of A whose project is outside the frame's scope; 0.0 when nothing is admitted."""
    a = set(admitted)
    if not a:
        return 0.0
    return sum(1 for u in a if project_of[u] not in scope) / len(a)


def harmful_admission(admitted: Iterable[str], ledger: Mapping[str, str]) -> float:
    """Share of A labelled HARMFUL; 0.0 when nothing is admitted."""
    a = set(admitted)
    if not a:
        return 0.0
    return sum(1 for u in a if label(ledger, u) == HARMFUL) / len(a)


def redundancy(admitted: Iterable[str], echo_of: Mapping[str, str | None]) -> float:
    """Share of A that restates (echo_of) another unit also in A; 0.0 when nothing is admitted."""
    a = set(admitted)
    if not a:
        return 0.0
    return sum(1 for u in a if echo_of.get(u) is not None and echo_of[u] in a) / len(a)


def tokens(bundle: ContextBundle) -> int:
    """Estimated tokens of the bundle as rendered: ceil(len(rendered) / 4)."""
    return bundle.tokens


def overlap(first: Iterable[str], second: Iterable[str]) -> float:
    """Jaccard of two admitted sets, |A1 ∩ A2| / |A1 ∪ A2|; 1.0 when both are empty (identical
    bundles).
    """
    a, b = set(first), set(second)
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def score_bundle(
    bundle: ContextBundle,
    ledger: Mapping[str, str],
    *,
    project_of: Mapping[str, str],
    echo_of: Mapping[str, str | None],
    scope: Collection[str],
) -> dict[str, float]:
    """Every per-task metric for one bundle, keys in the corpus-format order."""
    admitted = bundle.unit_ids()
    return {
        "must_include_recall": must_include_recall(admitted, ledger),
        "precision": precision(admitted, ledger),
        "leakage": leakage(admitted, project_of, scope),
        "harmful_admission": harmful_admission(admitted, ledger),
        "redundancy": redundancy(admitted, echo_of),
        "tokens": tokens(bundle),
    }


def prefix_share(a: str, b: str) -> float:
    """The share of bundle `b` that repeats the start of bundle `a` (characters of their common
    prefix over len(b)): what a prompt cache can reuse when `b` follows `a`."""
    if not b:
        return 1.0
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n / len(b)


def prefix_stability(sequences: Mapping[str, Sequence[str]]) -> float:
    """Mean prefix_share over consecutive bundles of each sequence (evaluate: one project's tasks in
    corpus order; bench: one piece of work's steps); 1.0 when there is no consecutive pair."""
    shares = [prefix_share(a, b) for seq in sequences.values() for a, b in zip(seq, seq[1:], strict=False)]
    return math.fsum(shares) / len(shares) if shares else 1.0
