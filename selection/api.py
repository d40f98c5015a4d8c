"""The selection app's API: one router gathering each room's routes (serving, traces, memory, memory
writes, evaluation).

Authentication is given by the site, so no route module imports anything of the apps above it.
"""

from __future__ import annotations

from ninja import Router

from selection.evaluation.api import router as evaluation_router
from selection.memory.api import router as memory_router
from selection.memory.writes.api import router as memory_writes_router
from selection.serving.api import router as serving_router
from selection.traces.api import router as traces_router

router = Router()
for room in (serving_router, traces_router, memory_router, memory_writes_router, evaluation_router):
    router.add_router("", room)
