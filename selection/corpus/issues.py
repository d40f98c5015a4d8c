"""Every import problem is a CorpusIssue naming the file, the place in it and the field."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CorpusIssue:
    file: str  # "units.jsonl", "tasks.yaml", ...
    location: (
        str  # "line 7" or a YAML path with its line: "tasks[2].frame.cites.objective (line 41)"
    )
    field: str  # the key at fault ("supersedes", "open_loop.status"); "" for a whole file
    message: str

    def __str__(self) -> str:
        where = f"{self.file} {self.location}".rstrip()
        if self.field:
            where += f', field "{self.field}"'
        return f"{where}: {self.message}"


class CorpusError(Exception):
    """A corpus that does not meet the interchange format; carries every issue found in one pass."""

    def __init__(self, issues: list[CorpusIssue] | tuple[CorpusIssue, ...]):
        self.issues: tuple[CorpusIssue, ...] = tuple(issues)
        super().__init__(self._render())

    def _render(self) -> str:
        return "\n".join(str(issue) for issue in self.issues)

    @property
    def summary(self) -> str:
        count = len(self.issues)
        return f"corpus rejected: {count} issue{'s' if count != 1 else ''}"

    def __str__(self) -> str:
        return self._render()
