"""Frame health over time: a promoted frame read on its project's tasks, judged
against its first reading under the project's gates, stored, charted, and alerted once per flip."""

from __future__ import annotations

import pytest
from django.urls import reverse

from authority.models import AuditEntry
from authority.services import frame_version_create, promotion_create
from backtest.health import services as health
from backtest.models import FrameHealth
from governance.inbox import inbox_for
from rules import health_judgement as judge
from selection.models import Corpus, Task
from tests.selection.memory_kit import unit_create

pytestmark = pytest.mark.django_db


def test_a_reading_stores_versions_metrics_and_gates_once_per_trigger(sift):
    row = health.health_check(project=sift, trigger="manual", key="manual:one")
    assert row.frame_version.number == 1
    assert row.tasks == Task.objects.filter(project=sift).count() > 0
    assert row.corpus_id == sift.corpus_id and row.corpus_revision == 0
    assert row.task_set_version is None  # the set as imported
    assert row.primary_metric == "must_include_recall"
    assert {g["key"] for g in row.gate_results} == {
        "must_include_recall primary", "precision max_drop", "harmful_admission max_rise", "leakage max",
    }
    assert row.passed and row.transition == ""
    assert 0.0 <= row.means["must_include_recall"] <= 1.0
    again = health.health_check(project=sift, trigger="manual", key="manual:one")
    assert again.pk == row.pk and FrameHealth.objects.count() == 1


def _promote(project, lead, **changes):
    from authority.selectors import current_frame_version

    current = current_frame_version(project=project)
    version = frame_version_create(
        project=project, snapshot={**current.snapshot, **changes}, parent=current, author=lead, origin="proposal"
    )
    promotion_create(project=project, frame_version=version, promoted_by=lead)
    return version


def test_a_gate_that_starts_failing_alerts_once_and_its_recovery_is_said(sift, sift_users, client):
    lead, reviewer, auditor = sift_users["lead"], sift_users["reviewer"], sift_users["auditor"]
    first = health.health_check(project=sift, trigger="schedule", key="schedule:2026-11-28")
    assert first.passed
    # the project now declares a floor its frame does not reach
    gates = first.frame_version.snapshot["gates"]
    floor = round(min(1.0, first.means["precision"] + 0.1), 3)
    strict = _promote(sift, lead, gates={**gates, "limits": [*gates["limits"], {"metric": "precision", "min": floor}]})
    second = health.health_check(project=sift, trigger="promotion", key="promotion:strict")
    assert second.frame_version == strict
    assert not second.passed and second.transition == "alert"
    failing = [g for g in second.gate_results if not g["passed"]]
    assert [g["key"] for g in failing] == ["precision min"]
    assert "below the minimum" in failing[0]["reason"]
    alerts = AuditEntry.objects.filter(project=sift, action="health.alert")
    assert alerts.count() == 1
    assert "precision min" in alerts.get().summary
    assert alerts.get().payload["failing"] == ["precision min"]
    # the leads' and reviewers' inboxes say so; an auditor's asks nothing of them
    for user in (lead, reviewer):
        [alert] = inbox_for(user).health
        assert alert.project_slug == "sift" and alert.failing == ("precision min",)
    assert inbox_for(auditor).health == []
    # the project page says so above its charts, and the home page of a lead lists it
    client.force_login(reviewer)
    page = client.get(reverse("project-detail", args=["sift"])).content.decode()
    assert 'id="health-alert"' in page and "fails precision min" in page
    assert 'id="health-check"' in page  # a reviewer may ask for a reading now
    client.force_login(lead)
    assert 'id="inbox-health"' in client.get(reverse("home")).content.decode()
    # still failing the next day: no second alert
    third = health.health_check(project=sift, trigger="schedule", key="schedule:2026-11-29")
    assert not third.passed and third.transition == ""
    assert AuditEntry.objects.filter(project=sift, action="health.alert").count() == 1
    # the lead promotes the gates back: every gate passes, and the recovery is said once
    _promote(sift, lead, gates=gates)
    fourth = health.health_check(project=sift, trigger="promotion", key="promotion:relaxed")
    assert fourth.passed and fourth.transition == "recovered"
    recovered = AuditEntry.objects.get(project=sift, action="health.recovered")
    assert "passes every gate again" in recovered.summary
    assert AuditEntry.objects.filter(project=sift, action="health.alert").count() == 1
    assert inbox_for(lead).health == []
    # the page charts every reading: the primary metric's four points, precision's failing two as diamonds
    client.force_login(auditor)
    page = client.get(reverse("project-detail", args=["sift"])).content.decode()
    assert 'id="health-alert"' not in page and 'id="health-recovered"' in page
    charts = _charts(page)
    assert list(charts) == ["must_include_recall", "precision", "harmful_admission", "leakage"]
    assert charts["must_include_recall"].count('class="point"') == 4
    assert charts["precision"].count('class="point failing"') == 2
    assert charts["precision"].count('class="point"') == 2
    assert "<title id=\"health-precision-title\">precision over time</title>" in charts["precision"]
    assert "4 readings" in charts["precision"] and "2 of them fail a gate on it" in charts["precision"]
    assert 'id="health-check"' not in page  # an auditor reads, and does not ask for readings
    table = page.split('id="health-table"')[1].split("</table>")[0]
    assert table.count("<tr") == 1 + 4  # the header and every reading


