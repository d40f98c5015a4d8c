"""When a baseline replay can be reused by a later backtest instead of being selected again.

Proposals of one project are backtested against the same promoted baseline version until the next
promotion, so their baseline sides replay the same tasks under the same frame over the same corpus:
the same selection, every time. A baseline replay is stored with a key of everything its selection
is made from; a later backtest whose baseline replay has the same key names the stored replay's
trace (scoring its bundle again: the ledger is read fresh) instead of selecting and tracing again.

The key is SHA-256 over:

- the baseline FrameVersion (its snapshot is immutable) and the backtest's condition;
- the task (its query, work frame, signals, budget, standpoint and routing inputs are immutable:
  labelling adds tasks, it never edits one);
- the fingerprint of the index in use (selection.memory.store.corpus_index_fingerprint): the
  corpus's base key (cluster, database, project rows, index code), its revision (an erasure moves
  it) and the memory sequence the index covers (the task's own, or now's), so a replay as of one
  sequence is never reused for another;
- the selection code (every .py file under selection/, so any engine, retrieval, framing or
  embedding change makes a new key) and ENGINE_VERSION;
- the embedding model directory (the query vectors).

A trace with a tombstone (erased or expired after it was written) is never reused.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path

import selection
from selection.engine.pipeline import ENGINE_VERSION
from selection.memory.embeddings import configured_model_dir

_SELECTION = Path(selection.__file__).resolve().parent


@cache
def selection_code_fingerprint() -> str:
    """SHA-256 of every Python file of the selection app, by relative path (once per process)."""
    digest = hashlib.sha256()
    for path in sorted(_SELECTION.rglob("*.py")):
        digest.update(str(path.relative_to(_SELECTION)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def baseline_key(backtest, task_id: int, corpus_fingerprint: str) -> str:
    """The key of `backtest`'s baseline replay of `task_id` (see the module's docstring)."""
    inputs = [
        "baseline-replay/1",
        backtest.baseline_version_id,
        backtest.condition,
        task_id,
        corpus_fingerprint,
        selection_code_fingerprint(),
        ENGINE_VERSION,
        str(configured_model_dir()),
    ]
    return hashlib.sha256(json.dumps(inputs).encode()).hexdigest()
