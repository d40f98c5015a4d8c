"""Trace explorer pages: the history and its search export, one trace, one trace's export.

Views parse, call one selector or service, render. Any role in the trace's project may read every
page (access_read); the pages that compare a trace with others live in views_compare.py.
"""

from __future__ import annotations

import csv
from datetime import date

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import (
    Http404,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import render
from django.urls import reverse

from selection.corpus.limits import MAX_INTEGER, MAX_YEAR, MIN_YEAR
from selection.engine.outputs import SIGNAL_NAMES
from selection.engine.reason_codes import REACHES_MODEL, CoalescingKind, Stage
from selection.traces import origins, selectors
from selection.traces import table_layout as trace_table
from selection.traces.candidate_table import (
    COLUMNS,
    NOT_ADMITTED,
    SIGNAL_SHORT,
    TableQuery,
    candidate_rows,
    contributions_recorded,
    facet_values,
    filter_and_sort,
    idle_signals,
)
from selection.traces.csv_cells import csv_row

TRACE_PAGE_SIZE = 50


# --------------------------------------------------------------------------------------------
# History and search export
# --------------------------------------------------------------------------------------------


class BadFilter(ValueError):
    """A filter value that parses but lies outside what can be searched: HTTP 400."""


def _date(value: str, name: str) -> date | None:
    try:
        day = date.fromisoformat(value) if value else None
    except ValueError:
        return None
    if day is not None and not MIN_YEAR <= day.year <= MAX_YEAR:
        raise BadFilter(f"{name} must fall in the years {MIN_YEAR} to {MAX_YEAR}")
    return day


def _int(value: str, name: str) -> int | None:
    try:
        number = int(value) if value else None
    except ValueError:
        return None
    if number is not None and not 0 <= number <= MAX_INTEGER:
        raise BadFilter(f"{name} must be a number from 0 to {MAX_INTEGER}")
    return number


def id_param(value: str) -> int | None:
    """A row id from a query string; one no row can have (too large) finds nothing: a 404."""
    try:
        return _int(value, "id")
    except BadFilter:
        return None


def _filters(params) -> selectors.TraceFilters:
    get = lambda name: (params.get(name) or "").strip()  # noqa: E731
    return selectors.TraceFilters(
        project=get("project"),
        frame_version=_int(get("frame_version"), "frame_version"),
        since=_date(get("since"), "since"),
        until=_date(get("until"), "until"),
        task=get("task"),
        reason=get("reason"),
        disposition=get("disposition"),
        unit=get("unit"),
        source=get("source"),
        condition=get("condition"),
        work_type=get("work_type")[:100],
        outcome=get("outcome"),
        text=get("q")[: selectors.MAX_SEARCH_TEXT],
    )


def _bad_filter(error: BadFilter) -> HttpResponse:
    return HttpResponseBadRequest(f"{error}\n", content_type="text/plain; charset=utf-8")


@login_required
def trace_list(request):
    try:
        filters = _filters(request.GET)
    except BadFilter as error:
        return _bad_filter(error)
    traces = selectors.trace_search(user=request.user, filters=filters)
    page = Paginator(traces, TRACE_PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    found = (
        selectors.unit_dispositions(trace_ids=[t.pk for t in page], unit_uid=filters.unit) if filters.unit else {}
    )
    return render(
        request,
        "selection/trace_list.html",
        {
            "page": page,
            "rows": [(t, found.get(t.pk), trace_table.disposition_display(found[t.pk][0]) if t.pk in found else None)
                     for t in page],
            "filters": filters,
            "choices": selectors.trace_search_choices(user=request.user),
            "query": query.urlencode(),
        },
    )


SEARCH_FIELDS = (
    "id",
    "created_at",
    "project",
    "frame_version",
    "task",
    "condition",
    "source",
    "query",
    "budget_tokens",
    "bundle_tokens",
    "bundle_digest",
    "candidates",
    "admitted",
    "engine_version",
    "policy_version",
)


def _summary(trace) -> list:
    return [
        trace.pk,
        trace.created_at.isoformat(),
        trace.project.slug,
        trace.frame_version,
        trace.task.uid if trace.task_id else "",
        trace.condition,
        trace.source,
        trace.query,
        trace.budget_tokens,
        trace.bundle_tokens,
        trace.bundle_digest,
        trace.candidate_count or 0,
        " ".join(trace.admitted),
    ]


class _Echo:
    def write(self, value):
        return value


@login_required
def trace_search_export(request, fmt: str):
    try:
        filters = _filters(request.GET)
    except BadFilter as error:
        return _bad_filter(error)
    traces = selectors.trace_search(user=request.user, filters=filters)
    rows = (_summary(t) + [t.engine_version, t.policy_version] for t in traces.iterator(chunk_size=500))
    if fmt == "json":
        docs = [dict(zip(SEARCH_FIELDS, row, strict=True)) for row in rows]
        for doc in docs:
            doc["admitted"] = doc["admitted"].split()
            doc["url"] = reverse("trace-detail", args=[doc["id"]])
        response = JsonResponse({"count": len(docs), "traces": docs})
        response["Content-Disposition"] = 'attachment; filename="traces.json"'
        return response
    if fmt != "csv":
        raise Http404("export as .json or .csv")
    writer = csv.writer(_Echo())
    lines = (writer.writerow(csv_row(r)) for r in _prepend(SEARCH_FIELDS, rows))
    response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="traces.csv"'
    return response


def _prepend(head, rows):
    yield list(head)
    yield from rows


# --------------------------------------------------------------------------------------------
# One trace
# --------------------------------------------------------------------------------------------


def _table_context(trace, explained, table: TableQuery, *, details: bool = False) -> dict:
    rows = candidate_rows(explained.result.trace, explained.ledger, explained.ecodes)
    shown = filter_and_sort(rows, table)
    columns = trace_table.display_columns(details=details)
    keep = [("details", "1")] if details else []
    return {
        "trace": trace,
        "rows": [
            (row, trace_table.display_cells(row, columns), trace_table.disposition_display(row.record.disposition))
            for row in shown
        ],
        "total": len(rows),
        "table": table,
        "details": details,
        "facets": facet_values(rows),
        "not_admitted": NOT_ADMITTED,
        "columns": [
            (
                c.column,
                c.group,
                _urlencode(table.params(sort=table.sort_param(c.column.key)) + keep),
                ("desc" if table.descending else "asc") if c.column.key == table.sort else "",
            )
            for c in columns
        ],
        "has_ledger": bool(explained.ledger),
        "contributions_recorded": contributions_recorded(explained.result.trace),
        "base_query": _urlencode(table.params()),
        "details_query": _urlencode(table.params() + ([] if details else [("details", "1")])),
    }, rows


def _urlencode(pairs) -> str:
    from urllib.parse import urlencode

    return urlencode(pairs)


@login_required
def trace_detail(request, pk: int):
    trace, caps = selectors.readable_trace(user=request.user, pk=pk, expired_ok=True)
    if trace.expired_at is not None:
        tombstones = trace.tombstones.order_by("sequence")
        return render(request, "selection/trace_expired.html", {"trace": trace, "tombstones": tombstones}, status=410)
    explained = selectors.trace_explained(trace, user=request.user)
    table = TableQuery.from_params(request.GET)
    # sorted by a signal column, the signal columns show, or the order would be unexplained
    details = request.GET.get("details") == "1" or table.sort in trace_table.DETAIL
    context, rows = _table_context(trace, explained, table, details=details)
    if request.htmx and request.htmx.target == "candidates":
        return render(request, "selection/trace_candidates.html", context)
    engine_trace = explained.result.trace
    work = engine_trace.work_frame
    signals = {s.id: s for s in work.signals}
    work_fields = [
        (name, value, [signals.get(i) or i for i in work.cited(name)])
        for name, value in (
            ("objective", work.objective),
            ("work_type", work.work_type or ""),
            ("constraints", "; ".join(work.constraints)),
            ("standpoint", work.standpoint.isoformat() if work.standpoint else ""),
        )
    ]
    folded = {op.unit_id: op for op in engine_trace.coalescing if op.op == CoalescingKind.FOLD_ECHO}
    bundle, redacted = explained.result.bundle, explained.redacted
    items = [(item, [s for s in item.sources[1:] if s in folded]) for item in bundle.items]
    context.update(
        caps=caps,
        explained=explained,
        engine_trace=engine_trace,
        bundle=bundle,
        redacted=redacted,
        items=items,
        work_fields=work_fields,
        work_classes=engine_trace.project_frame.classes_for(work.work_type),
        chart=_chart_data(rows),
        idle_signals=_in_words([SIGNAL_SHORT[n] for n in idle_signals(rows)]),
        near_misses=[(n, explained.ledger.get(n.unit_id, "")) for n in explained.near_misses],
        stage_counts=_stage_counts(engine_trace),
        funnel=explained.funnel,
        origins=origins.trace_origins(trace),
        comparable=origins.comparable_traces(trace),
    )
    return render(request, "selection/trace_detail.html", context)


def _in_words(names: list[str]) -> str:
    """ "a, b and c" ("" for none)."""
    return " and ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else "".join(names)


def _chart_data(rows) -> dict:
    admitted = [r for r in rows if r.record.disposition in REACHES_MODEL]
    rejected = [r for r in rows if r.record.disposition not in REACHES_MODEL]
    return {
        "signals": list(SIGNAL_NAMES),
        "admitted": {n: [r.values[n] for r in admitted] for n in SIGNAL_NAMES},
        "rejected": {n: [r.values[n] for r in rejected] for n in SIGNAL_NAMES},
        "admitted_ids": [r.record.unit_id for r in admitted],
        "rejected_ids": [r.record.unit_id for r in rejected],
    }


STAGE_ORDER = tuple(Stage)  # pipeline order (routing first); the charts show the stages a trace used


def _stage_counts(engine_trace) -> dict:
    """Candidates disposed at each stage, by disposition, and the engine's own stage summaries."""
    counts: dict[str, dict[str, int]] = {}
    for c in engine_trace.candidates:
        counts.setdefault(c.disposition, {}).setdefault(c.stage, 0)
        counts[c.disposition][c.stage] += 1
    stages = [s for s in STAGE_ORDER if any(s in by for by in counts.values())]
    return {
        "stages": stages,
        "series": {d: [by.get(s, 0) for s in stages] for d, by in sorted(counts.items())},
        "summary": [(s.stage, s.considered, s.kept) for s in engine_trace.stages],
    }


# --------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------

CSV_EXTRA = ("item_id", "eligible", "eligibility_detail", "budget_spent", "pulled_by", "noted_on")


@login_required
def trace_export(request, pk: int, fmt: str):
    trace, _ = selectors.readable_trace(user=request.user, pk=pk)
    if fmt == "json":
        doc = selectors.trace_read(trace, user=request.user)[0].trace.as_dict()
        response = JsonResponse(doc, json_dumps_params={"indent": 1})
        response["Content-Disposition"] = f'attachment; filename="trace-{trace.pk}.json"'
        return response
    if fmt != "csv":
        raise Http404("export as .json or .csv")
    explained = selectors.trace_explained(trace, user=request.user)
    # the table's filters and sort, when the link carries them: the CSV holds what the page shows
    rows = filter_and_sort(
        candidate_rows(explained.result.trace, explained.ledger, explained.ecodes), TableQuery.from_params(request.GET)
    )
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="trace-{trace.pk}.csv"'
    writer = csv.writer(response)
    writer.writerow([c.key for c in COLUMNS] + list(CSV_EXTRA))
    for row in rows:
        c = row.record
        writer.writerow(
            csv_row(
                [row.values[col.key] if row.values[col.key] is not None else "" for col in COLUMNS]
                + [
                    c.item_id or "",
                    c.eligible,
                    "; ".join(f"{e.rule}: {e.detail}" for e in c.eligibility),
                    c.budget.spent,
                    c.retrieval.pulled_by or "",
                    c.noted_on or "",
                ]
            )
        )
    return response
