"""The declared builder: the caller states the work frame; the frame must list its work type."""

from __future__ import annotations

from dataclasses import replace

from ..policy import UnknownWorkType
from .common import BuilderInput, BuilderTools, unknown_frame


def build_declared(inputs: BuilderInput, tools: BuilderTools):
    declared = inputs.declared
    if declared is None or declared.work_type is None:
        return unknown_frame(inputs, "declared")
    frame = inputs.project_frame
    if not frame.lists(declared.work_type):
        raise UnknownWorkType.of(frame, declared.work_type)
    return replace(
        declared,
        establishment="declared",
        builder="declared",
        margin=None,
        runner_up=None,
        plausible_work_types=(),
        objective_by="declared" if declared.objective else "",
    )
