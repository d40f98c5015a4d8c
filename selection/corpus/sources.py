"""Corpus files read into plain values, keeping each YAML node's line and each JSON object's."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from selection.corpus import limits
from selection.corpus.places import PathPart, Place, Report

_TIMESTAMP = "tag:yaml.org,2002:timestamp"


class CorpusLoader(yaml.SafeLoader):
    """SafeLoader that leaves times as strings, so every time goes through one zone-aware parser.

    It also refuses nesting past limits.MAX_DEPTH while composing, before Python's own recursion
    limit could be reached; alias expansion is bounded where values are built (_plain).
    """

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > limits.MAX_DEPTH:
                raise ComposerError(
                    None,
                    None,
                    f"nests deeper than {limits.MAX_DEPTH} levels of mappings and lists",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


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


def read_text(path: Path, file: str, report: Report, *, max_bytes: int) -> str | None:
    try:
        size = path.stat().st_size
        if size > max_bytes:
            report.add_file(
                file, "", f"is {size} bytes; the format allows at most {max_bytes} bytes"
            )
            return None
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
    text = read_text(path, file, report, max_bytes=limits.MAX_YAML_BYTES)
    if text is None:
        return None
    loader = None
    try:
        # the reader refuses unprintable characters (a raw NUL) as it is built
        loader = CorpusLoader(text)
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = error.problem or error.context or "unreadable"
        report.add_file(file, where, f"is not valid YAML: {problem}")
        return None
    except yaml.YAMLError as error:
        report.add_file(file, "", f"is not valid YAML: {limits.printable(str(error))}")
        return None
    finally:
        if loader is not None:
            loader.dispose()
    if node is None:
        report.add_file(file, "line 1", "is empty; expected a mapping")
        return None
    lines: dict[tuple[PathPart, ...], int] = {(): node.start_mark.line + 1}
    # a repeated key or an unreadable value is reported and dropped; the rest is still checked so
    # that one pass finds every issue
    budget = _Budget(limits.MAX_YAML_VALUES)
    value = _plain(node, (), lines, loader, file, report, frozenset(), budget)
    if budget.exceeded:
        report.add_file(
            file,
            "",
            f"expands to more than {limits.MAX_YAML_VALUES} values (aliases counted each time "
            "they are used): refused as an alias bomb",
        )
        return None
    problems = list(limits.value_problems(value))
    for path_, problem in problems[:20]:
        report.add(Place(file, path_, lines), problem)
    if problems:
        # a value no field can hold stops the file here: later checks would quote it back
        return None
    return YamlDocument(file, value, lines)


class _Budget:
    """Values left to build from one YAML file; aliases spend it each time they are expanded."""

    def __init__(self, values: int) -> None:
        self.left = values
        self.exceeded = False

    def spend(self) -> bool:
        self.left -= 1
        if self.left < 0:
            self.exceeded = True
        return not self.exceeded


def _plain(
    node: Node,
    path: tuple[PathPart, ...],
    lines: dict[tuple[PathPart, ...], int],
    loader: CorpusLoader,
    file: str,
    report: Report,
    ancestors: frozenset[int],
    budget: _Budget,
) -> Any:
    line = node.start_mark.line + 1
    if not budget.spend():
        return None
    if id(node) in ancestors:
        report.add_file(file, f"line {line}", "holds a recursive alias")
        return None
    if len(path) > limits.MAX_DEPTH:
        # reachable through aliases: an anchored subtree used deep inside another
        if len(path) == limits.MAX_DEPTH + 1:
            report.add_file(
                file,
                f"line {line}",
                f"nests deeper than {limits.MAX_DEPTH} levels of mappings and lists",
            )
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
            mapping[key] = _plain(
                value_node, path + (key,), lines, loader, file, report, ancestors, budget
            )
        return mapping
    if isinstance(node, SequenceNode):
        items = []
        for index, item_node in enumerate(node.value):
            lines[path + (index,)] = item_node.start_mark.line + 1
            items.append(
                _plain(item_node, path + (index,), lines, loader, file, report, ancestors, budget)
            )
        return items
    try:
        return loader.construct_object(node)
    except (yaml.YAMLError, ValueError) as error:
        # ValueError: an integer past Python's digit limit, a malformed base-60 number, ...
        report.add_file(
            file,
            f"line {line}",
            f"has a value that cannot be read: "
            f"{limits.printable(str(getattr(error, 'problem', None) or error))[:200]}",
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
_TOO_DEEP = f"nests deeper than {limits.MAX_DEPTH} levels of objects and arrays"


def load_jsonl(path: Path, file: str, report: Report) -> JsonLines | None:
    text = read_text(path, file, report, max_bytes=limits.MAX_JSONL_BYTES)
    if text is None:
        return None
    objects: list[JsonLine] = []
    unreadable: set[str] = set()
    # split on "\n" only: str.splitlines would also split on separators that JSON strings may hold
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        size = len(line.encode("utf-8", "surrogatepass"))
        if size > limits.MAX_LINE_BYTES:
            report.add_file(
                file,
                f"line {number}",
                f"is {size} bytes; a line may hold at most {limits.MAX_LINE_BYTES} bytes",
            )
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
            unread = f"is not valid JSON: {error.msg} at column {error.colno}"
        except ValueError as error:
            unread = f"is not valid JSON: {error}"
        except RecursionError:
            unread = _TOO_DEEP
        else:
            if not isinstance(value, dict):
                report.add_file(file, f"line {number}", "must hold one JSON object")
                continue
            unread = _TOO_DEEP if limits.depth(value) > limits.MAX_DEPTH else None
        if unread is not None:
            report.add_file(file, f"line {number}", unread)
            unreadable.update(_ID_IN_RAW_LINE.findall(line)[:1])
            continue
        problems = list(limits.value_problems(value))
        for path_, problem in problems[:20]:
            report.add(Place(file, path_, line=number), problem)
        if problems:
            unreadable.update(_ID_IN_RAW_LINE.findall(line)[:1])
            continue
        objects.append(JsonLine(number, value, tuple(duplicates)))
    return JsonLines(objects, frozenset(unreadable))
