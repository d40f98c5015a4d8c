"""The second process of the live part (bench/parts/live.py): it serves C6 selections of the live
corpus back to back, as a web or worker process does, and answers on stdout:

- `wait <uid>`: selects until the index a selection ran over holds the unit, then prints the
  wall-clock time that selection ended (time.time());
- `stream <rate> <run>`: writes units at `rate` a second in a thread (precomputed vectors, no
  model) until `stop`, which prints how many it wrote.

It reads the corpus through selection.memory.store.corpus_index like every process: PostgreSQL is
the only thing it shares with the writer.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import replace

from django.db import close_old_connections, connections

from bench.held import Ask, held, serve
from bench.parts.live import unit_write
from selection.memory import store
from selection.models import MemoryUnit, Project
from selection.serving.selections import frame_for


def main(corpus_id: int, project_id: int, database: str) -> None:
    connections["default"].settings_dict["NAME"] = database  # the writer's database, before any query
    project = Project.objects.get(pk=project_id)
    _, frame = frame_for(project)
    sample = MemoryUnit.objects.filter(corpus_id=corpus_id).exclude(embedding=None).order_by("id").first()
    vector = tuple(float(x) for x in sample.embedding)
    ask = Ask(
        project=project.slug, query=sample.text[:120], objective=sample.text[:80], work_type=None,
        budget_tokens=1500, condition="C6", standpoint=None, query_vector=vector, objective_vector=vector,
    )  # fmt: skip
    corpus = held({project.slug: frame}, store.corpus_index(corpus_id), [ask])
    stop = threading.Event()
    written = [0]

    def stream(rate: float, run: str) -> None:
        n = 0
        while not stop.is_set():
            unit_write(project, f"live-{run}-stream{n}", f"stream {run} {n} {sample.text}", sample.embedding)
            n += 1
            written[0] = n
            stop.wait(1.0 / rate)
        close_old_connections()

    writer = None
    print("ready", flush=True)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "wait":
            while True:
                index = store.corpus_index(corpus_id)
                serve(replace(corpus, index=index), ask)
                if index.unit(args[0]) is not None:
                    print(repr(time.time()), flush=True)
                    break
        elif command == "stream":
            stop.clear()
            writer = threading.Thread(target=stream, args=(float(args[0]), args[1]), daemon=True)
            writer.start()
            print("streaming", flush=True)
        elif command == "stop":
            stop.set()
            if writer is not None:
                writer.join()
            print(written[0], flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
