"""What every frame builder reads and returns, and how scores become an establishment."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from ..types import BuilderThresholds, EstablishmentPolicy, ProjectFrame, WorkFrame, WorkSignal

Vector = Sequence[float]


class UnknownBuilder(ValueError):
    pass


@dataclass(frozen=True)
class Exemplar:
    """A past task of the project whose work type a person declared: similarity's neighbour."""

    task_id: str
    work_type: str
    vector: tuple[float, ...]


@dataclass(frozen=True)
class BuilderInput:
    """What a builder may read: the signals, the project frame, and (for the declared builder
    only) the frame a caller declared. `task_id` is the task being judged, never its own
    neighbour."""

    signals: tuple[WorkSignal, ...]
    project_frame: ProjectFrame
    standpoint: datetime | None = None
    declared: WorkFrame | None = None
    task_id: str | None = None
    exemplars: tuple[Exemplar, ...] = ()


@dataclass(frozen=True)
class BuilderTools:
    """Boundaries a builder calls but does not own, handed in so the builders stay pure.

    embed: texts -> unit-length vectors (the loaded embedding model).
    complete: a chat request mapping -> the answer's text (an OpenAI-compatible endpoint);
        raising any exception (a timeout, a refused connection) means no answer.
    """

    embed: Callable[[list[str]], Sequence[Vector]] | None = None
    complete: Callable[[dict], str] | None = None
    extra: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Establishment:
    work_type: str | None
    establishment: str
    margin: float | None
    runner_up: str | None
    plausible: tuple[str, ...]
    scores: tuple[tuple[str, float], ...] = ()
    bar: float | None = None  # the margin confidence needed (threshold, raised by calibration)
    calibration: str = ""


@dataclass(frozen=True)
class Case:
    """One of the project's declared past tasks, read by the builder leave-one-out: the margin of
    its first work type over its second, and whether the first was the declared one."""

    task_id: str
    margin: float | None
    right: bool


def establish(scores: Mapping[str, float], thresholds: BuilderThresholds) -> Establishment:
    """Rank work types by score (ties by name) and say how sure the ranking is.

    unknown: no score, or the first below `min_score` (the builder's best guess is still kept as
    the work type, for runs without abstention); inferred-ambiguous: the first leads the second by
    less than `margin`, and every work type within `margin` of the first is plausible;
    inferred-confident otherwise.
    """
    ranked = tuple(sorted(((k, float(v)) for k, v in scores.items()), key=lambda kv: (-kv[1], kv[0])))
    if not ranked:
        return Establishment(None, "unknown", None, None, ())
    first_name, first = ranked[0]
    runner_up = ranked[1][0] if len(ranked) > 1 else None
    margin = round(first - ranked[1][1], 6) if len(ranked) > 1 else None
    if first < thresholds.min_score:
        best = first_name if first > 0 else None
        return Establishment(best, "unknown", margin, runner_up, (), ranked)
    if margin is not None and margin < thresholds.margin:
        plausible = tuple(name for name, score in ranked if first - score < thresholds.margin)
        return Establishment(first_name, "inferred-ambiguous", margin, runner_up, plausible, ranked)
    return Establishment(first_name, "inferred-confident", margin, runner_up, (), ranked)


