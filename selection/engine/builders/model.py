"""The model builder: a chat model (an OpenAI-compatible endpoint, reached through the `complete`
tool) answers in a constrained JSON schema; no answer or a malformed one establishes `unknown`."""

from __future__ import annotations

import json
import math

from .common import BuilderInput, BuilderTools, establish, inferred_frame, ordered, unknown_frame

SYSTEM_PROMPT = (
    "You establish the work frame of an agent's task from its signals. Choose the work type the "
    "signals show, from the project's list, or \"unknown\" when they do not determine it. Give "
    "your confidence (0 to 1), the runner-up work type and its confidence, a one-sentence "
    "objective, and the ids of the signals behind the work type and behind the objective. "
    "Answer with JSON only."
)


def answer_schema(work_types: tuple[str, ...], signal_ids: tuple[str, ...]) -> dict:
    """The JSON schema the answer must follow (strict structured output)."""
    ids = {"type": "array", "items": {"type": "string", "enum": list(signal_ids)}}
    return {
        "type": "object",
        "additionalProperties": False,
        "required": [
            "work_type",
            "confidence",
            "runner_up",
            "runner_up_confidence",
            "objective",
            "cites",
        ],
        "properties": {
            "work_type": {"type": "string", "enum": [*work_types, "unknown"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "runner_up": {"type": ["string", "null"], "enum": [*work_types, None]},
            "runner_up_confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "objective": {"type": "string"},
            "cites": {
                "type": "object",
                "additionalProperties": False,
                "required": ["work_type", "objective"],
                "properties": {"work_type": ids, "objective": ids},
            },
        },
    }


def model_request(inputs: BuilderInput) -> dict:
    """The chat request body, less the model name (the endpoint's configuration adds it)."""
    frame = inputs.project_frame
    signals = ordered(inputs.signals)
    lines = []
    for name in frame.work_type_names:
        profile = frame.profile(name)
        about = f": {profile.description}" if profile.description else ""
        lines.append(f"- {name}{about}")
    described = "\n".join(lines)
    shown = "\n".join(f"[{s.id}] ({s.kind}) {s.content}" for s in signals)
    return {
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {
                "role": "user",
                "content": f"Project: {frame.project}\nWork types:\n{described}\n\nSignals:\n{shown}",
            },
        ],
        "temperature": 0,
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "work_frame",
                "strict": True,
                "schema": answer_schema(frame.work_type_names, tuple(s.id for s in signals)),
            },
        },
    }


class MalformedAnswer(ValueError):
    pass


def parse_answer(text: str, inputs: BuilderInput) -> dict:
    """The answer's fields, checked against the schema by hand (the endpoint may ignore it)."""
    try:
        doc = json.loads(text)
    except (TypeError, json.JSONDecodeError) as error:
        raise MalformedAnswer(f"not JSON: {error}") from None
    if not isinstance(doc, dict):
        raise MalformedAnswer("not a JSON object")
    listed = set(inputs.project_frame.work_type_names)
    known_ids = {s.id for s in inputs.signals}
    work_type = doc.get("work_type")
    if work_type != "unknown" and work_type not in listed:
        raise MalformedAnswer(f"work_type {work_type!r} is not listed")
    runner_up = doc.get("runner_up")
    if runner_up is not None and runner_up not in listed:
        raise MalformedAnswer(f"runner_up {runner_up!r} is not listed")
    numbers = {}
    for key in ("confidence", "runner_up_confidence"):
        value = doc.get(key, 0.0 if key == "runner_up_confidence" else None)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise MalformedAnswer(f"{key} is not a number")
        if not 0 <= value <= 1:
            raise MalformedAnswer(f"{key} {value} is outside 0..1")
        numbers[key] = float(value)
    objective = doc.get("objective", "")
    if not isinstance(objective, str):
        raise MalformedAnswer("objective is not a string")
    cites = doc.get("cites") or {}
    if not isinstance(cites, dict):
        raise MalformedAnswer("cites is not an object")
    checked = {}
    for key in ("work_type", "objective"):
        ids = cites.get(key) or []
        if not isinstance(ids, list) or any(i not in known_ids for i in ids):
            raise MalformedAnswer(f"cites.{key} names a signal the task does not have")
        checked[key] = ids
    return {
        "work_type": work_type,
        "runner_up": runner_up,
        "objective": objective.strip(),
        "cites": checked,
        **numbers,
    }


def build_model(inputs: BuilderInput, tools: BuilderTools):
    if tools.complete is None or not inputs.project_frame.work_type_names:
        return unknown_frame(inputs, "model")
    try:
        text = tools.complete(model_request(inputs))
    except Exception:  # noqa: BLE001 - a boundary we do not own: any failure is "no answer"
        return unknown_frame(inputs, "model")
    try:
        answer = parse_answer(text, inputs)
    except MalformedAnswer:
        return unknown_frame(inputs, "model")
    if answer["work_type"] == "unknown":
        return unknown_frame(inputs, "model")
    scores = {answer["work_type"]: answer["confidence"]}
    if answer["runner_up"] and answer["runner_up"] != answer["work_type"]:
        scores[answer["runner_up"]] = answer["runner_up_confidence"]
    found = establish(scores, inputs.project_frame.establishment.thresholds_for("model"))
    return inferred_frame(
        inputs,
        "model",
        found,
        work_type_cites=answer["cites"]["work_type"],
        objective=answer["objective"],
        objective_cites=answer["cites"]["objective"] if answer["objective"] else (),
    )
