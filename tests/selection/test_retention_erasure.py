"""Retention and erasure change written traces only through tombstones: the chain still verifies,
tampering afterwards is still named, and only a lead may ask for either."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction
from django.urls import reverse
from django.utils import timezone

from authority.access import AccessDenied
from authority.models import AuditEntry, RoleGrant
from selection.memory import index_cache
from selection.models import MemoryUnit, Trace, TraceCandidate, TraceTombstone
from tests.selection.test_trace_chain import tamper, verify
from tests.selection.test_traces import embedding_cache  # noqa: F401 - module-wide vectors

R1_TEXT = "Ranking budget rule: rank candidates by query relevance inside each class bucket"
REASON = "personal data of a former contractor"


@pytest.fixture
def lab(db, tmp_path):
    from tests.selection.test_traces import Lab

    return Lab(tmp_path)


@pytest.fixture
def people(lab, django_user_model):
    out = {}
    for role in ("lead", "reviewer", "auditor"):
        out[role] = django_user_model.objects.create_user(role)
        RoleGrant.objects.create(user=out[role], project=lab.project, role=role)
    return out


def _command(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


# --- retention -------------------------------------------------------------------------------


def test_retention_expires_old_traces_by_origin_and_the_chain_still_verifies(lab, people, client):
    from selection.traces.retention import retention_apply, retention_policy_set

    live = [lab.select(source="select").trace, lab.select(source="api", budget=200).trace]
    evaluation = lab.select(source="evaluation").trace
    backtest = lab.select(source="backtest").trace
    digests = dict(Trace.objects.values_list("pk", "digest"))
    retention_policy_set(project=lab.project, lead=people["lead"], evaluation_days=30, live_days=60)
    assert AuditEntry.objects.filter(action="retention.set", actor=people["lead"]).count() == 1

    soon = (timezone.now() + timedelta(days=40)).isoformat()
    rehearsal = _command("apply_retention", "--project", "tlab", "--dry-run", "--as-of", soon)
    assert "tlab: would expire 1 evaluation, 0 live" in rehearsal
    assert not Trace.objects.filter(expired_at__isnull=False).exists()  # a dry run writes nothing

    assert "tlab: expired 1 evaluation, 0 live" in _command("apply_retention", "--as-of", soon)
    gone = Trace.objects.get(pk=evaluation.pk)
    assert gone.expired_at is not None and gone.query == "" and gone.bundle == {} and gone.header == {}
    assert not TraceCandidate.objects.filter(trace=gone).exists()
    assert (gone.digest, gone.previous_digest, gone.chain_position) == (
        digests[gone.pk],
        evaluation.previous_digest,
        evaluation.chain_position,
    )
    later = timezone.now() + timedelta(days=70)
    (report,) = retention_apply(project=lab.project, now=later)
    assert {origin: ids for origin, ids in report.expired.items() if ids} == {"live": [t.pk for t in live]}
    assert Trace.objects.get(pk=backtest.pk).expired_at is None  # backtest traces are kept for ever
    assert dict(Trace.objects.values_list("pk", "digest")) == digests
    assert AuditEntry.objects.filter(action="retention.expired").count() == 2

    out, error = verify("tlab")
    assert error is None and "tlab: 4 traces, chain intact (3 expired: tombstones verified)" in out, out
    client.force_login(people["auditor"])
    page = client.get(reverse("trace-detail", args=[evaluation.pk]))
    assert page.status_code == 410 and "retention policy of tlab removed this trace" in page.content.decode()
    assert client.get(reverse("trace-export", args=[evaluation.pk, "json"])).status_code == 404
    assert client.get(reverse("trace-detail", args=[backtest.pk])).status_code == 200


def test_celery_beat_runs_the_same_retention_daily(lab, people):
    from django.conf import settings

    from config.celery import app
    from selection import tasks
    from selection.traces.retention import retention_policy_set

    schedule = settings.CELERY_BEAT_SCHEDULE["apply-retention"]
    assert schedule["task"] == tasks.apply_retention.name == "selection.apply_retention"
    assert "selection.apply_retention" in app.tasks
    old = lab.select(source="evaluation").trace
    retention_policy_set(project=lab.project, lead=people["lead"], evaluation_days=7)
    assert tasks.apply_retention() == 0  # nothing is a week old yet
    assert tasks.apply_retention(as_of=(timezone.now() + timedelta(days=8)).isoformat()) == 1
    assert Trace.objects.get(pk=old.pk).expired_at is not None


def test_only_a_lead_sets_retention_and_bad_values_change_nothing(lab, people, client):
    from selection.traces.retention import RetentionRefused, retention_policy_set

    with pytest.raises(AccessDenied):
        retention_policy_set(project=lab.project, lead=people["reviewer"], live_days=1)
    with pytest.raises(CommandError, match="may not change the retention policy in tlab"):
        _command("set_retention", "tlab", "--as", "auditor", "--live-days", "3")
    with pytest.raises(CommandError, match="live_days: from 1 to 36500 days, not 0"):
        _command("set_retention", "tlab", "--as", "lead", "--live-days", "0")
    with pytest.raises(RetentionRefused, match="evaluation_days: a whole number of days"):
        retention_policy_set(project=lab.project, lead=people["lead"], evaluation_days="soon")
    assert not AuditEntry.objects.filter(action="retention.set").exists()
    url = reverse("project-retention", args=["tlab"])
    client.force_login(people["reviewer"])
    assert 'id="live_days"' not in client.get(url).content.decode()  # read, not changed
    assert client.post(url, {"live_days": "5"}).status_code == 403
    client.force_login(people["lead"])
    refused = client.post(url, {"live_days": "-1"})
    assert refused.status_code == 400 and "live_days: from 1 to 36500 days, not -1" in refused.content.decode()
    assert not AuditEntry.objects.filter(action="retention.set").exists()
    assert client.post(url, {"evaluation_days": "30", "live_days": ""}).status_code == 302
    assert 'value="30"' in client.get(url).content.decode()
    out = _command("set_retention", "tlab", "--as", "lead", "--backtest-days", "90")
    assert "tlab keeps evaluation: for ever, backtest: 90 days, live: for ever" in out
    assert AuditEntry.objects.filter(action="retention.set", actor=people["lead"]).count() == 2


def test_the_trigger_lets_through_only_the_services_tombstones(lab, people):
    from selection.traces.retention import retention_apply, retention_policy_set

    old, fresh = lab.select().trace, lab.select(budget=200).trace
    retention_policy_set(project=lab.project, lead=people["lead"], live_days=1)
    retention_apply(project=lab.project, now=timezone.now() + timedelta(days=2))
    assert Trace.objects.filter(expired_at__isnull=False).count() == 2
    refused = [
        # a raw UPDATE of a tombstoned trace, outside the service
        ("UPDATE selection_trace SET query = 'back' WHERE id = %s", [old.pk], False),
        # even with the setting on: the digest and the link never change
        ("UPDATE selection_trace SET digest = repeat('0', 64) WHERE id = %s", [old.pk], True),
        ("UPDATE selection_trace SET created_at = now() WHERE id = %s", [old.pk], True),
        # a trace with no tombstone is not changed, whatever the setting
        ("UPDATE selection_trace SET query = 'x' WHERE id = %s", [lab.select(budget=300).trace.pk], True),
        ("DELETE FROM selection_trace WHERE id = %s", [fresh.pk], True),
        ("UPDATE selection_tracetombstone SET reason = 'x' WHERE trace_id = %s", [old.pk], True),
        ("DELETE FROM selection_tracetombstone WHERE trace_id = %s", [old.pk], True),
    ]
    for sql, params, setting in refused:
        with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
            with connection.cursor() as cursor:
                if setting:
                    cursor.execute("SELECT set_config('fg.tombstone', 'on', true)")
                cursor.execute(sql, params)
    out, error = verify("tlab")
    assert error is None and "chain intact (2 expired" in out


# --- erasure ---------------------------------------------------------------------------------


def _surfaces(client, traces, lab) -> dict[str, str]:
    from selection.traces.api import trace_document

    pages = {}
    for trace in traces:
        for name, url in (
            ("trace page", reverse("trace-detail", args=[trace.pk])),
            ("trace export json", reverse("trace-export", args=[trace.pk, "json"])),
            ("trace export csv", reverse("trace-export", args=[trace.pk, "csv"])),
        ):
            response = client.get(url)
            assert response.status_code == 200, url
            pages[f"{name} #{trace.pk}"] = response.content.decode()
        user = response.wsgi_request.user
        stored = Trace.objects.get(pk=trace.pk)  # as the API reads it, not the object in memory
        pages[f"API trace #{trace.pk}"] = json.dumps(trace_document(stored, user=user), default=str)
    search = client.get(reverse("trace-search-export", args=["json"]) + "?unit=r1")
    pages["search export"] = search.content.decode()
    pages["unit page"] = client.get(reverse("unit-detail", args=["tlab", "r1"])).content.decode()
    return pages


def test_a_lead_erases_a_unit_everywhere_and_the_chain_still_verifies(lab, people, client, tmp_path):
    from selection.memory.exporting import corpus_export

    roomy, tight = lab.select(budget=400).trace, lab.select().trace
    assert "r1" in roomy.admitted and "r0" in {c.unit_uid for c in roomy.candidates.all()}
    assert R1_TEXT in json.dumps(roomy.bundle) and "superseded by R1" in json.dumps(roomy.header)
    client.force_login(people["lead"])
    before = _surfaces(client, (roomy, tight), lab)
    assert any(R1_TEXT in body for body in before.values())

    unit_page = client.get(reverse("unit-detail", args=["tlab", "r1"])).content.decode()
    assert 'id="erase-form"' in unit_page and R1_TEXT in unit_page
    refused = client.post(reverse("unit-erase", args=["tlab", "r1"]), {"reason": REASON, "confirm": "yes"})
    assert refused.status_code == 400 and "type the word erase to confirm" in refused.content.decode()
    assert R1_TEXT in MemoryUnit.objects.get(uid="r1").text
    response = client.post(reverse("unit-erase", args=["tlab", "r1"]), {"reason": REASON, "confirm": "erase"})
    assert response.status_code == 302
    # no persisted engine index keeps a copy of the erased text on disk
    assert not [
        path for path in index_cache.cache_dir().glob(f"corpus-{lab.corpus.pk}-*.index/*")
        if R1_TEXT.encode() in path.read_bytes()
    ]

    unit = MemoryUnit.objects.get(uid="r1", corpus=lab.corpus)
    assert unit.text.startswith("[erased by lead at ") and unit.text.endswith(f": {REASON}]") and unit.title == ""
    mark = unit.text
    stones = TraceTombstone.objects.filter(unit_uid="r1").order_by("trace_id")
    assert [s.trace_id for s in stones] == sorted([roomy.pk, tight.pk]) and {s.kind for s in stones} == {"erased"}
    assert AuditEntry.objects.get(action="unit.erased").payload["traces"] == sorted([roomy.pk, tight.pk])

    after = _surfaces(client, (roomy, tight), lab)
    for surface, body in after.items():
        assert R1_TEXT not in body, surface
        assert "superseded by R1" not in body and ": R1\n" not in body, surface
    assert mark in after[f"trace page #{roomy.pk}"] and mark in after["unit page"]
    assert "R0, superseded by r1" in after[f"trace export json #{roomy.pk}"]
    exported = corpus_export("tlab", tmp_path / "export", frames="initial")
    assert exported and R1_TEXT not in (tmp_path / "export" / "units.jsonl").read_text("utf-8")
    # the engine index of every process sees the erasure: a new selection carries the mark
    fresh = lab.select(budget=400).trace
    assert R1_TEXT not in json.dumps(fresh.bundle) and mark in json.dumps(fresh.bundle)

    out, error = verify("tlab")
    assert error is None and "tlab: 3 traces, chain intact (2 erased: tombstones verified)" in out, out
    checks = client.get(reverse("trace-verify", args=[roomy.pk])).content.decode()
    assert "Text in this trace was erased after it was written (r1 erased by lead" in checks
    again = client.post(reverse("unit-erase", args=["tlab", "r1"]), {"reason": REASON, "confirm": "erase"})
    assert again.status_code == 400 and "r1 was erased already" in again.content.decode()
    assert 'id="erase-form"' not in again.content.decode() and TraceTombstone.objects.count() == 2


def test_tampering_after_an_erasure_is_still_named(lab, people):
    from selection.memory.erasure import unit_erase

    first, second, third = (lab.select(budget=b).trace for b in (400, 130, 160))
    unit_erase(unit=MemoryUnit.objects.get(uid="r1"), lead=people["lead"], reason=REASON)
    assert verify("tlab")[1] is None
    tamper("UPDATE selection_trace SET admitted = %s WHERE id = %s", [["n8"], second.pk])
    tamper(
        "UPDATE selection_tracetombstone SET content_after = repeat('a', 64) WHERE trace_id = %s",
        [third.pk],
        table="selection_tracetombstone",
    )
    out, error = verify("tlab")
    assert error is not None
    assert f"trace #{second.pk} (position 2): its content changed after its last tombstone (r1 erased by lead" in out
    assert f"trace #{third.pk} (position 3): its content changed after its last tombstone" in out
    assert f"trace #{first.pk}" not in out


def test_only_a_lead_of_the_units_project_may_erase(lab, people, client):
    from selection.memory.erasure import ErasureRefused, unit_erase

    unit = MemoryUnit.objects.get(uid="r1")
    trace = lab.select(budget=400).trace
    client.force_login(people["reviewer"])
    assert 'id="erase-form"' not in client.get(reverse("unit-detail", args=["tlab", "r1"])).content.decode()
    response = client.post(reverse("unit-erase", args=["tlab", "r1"]), {"reason": REASON, "confirm": "erase"})
    assert response.status_code == 403
    with pytest.raises(CommandError, match="may not erase unit text in tlab"):
        _command("erase_unit", "tlab", "r1", "--as", "auditor", "--reason", REASON)
    with pytest.raises(CommandError, match="an erasure needs a reason"):
        _command("erase_unit", "tlab", "r1", "--as", "lead", "--reason", "  ")
    other = MemoryUnit.objects.get(uid="o1")  # project tother: the tlab lead holds no role there
    with pytest.raises(AccessDenied):
        unit_erase(unit=other, lead=people["lead"], reason=REASON)
    with pytest.raises(ErasureRefused):
        unit_erase(unit=unit, lead=people["lead"], reason="")
    assert MemoryUnit.objects.get(uid="r1").text.startswith("Ranking budget rule")
    assert not TraceTombstone.objects.exists() and Trace.objects.get(pk=trace.pk).bundle == trace.bundle
    assert not AuditEntry.objects.filter(action="unit.erased").exists()
    out = _command("erase_unit", "tlab", "r1", "--as", "lead", "--reason", REASON)
    assert "r1 erased from the unit and 1 trace(s): [erased by lead at" in out