def _charts(page: str) -> dict[str, str]:
    """metric -> its <svg> on the project page."""
    found = {}
    for chunk in page.split('<svg class="health-chart" id="health-')[1:]:
        metric = chunk.split('"', 1)[0]
        found[metric] = chunk.split("</svg>", 1)[0]
    return found


def test_the_judge_reads_limits_against_the_first_reading_and_absolute_limits_now():
    gates = {
        "primary": "must_include_recall",
        "min_improvement": 0.0,
        "limits": [{"metric": "precision", "max_drop": 0.02}, {"metric": "leakage", "max": 0.0}],
    }
    then = {"t1": {"must_include_recall": 1.0, "precision": 0.5, "leakage": 0.0}}
    same = judge.judge(gates, then, then)
    assert same.passed and same.failing == ()
    worse = judge.judge(gates, then, {"t1": {"must_include_recall": 1.0, "precision": 0.45, "leakage": 0.1}})
    assert worse.failing == ("precision max_drop", "leakage max")
    assert judge.transition(None, worse.failing) == ("alert", worse.failing)
    assert judge.transition(worse.failing, worse.failing) == ("", ())
    assert judge.transition(("precision max_drop",), worse.failing) == ("alert", ("leakage max",))
    assert judge.transition(worse.failing, ()) == ("recovered", worse.failing)
    assert judge.transition((), ()) == ("", ())


def test_a_chart_draws_one_mark_per_reading_and_escapes_its_words():
    from datetime import UTC, datetime, timedelta

    from backtest.health import chart

    start = datetime(2026, 11, 1, 4, tzinfo=UTC)
    points = [
        chart.Point(start + timedelta(days=i), value, passed, f"v1 <{i}>")
        for i, (value, passed) in enumerate([(0.5, True), (0.52, True), (0.3, False)])
    ]
    svg = chart.line_chart(
        chart_id="health-precision", title="precision & co", description="three readings",
        points=points, lines=[chart.Line(0.4, "min 0.4")],
    )  # fmt: skip
    assert svg.startswith('<svg class="health-chart" id="health-precision"') and svg.endswith("</svg>")
    assert 'role="img"' in svg and 'aria-labelledby="health-precision-title health-precision-desc"' in svg
    assert svg.count('<circle class="point"') == 2 and svg.count('<polygon class="point failing"') == 1
    assert "precision &amp; co" in svg and "v1 &lt;2&gt;" in svg and "<2>" not in svg
    assert 'class="limit"' in svg and "min 0.4" in svg
    assert "fails its gate" in svg.split("<polygon")[1]
    assert chart.line_chart(chart_id="x", title="t", description="d", points=[]) == ""


def test_a_reading_runs_as_of_now_and_says_how_much_memory_grew(sift, sift_users, client):
    first = health.health_check(project=sift, trigger="manual", key="manual:grew-1")
    assert first.memory_sequence == Corpus.objects.get(pk=sift.corpus_id).sequence and first.memory_growth is None
    for n in range(3):
        unit_create(sift, f"grown-{n}", f"a unit written after the first reading {n}", dimension=384)
    second = health.health_check(project=sift, trigger="manual", key="manual:grew-2")
    assert second.memory_growth == 3 and second.memory_sequence == first.memory_sequence + 3
    client.force_login(sift_users["reviewer"])
    readings = client.get(reverse("api-1:project-health", args=[sift.slug])).json()
    assert [r["memory_growth"] for r in readings] == [None, 3]
    page = client.get(reverse("project-detail", args=[sift.slug])).content.decode()
    assert "memory grew by 3 changes since the reading before" in page
