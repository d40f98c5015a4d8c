"""Corpus files read into plain values, keeping each YAML node's line and each JSON object's."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from selection.corpus.places import PathPart, Report

_TIMESTAMP = "tag:yaml.org,2002:timestamp"


class CorpusLoader(yaml.SafeLoader):
    """SafeLoader that leaves times as strings, so every time goes through one zone-aware parser."""


CorpusLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class CorpusDumper(yaml.SafeDumper):
    """SafeDumper with the loader's resolvers: times are written unquoted, as on the format page."""


CorpusDumper.yaml_implicit_resolvers = CorpusLoader.yaml_implicit_resolvers


@dataclass(frozen=True)
class YamlDocument:
    file: str
    value: Any
    lines: dict[tuple[PathPart, ...], int]


@dataclass(frozen=True)
class JsonLine:
    line: int
    value: dict[str, Any]
    duplicate_keys: tuple[str, ...]


def read_text(path: Path, file: str, report: Report) -> str | None:
    try:
        raw = path.read_bytes()
    except OSError as error:
        report.add_file(file, "", f"cannot be read: {error.strerror or error}")
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        report.add_file(file, f"line {line}", f"is not UTF-8 text: {error.reason}")
        return None
    return text.removeprefix("\ufeff")


def load_yaml(path: Path, file: str, report: Report) -> YamlDocument | None:
    text = read_text(path, file, report)
    if text is None:
        return None
    loader = CorpusLoader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = error.problem or error.context or "unreadable"
        report.add_file(file, where, f"is not valid YAML: {problem}")
        return None
    except yaml.YAMLError as error:
        report.add_file(file, "", f"is not valid YAML: {error}")
        return None
    finally:
        loader.dispose()
    if node is None:
        report.add_file(file, "line 1", "is empty; expected a mapping")
        return None
    lines: dict[tuple[PathPart, ...], int] = {(): node.start_mark.line + 1}
    # a repeated key or an unreadable value is reported and dropped; the rest is still checked so
    # that one pass finds every issue
    value = _plain(node, (), lines, loader, file, report, frozenset())
    return YamlDocument(file, value, lines)


def _plain(
    node: Node,
    path: tuple[PathPart, ...],
    lines: dict[tuple[PathPart, ...], int],
    loader: CorpusLoader,
    file: str,
    report: Report,
    ancestors: frozenset[int],
) -> Any:
    line = node.start_mark.line + 1
    if id(node) in ancestors:
        report.add_file(file, f"line {line}", "holds a recursive alias")
        return None
    ancestors = ancestors | {id(node)}
    if isinstance(node, MappingNode):
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, ScalarNode):
                report.add_file(file, f"line {key_line}", "has a key that is not a plain string")
                continue
            # keys are field names or identifiers: take the text as written ("no" stays "no")
            key = key_node.value
            if key in mapping:
                report.add_file(file, f"line {key_line}", f'repeats the key "{key}" in one mapping')
                continue
            lines[path + (key,)] = key_line
            mapping[key] = _plain(value_node, path + (key,), lines, loader, file, report, ancestors)
        return mapping
    if isinstance(node, SequenceNode):
        items = []
        for index, item_node in enumerate(node.value):
            lines[path + (index,)] = item_node.start_mark.line + 1
            items.append(_plain(item_node, path + (index,), lines, loader, file, report, ancestors))
        return items
    try:
        return loader.construct_object(node)
    except yaml.YAMLError as error:
        report.add_file(
            file,
            f"line {line}",
            f"has a value that cannot be read: {getattr(error, 'problem', error)}",
        )
        return None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


@dataclass(frozen=True)
class JsonLines:
    objects: list[JsonLine]
    # ids seen on lines that are not valid JSON: links to them are not reported a second time
    unreadable_ids: frozenset[str]


_ID_IN_RAW_LINE = re.compile(r'"id"\s*:\s*"([^"\\]*)"')


def load_jsonl(path: Path, file: str, report: Report) -> JsonLines | None:
    text = read_text(path, file, report)
    if text is None:
        return None
    objects: list[JsonLine] = []
    unreadable: set[str] = set()
    # split on "\n" only: str.splitlines would also split on separators that JSON strings may hold
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        duplicates: list[str] = []

        def pairs(
            items: list[tuple[str, Any]], duplicates: list[str] = duplicates
        ) -> dict[str, Any]:
            result: dict[str, Any] = {}
            for key, item in items:
                if key in result:
                    duplicates.append(key)
                result[key] = item
            return result

        try:
            value = json.loads(line, object_pairs_hook=pairs, parse_constant=_refuse_constant)
        except json.JSONDecodeError as error:
            report.add_file(
                file, f"line {number}", f"is not valid JSON: {error.msg} at column {error.colno}"
            )
            unreadable.update(_ID_IN_RAW_LINE.findall(line)[:1])
            continue
        except ValueError as error:
            report.add_file(file, f"line {number}", f"is not valid JSON: {error}")
            unreadable.update(_ID_IN_RAW_LINE.findall(line)[:1])
            continue
        if not isinstance(value, dict):
            report.add_file(file, f"line {number}", "must hold one JSON object")
            continue
        objects.append(JsonLine(number, value, tuple(duplicates)))
    return JsonLines(objects, frozenset(unreadable))
