"""Readable traces: what decided each candidate comes first, the rest on request; the CSV holds
what the page shows; a diff picks from comparable traces; the history shows a unit's fate."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.urls import reverse

from selection.traces.candidate_table import SIGNAL_SHORT

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


# --- what decided: each signal beside its part in the rank score ---------------------------------


def _cell(html: str, unit: str, signal: str) -> tuple[str, str]:
    """(the class attribute, the inner HTML) of one candidate's signal cell."""
    row = html[html.index(f'<tr id="c-{unit}"') :]
    row = row[: row.index("</tr>")]
    found = re.search(rf'<td class="([^"]*)" data-signal="{signal}" title="[^"]*">(.*?)</td>', row)
    assert found, f"{unit} has no {signal} cell"
    return found.group(1), found.group(2)


def _score_parts(html: str, unit: str) -> str:
    row = html[html.index(f'<tr id="c-{unit}"') :]
    return re.search(r'<td class="col-contributions[^"]*">([^<]*)</td>', row[: row.index("</tr>")]).group(1)


def test_each_signal_shows_its_value_and_the_part_the_trace_records_in_the_rank_score(lab, auditor_client):
    from selection.memory.store import trace_result

    trace = lab.select(budget=160).trace
    records = {c.unit_id: c for c in trace_result(trace).trace.candidates}
    html = auditor_client.get(reverse("trace-detail", args=[trace.pk]), {"details": "1"}).content.decode()
    # n1 is ranked; its query, objective, evidence and adjacency parts all moved its score
    n1 = records["n1"]
    entered = [p for p in n1.contributions if p.effect != "none" and p.value != 0]
    assert {p.signal for p in entered} >= {"query_relevance", "evidence_strength"}
    for part in entered:
        if part.signal == "pull":
            continue
        cls, text = _cell(html, "n1", part.signal)
        assert "sig-entered" in cls
        value = getattr(n1.signals, part.signal)
        assert text.startswith(f"{value:.3f} ") and f"<strong>{part.value:+.3f}</strong>" in text
    # the score parts lead by default (no toggle) and sum to the score the page shows
    default = auditor_client.get(reverse("trace-detail", args=[trace.pk])).content.decode()
    parts = _score_parts(default, "n1")
    for part in entered:
        assert f"{SIGNAL_SHORT.get(part.signal, part.signal)} {part.value:+.3f}" in parts
    shown = [float(v) for v in re.findall(r"[+-]\d\.\d{3}", parts)]
    assert sum(shown) == pytest.approx(n1.rank_score, abs=0.002)
    # a candidate rejected before ranking has no parts: its values carry no arrow
    cls, text = _cell(html, "o1", "query_relevance")
    assert "sig-not-ranked" in cls and "→" not in text
    assert 'id="score-legend"' in html and 'id="contributions-missing"' not in html


def test_goal_relevance_reads_as_informational_and_never_as_a_part_of_the_score(lab, auditor_client):
    from selection.memory.store import trace_result

    trace = lab.select(budget=160).trace
    records = trace_result(trace).trace.candidates
    html = auditor_client.get(reverse("trace-detail", args=[trace.pk]), {"details": "1"}).content.decode()
    ranked = [c for c in records if c.contributions]
    assert len(ranked) > 3
    for c in ranked:
        goal = next(p for p in c.contributions if p.signal == "goal_relevance")
        assert goal.effect == "none"
        cls, text = _cell(html, c.unit_id, "goal_relevance")
        assert "sig-informational" in cls and '<span class="sig-tag">informational</span>' in text
        assert "→" not in text and "<strong>" not in text
        assert "goal" not in _score_parts(html, c.unit_id)
        # a part that changed nothing (temporal validity x 1 here) is not shown as one either
        temporal = next(p for p in c.contributions if p.signal == "temporal_validity")
        if temporal.value == 0:
            cls, text = _cell(html, c.unit_id, "temporal_validity")
            assert "sig-no-effect" in cls and "→" not in text and "temporal" not in _score_parts(html, c.unit_id)
    # the engine's note is the cell's title, and the chart's caption names the idle signals
    row = html[html.index('<tr id="c-n1"') :]
    note = "not in the rank score: informational: the class bucket"
    assert f'data-signal="goal_relevance" title="{note}' in row
    assert re.search(r'id="idle-signals">In this trace, goal[^<]*entered no candidate', html)


def test_a_trace_recorded_before_contributions_still_renders_and_says_they_are_not_recorded(lab, auditor_client):
    from dataclasses import replace

    from selection.engine.outputs import SelectionResult
    from selection.memory.store import trace_result
    from selection.serving import selections as services

    new = lab.select(budget=160).trace
    result = trace_result(new)
    old_candidates = tuple(replace(c, contributions=()) for c in result.trace.candidates)
    old_result = SelectionResult(bundle=result.bundle, trace=replace(result.trace, candidates=old_candidates))
    old = services.trace_write(old_result, project=lab.project, frame_version=1, task=lab.task, source="select")
    assert not any(c.record.get("contributions") for c in old.candidates.all())

    for params in ({}, {"details": "1"}, {"sort": "-goal_relevance"}):
        response = auditor_client.get(reverse("trace-detail", args=[old.pk]), params)
        assert response.status_code == 200
        html = response.content.decode()
        assert 'id="contributions-missing"' in html and "is not recorded" in html
        assert _score_parts(html, "n1") == "not recorded"
    cls, text = _cell(html, "n1", "query_relevance")
    n1 = next(c for c in result.trace.candidates if c.unit_id == "n1")
    assert "sig-not-recorded" in cls and text == f"{n1.signals.query_relevance:.3f}"  # the value, no part
    assert 'data-signal="query_relevance" title="contribution not recorded' in html
    assert 'id="idle-signals"' not in html  # no claim about what decided without the record
    # the same trace recorded with contributions shows no such warning
    recorded = auditor_client.get(reverse("trace-detail", args=[new.pk])).content.decode()
    assert 'id="contributions-missing"' not in recorded


def test_a_routed_unit_reads_as_decided_by_no_rank_score_not_as_unrecorded(lab):
    from dataclasses import replace

    from selection.engine.reason_codes import Stage
    from selection.memory.store import trace_result
    from selection.traces.candidate_table import NOT_RANKED, NOT_RECORDED, candidate_rows

    engine_trace = trace_result(lab.select(budget=160).trace).trace
    # a unit the routing envelope admitted: ranked first, with no rank score behind it
    routed = replace(engine_trace.candidates[0], stage=Stage.ROUTING, rank=1, contributions=())
    rows = candidate_rows(replace(engine_trace, candidates=(routed, *engine_trace.candidates[1:])), {}, {})
    assert {p.state for p in rows[0].parts.values()} == {NOT_RANKED} and rows[0].values["contributions"] == ""
    # the same unit in a trace recorded before contributions: nothing is known, so nothing is claimed
    old = tuple(replace(c, contributions=()) for c in (routed, *engine_trace.candidates[1:]))
    rows = candidate_rows(replace(engine_trace, candidates=old), {}, {})
    ranked = [r for r in rows if r.record.rank is not None]
    assert ranked and all(p.state == NOT_RECORDED for r in ranked for p in r.parts.values())
    assert all(r.values["contributions"] == "not recorded" for r in ranked)
