"""Digest checks: a stored bundle against its recorded digest, and a fresh re-run against the store."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ..outputs import ContextBundle, ContextTrace
from ..routing.report import routing_header


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    expected: str
    actual: str


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_stored_bundle(trace: ContextTrace, bundle: ContextBundle, recorded: str) -> list[Check]:
    """Recompute the digest from the stored bundle's rendered text; `recorded` is the trace row's."""
    digest = sha256(bundle.rendered)
    joined = "".join(item.rendered for item in bundle.items)
    return [
        Check("sha256 of the stored rendered bundle", digest == recorded, recorded, digest),
        Check(
            "trace header digest",
            trace.bundle_digest == recorded,
            recorded,
            trace.bundle_digest,
        ),
        Check(
            "items concatenate to the rendered bundle",
            joined == bundle.rendered,
            sha256(bundle.rendered),
            sha256(joined),
        ),
    ]


def check_rerun(stored: ContextTrace, recorded: str, rerun: ContextTrace) -> list[Check]:
    """Compare a fresh engine run with the same inputs against what was stored."""
    differing = sum(
        1
        for a, b in zip(stored.candidates, rerun.candidates, strict=False)
        if (a.unit_id, a.reason_code) != (b.unit_id, b.reason_code)
    ) + abs(len(stored.candidates) - len(rerun.candidates))
    routing = []
    if stored.routing is not None:
        # a trace made with local overlay units cannot be re-run without them: it says so here
        before, after = routing_header(stored.routing), routing_header(rerun.routing)
        moved = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        routing.append(
            Check(
                "re-run routing",
                not moved,
                f"{stored.routing.completeness}, {len(stored.routing.dispositions)} dispositions",
                f"differs: {', '.join(moved)}" if moved else "identical",
            )
        )
    return [
        Check("re-run bundle digest", rerun.bundle_digest == recorded, recorded, rerun.bundle_digest),
        *routing,
        Check(
            "re-run candidate decisions",
            differing == 0,
            f"{len(stored.candidates)} candidates",
            f"{differing} differ" if differing else f"{len(rerun.candidates)} identical",
        ),
        Check(
            "engine version",
            stored.engine_version == rerun.engine_version,
            stored.engine_version,
            rerun.engine_version,
        ),
        Check(
            "corpus digest",
            stored.retriever.corpus_digest == rerun.retriever.corpus_digest,
            stored.retriever.corpus_digest,
            rerun.retriever.corpus_digest,
        ),
    ]
