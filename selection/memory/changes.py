"""The memory sequence: every change of a corpus's memory as one append-only MemoryChange row.

`memory_changes_append` is the one writer. It runs inside its caller's transaction, after the
caller has written the unit rows (and links) the changes describe, and:

- locks the corpus row (`SELECT ... FOR UPDATE`), so writers of one corpus commit one after
  another and a sequence is never seen before a smaller one of the same corpus;
- numbers the changes `corpus.sequence + 1 ...` in the order given;
- stores each unit's state after the change (`unit_state`), stamps the unit's `sequence`,
  `recorded_at` (and `created_sequence` for a created unit) and raises `corpus.sequence`.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection, transaction

from selection.models import Corpus, MemoryChangeKind

# the unit's record after a change: the units.jsonl fields, its status and its outgoing links
_STATE_SQL = """
    jsonb_build_object(
        'id', u.uid, 'project', p.slug, 'class', u.evidence_class, 'title', u.title,
        'text', u.text, 'created_at', u.created_at, 'valid_from', u.valid_from,
        'valid_to', u.valid_to, 'open_loop_status', u.open_loop_status,
        'open_loop_kind', u.open_loop_kind, 'paths', to_jsonb(u.paths), 'subject', u.subject,
        'facet', u.facet, 'root', u.root, 'status', u.status,
        'links', COALESCE((
            SELECT jsonb_agg(jsonb_build_array(l.kind, t.uid) ORDER BY l.kind, l.position, t.uid)
            FROM selection_unitlink l JOIN selection_memoryunit t ON t.id = l.target_id
            WHERE l.source_id = u.id), '[]'::jsonb)
    )
"""


def memory_changes_append(
    corpus_id: int,
    changes: Sequence[tuple[int, str]],
    *,
    actor=None,
    via: str,
    batch: str = "",
) -> range:
    """Append `changes` ((unit row id, MemoryChangeKind), in order) to the corpus's memory
    sequence; returns the sequence numbers they were given. Must run inside a transaction."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("memory_changes_append runs inside its caller's transaction")
    kinds = set(MemoryChangeKind.values)
    for _, kind in changes:
        if kind not in kinds:
            raise ValueError(f"unknown memory change kind {kind!r}")
    current = Corpus.objects.select_for_update().filter(pk=corpus_id).values_list("sequence", flat=True).get()
    if not changes:
        return range(current + 1, current + 1)
    unit_ids = [unit_id for unit_id, _ in changes]
    change_kinds = [kind for _, kind in changes]
    actor_id = getattr(actor, "pk", None)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO selection_memorychange
                (corpus_id, sequence, recorded_at, unit_id, kind, state, actor_id, via, batch)
            SELECT %s, %s + c.ord, now(), u.id, c.kind, {_STATE_SQL}, %s, %s, %s
            FROM unnest(%s::bigint[], %s::text[]) WITH ORDINALITY AS c(unit_id, kind, ord)
            JOIN selection_memoryunit u ON u.id = c.unit_id
            JOIN selection_project p ON p.id = u.project_id
            ORDER BY c.ord
            """,
            [corpus_id, current, actor_id, via, batch, unit_ids, change_kinds],
        )
        if cursor.rowcount != len(changes):
            raise ValueError("a memory change names a unit that does not exist")
        cursor.execute(
            """
            UPDATE selection_memoryunit u SET
                sequence = m.last, recorded_at = now(),
                created_sequence = CASE WHEN m.created IS NOT NULL THEN m.created ELSE u.created_sequence END
            FROM (
                SELECT unit_id, max(sequence) AS last,
                       min(sequence) FILTER (WHERE kind = 'created') AS created
                FROM selection_memorychange WHERE corpus_id = %s AND sequence > %s
                GROUP BY unit_id
            ) m
            WHERE u.id = m.unit_id
            """,
            [corpus_id, current],
        )
    last = current + len(changes)
    Corpus.objects.filter(pk=corpus_id).update(sequence=last)
    return range(current + 1, last + 1)


def corpus_sequence(corpus_id: int) -> int:
    """The corpus's memory sequence now: the greatest sequence of its committed changes."""
    return Corpus.objects.filter(pk=corpus_id).values_list("sequence", flat=True).get()
