"""What a backtest replays and how the replays reach the workers: sides, named tasks, chunks, the chord.

Tasks are named, not imported: backtest.tasks calls the replay modules, never the reverse.
"""

from __future__ import annotations

import logging

from celery import chord, group, signature
from django.conf import settings

from ..models import (
    AblationReplay,
    Backtest,
    ReplaySide,
    ShadowReplay,
    TaskReplay,
)

logger = logging.getLogger(__name__)

ABLATION_SIDE = "ablation-"  # the side of a variant's replay: "ablation-<index into the variants>"


def replay_sides(backtest: Backtest) -> list[str]:
    """Every side a backtest replays each task under: baseline, candidate, then each variant."""
    variants = (backtest.ablation or {}).get("variants") or []
    return [*ReplaySide.values, *(f"{ABLATION_SIDE}{i}" for i in range(len(variants)))]


def replays_expected(backtest: Backtest) -> int:
    """Task replays on every side, and one per recorded selection of the shadow replay."""
    return len(backtest.task_ids) * len(replay_sides(backtest)) + len((backtest.shadow or {}).get("traces", []))


def replays_done(backtest: Backtest) -> int:
    return (
        TaskReplay.objects.filter(backtest=backtest).count()
        + AblationReplay.objects.filter(backtest=backtest).count()
        + ShadowReplay.objects.filter(backtest=backtest).count()
    )


REPLAY_CHUNK_TASK = "backtest.replay_chunk"
SHADOW_TASK = "backtest.shadow_task"
FINISH_TASK = "backtest.finish_backtest"
FAIL_TASK = "backtest.fail_backtest"


def replay_chunks(backtest: Backtest) -> list[list[tuple[int, str]]]:
    """Every (task, side) of a backtest (each task's sides together, tasks in order), cut into
    chunks of FG_BACKTEST_CHUNK pairs, fewer per chunk when that leaves under
    FG_BACKTEST_MIN_CHUNKS chunks, so that a small backtest still spreads over several workers."""
    pairs = [(task_id, side) for task_id in backtest.task_ids for side in replay_sides(backtest)]
    if not pairs:
        return []
    size = max(1, min(settings.FG_BACKTEST_CHUNK, -(-len(pairs) // settings.FG_BACKTEST_MIN_CHUNKS)))
    return [pairs[i : i + size] for i in range(0, len(pairs), size)]


def launch_chord(backtest_id: int):
    """Send the replays in chunks (replay_chunks: each chunk one Celery task that replays its pairs
    and writes them in one transaction, replay_many), one task per recorded selection of the shadow
    replay, then the judge.

    Tasks are named, not imported: backtest.tasks calls this module, never the reverse.
    """
    backtest = Backtest.objects.only("task_ids", "ablation", "shadow").get(pk=backtest_id)
    replays = group(
        [
            *(
                signature(REPLAY_CHUNK_TASK, args=(backtest_id, [list(p) for p in chunk]), immutable=True)
                for chunk in replay_chunks(backtest)
            ),
            *(
                signature(SHADOW_TASK, args=(backtest_id, trace_id), immutable=True)
                for trace_id in (backtest.shadow or {}).get("traces", [])
            ),
        ]
    )
    callback = signature(FINISH_TASK, args=(backtest_id,)).on_error(
        signature(FAIL_TASK, args=(backtest_id,), immutable=True)
    )
    return chord(replays)(callback)