def calibrate(
    found: Establishment,
    cases: Sequence[Case],
    thresholds: BuilderThresholds,
    policy: EstablishmentPolicy,
) -> Establishment:
    """`found` judged against how the builder did on the project's declared past tasks
    (`cases`, each read leave-one-out), as the policy's `calibration` says.

    "loo": the bar for confidence is the threshold margin, raised to the largest margin at which
    the builder misread a case; confident needs a margin above every such misreading and at least
    `min_calibrated` cases. Otherwise the frame is ambiguous at best, and every work type within
    the bar of the first is plausible. An unknown establishment stays unknown.
    """
    if policy.calibration != "loo":
        return replace(found, bar=thresholds.margin)
    wrong = [c.margin for c in cases if not c.right and c.margin is not None]
    worst = max(wrong, default=None)
    bar = max(thresholds.margin, worst if worst is not None else 0.0)
    right = sum(1 for c in cases if c.right)
    note = (
        f"leave-one-out over {len(cases)} declared past task{'s' if len(cases) != 1 else ''}: "
        f"{right} read right"
        + (f", largest margin of a misreading {worst:.3f}" if worst is not None else "")
    )
    if found.establishment == "unknown" or found.work_type is None:
        return replace(found, bar=bar, calibration=note)
    sure = (
        found.margin is None or (found.margin >= thresholds.margin and (worst is None or found.margin > worst))
    )
    if len(cases) < policy.min_calibrated:
        sure = False
        note += f" (fewer than {policy.min_calibrated}: ambiguous at best)"
    if sure and found.establishment == "inferred-confident":
        return replace(found, bar=bar, calibration=note)
    first = found.scores[0][1] if found.scores else 0.0
    plausible = tuple(
        n for n, s in found.scores if first - s < bar or (worst is not None and first - s <= worst)
    ) or (found.work_type,)
    return replace(
        found, establishment="inferred-ambiguous", plausible=plausible, bar=bar, calibration=note
    )


def establishment_of(frame: WorkFrame, work_type: str, thresholds: BuilderThresholds) -> WorkFrame:
    """`frame` (a built one) with `work_type` put in its place, established against the builder's
    own scores: the frame's own establishment when it is the builder's first, ambiguous when it is
    within the bar of the first (the frame's calibrated bar, else the threshold margin; every type
    within it is plausible), unknown when the signals point elsewhere or nowhere. For the hazard
    experiment: would a wrong work type be held with confidence by what the signals show?"""
    scores = dict(frame.scores)
    mine = scores.get(work_type)
    first_name, first = frame.scores[0] if frame.scores else (None, 0.0)
    bar = frame.confidence_bar if frame.confidence_bar is not None else thresholds.margin
    if first_name == work_type and first >= thresholds.min_score:
        establishment, plausible = frame.establishment, frame.plausible_work_types
    elif mine is None or first < thresholds.min_score or first - mine >= bar:
        establishment, plausible = "unknown", ()
    else:
        establishment = "inferred-ambiguous"
        plausible = tuple(n for n, s in frame.scores if first - s < bar)
    return replace(
        frame,
        work_type=work_type,
        establishment=establishment,
        plausible_work_types=plausible,
        # the substituted work type is licensed by no signal
        cites=tuple((name, ids) for name, ids in frame.cites if name != "work_type"),
    )


def inferred_frame(
    inputs: BuilderInput,
    builder: str,
    found: Establishment,
    *,
    work_type_cites: Sequence[str],
    objective: str,
    objective_cites: Sequence[str],
) -> WorkFrame:
    """The builder's WorkFrame: its own objective (marked as such), every field citing signals."""
    cites = []
    if found.work_type is not None and work_type_cites:
        cites.append(("work_type", tuple(sorted(set(work_type_cites)))))
    if objective and objective_cites:
        cites.append(("objective", tuple(sorted(set(objective_cites)))))
    return WorkFrame(
        objective=objective,
        work_type=found.work_type,
        constraints=(),
        signals=inputs.signals,
        standpoint=inputs.standpoint,
        establishment=found.establishment,
        cites=tuple(sorted(cites)),
        builder=builder,
        margin=found.margin,
        runner_up=found.runner_up,
        plausible_work_types=found.plausible,
        objective_by=builder if objective else "",
        scores=tuple((name, round(score, 6)) for name, score in found.scores),
        confidence_bar=None if found.bar is None else round(found.bar, 6),
        calibration=found.calibration,
    )


def unknown_frame(inputs: BuilderInput, builder: str) -> WorkFrame:
    return inferred_frame(
        inputs,
        builder,
        Establishment(None, "unknown", None, None, ()),
        work_type_cites=(),
        objective="",
        objective_cites=(),
    )


def signals_text(signals: Sequence[WorkSignal]) -> str:
    """The signals as one text, in id order (signal order carries no meaning)."""
    return "\n".join(s.content for s in sorted(signals, key=lambda s: (s.id, s.kind, s.content)))


def ordered(signals: Sequence[WorkSignal]) -> list[WorkSignal]:
    return sorted(signals, key=lambda s: (s.id, s.kind, s.content))
