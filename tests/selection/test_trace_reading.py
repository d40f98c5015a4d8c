"""Readable traces: what decided each candidate comes first, the rest on request; the CSV holds
what the page shows; a diff picks from comparable traces; the history shows a unit's fate."""

from __future__ import annotations

import csv
import io
import re

from django.urls import reverse

from . import test_traces

# the trace explorer's fixtures: the lab corpus, its people, an auditor's client
embedding_cache, lab, people, auditor_client = (
    test_traces.embedding_cache,
    test_traces.lab,
    test_traces.people,
    test_traces.auditor_client,
)


def _header(html: str) -> list[str]:
    table = html[html.index('id="candidate-table"') :]
    return re.findall(r'data-col="([^"]+)"', table[: table.index("</thead>")])


def test_unit_disposition_and_reason_lead_and_signals_wait_for_the_toggle(lab, auditor_client):
    trace = lab.select(budget=160).trace
    url = reverse("trace-detail", args=[trace.pk])
    html = auditor_client.get(url).content.decode()
    columns = _header(html)
    assert columns[:3] == ["unit", "disposition", "reason"]
    assert "goal_relevance" not in columns and "bm25_rank" not in columns
    # admitted and rejected read as words with a symbol, not only a colour
    assert '<span aria-hidden="true">✓</span> admitted' in html
    assert '<span aria-hidden="true">✗</span> rejected' in html
    shown = _header(auditor_client.get(url, {"details": "1"}).content.decode())
    assert shown[:3] == ["unit", "disposition", "reason"]
    assert "goal_relevance" in shown and "bm25_rank" in shown and "eligibility" in shown


def test_the_csv_link_exports_the_filtered_rows(lab, auditor_client):
    trace = lab.select(budget=160).trace
    html = auditor_client.get(reverse("trace-detail", args=[trace.pk]), {"disposition": "rejected"}).content.decode()
    href = re.search(r'href="([^"]+)" id="export-shown-csv"', html).group(1).replace("&amp;", "&")
    assert "disposition=rejected" in href
    rows = list(csv.DictReader(io.StringIO(auditor_client.get(href).content.decode())))
    everything = list(csv.DictReader(io.StringIO(auditor_client.get(href.split("?")[0]).content.decode())))
    assert rows and len(rows) < len(everything)
    assert {r["disposition"] for r in rows} == {"rejected"}
    assert "goal_relevance" in rows[0]  # the export keeps every column


def test_diff_with_offers_the_same_tasks_traces_other_versions_first(lab, auditor_client):
    same = lab.select(condition="C2").trace
    other_version = lab.select(frame_version=lab.version(2)).trace
    trace = lab.select().trace
    html = auditor_client.get(reverse("trace-detail", args=[trace.pk])).content.decode()
    picker = html[html.index('<select name="b" id="diff-b"') :]
    picker = picker[: picker.index("</select>")]
    offered = [int(pk) for pk in re.findall(r'<option value="(\d+)"', picker)]
    assert offered == [other_version.pk, same.pk]
    assert "(same version)" in picker
    assert "Produced by a direct selection" in html


def test_the_history_unit_search_shows_the_units_disposition_in_each_trace(lab, auditor_client):
    c6 = lab.select().trace
    c2 = lab.select(condition="C2").trace
    html = auditor_client.get(reverse("trace-list"), {"unit": "p1"}).content.decode()
    assert 'id="unit-column"' in html
    cells = dict(re.findall(r'data-trace="(\d+)">.*?class="unit-disposition" data-disposition="([^"]*)"', html, re.S))
    assert cells == {str(c6.pk): "rejected", str(c2.pk): "budget_omitted"}
    assert "omitted: over budget" in html and "CLASS_ABSENT_AND_LOW_QUERY_RELEVANCE" in html
