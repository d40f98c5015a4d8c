"""The gate specification a frame declares, one typed frozen object from corpus.yaml to the backtest's
decision, and the project's only list of limit bounds. The corpus reader builds it with located
issues; Gates.from_spec reads a stored `gates` mapping (snapshot, backtest row) into it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from .serialisation import Serialisable

DEFAULT_PRIMARY = "must_include_recall"
GATES_KEYS = ("primary", "min_improvement", "limits", "require_interval")


class GateSpecError(ValueError):
    """Gates that cannot be judged: an unknown bound, a metric the replays did not measure."""


@dataclass(frozen=True)
class Gate(Serialisable):
    """One limit on a metric; each bound set is judged on its own (see rules.gate_verdict)."""

    metric: str
    max_drop: float | None = None
    max_rise: float | None = None
    max: float | None = None
    min: float | None = None
    max_task_drop: float | None = None  # no single task may lose more than this, whatever the mean

    @property
    def bounds(self) -> tuple[tuple[str, float], ...]:
        """(bound, limit) of every bound set, in LIMIT_BOUNDS order."""
        return tuple(
            (bound, value) for bound in LIMIT_BOUNDS if (value := getattr(self, bound)) is not None
        )

    @classmethod
    def from_spec(cls, raw: Mapping) -> Gate:
        """A limit as a frame writes it, {"metric": ..., "max_drop": 0.02}; "x-" keys are ignored."""
        named = [key for key in raw if key != "metric" and not key.startswith("x-")]
        if not named:
            raise GateSpecError(f"the limit on {raw['metric']} names no bound")
        for bound in named:
            if bound not in LIMIT_BOUNDS:
                raise GateSpecError(
                    f'unknown limit bound "{bound}": one of {", ".join(LIMIT_BOUNDS)}'
                )
        return cls(metric=raw["metric"], **{bound: float(raw[bound]) for bound in named})


LIMIT_BOUNDS: tuple[str, ...] = tuple(f.name for f in fields(Gate) if f.name != "metric")


@dataclass(frozen=True)
class Gates(Serialisable):
    """The primary metric must rise by more than min_improvement, and no limit may be breached.

    With require_interval, the primary gate and the max_drop/max_rise limits are judged on the
    adverse end of the delta's 95 % bootstrap interval rather than on the mean delta.
    """

    primary: str = DEFAULT_PRIMARY
    min_improvement: float = 0.0
    limits: tuple[Gate, ...] = ()
    require_interval: bool = False

    @property
    def metrics(self) -> tuple[str, ...]:
        """The primary metric, then each limit's metric, each once."""
        names = [self.primary]
        for limit in self.limits:
            if limit.metric not in names:
                names.append(limit.metric)
        return tuple(names)

    @classmethod
    def from_spec(cls, raw: Gates | Mapping | None) -> Gates:
        """Gates from a frame's `gates` mapping (a snapshot's, a backtest row's); absent keys default."""
        if isinstance(raw, Gates):
            return raw
        raw = raw or {}
        return cls(
            primary=raw.get("primary") or DEFAULT_PRIMARY,
            min_improvement=float(raw.get("min_improvement") or 0.0),
            limits=tuple(Gate.from_spec(limit) for limit in raw.get("limits") or ()),
            require_interval=bool(raw.get("require_interval") or False),
        )
