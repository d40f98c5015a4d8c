"""Traces form a per-project hash chain; an altered, removed or unchained trace is named."""

from __future__ import annotations

import io
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction
from django.urls import reverse

from selection.models import Trace
from selection.traces.chain import CHAIN_GENESIS, verify_chain
from tests.selection.test_traces import embedding_cache  # noqa: F401 - module-wide vectors


def select(lab, query=None, **kwargs):
    from selection.memory import store
    from selection.serving import selections as services

    return services.run_selection(
        project=lab.project,
        query=query or lab.task.query,
        work_frame=store.work_frame_for_task(lab.task),
        budget_tokens=kwargs.pop("budget", 130),
        condition="C6",
        standpoint=lab.task.standpoint,
        source="select",
        use_dense=False,
    ).trace


@pytest.fixture
def lab(db, tmp_path):
    from tests.selection.test_traces import Lab

    return Lab(tmp_path)


def tamper(sql: str, params, table: str = "selection_trace") -> None:
    """What an intruder with database access does: lift the append-only trigger, write, restore."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # ALTER TABLE waits for no deferred check
        cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER {table}_no_update")
        cursor.execute(sql, params)
        cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER {table}_no_update")
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def verify(project=None):
    out = io.StringIO()
    args = ["verify_traces"] + (["--project", project] if project else [])
    try:
        call_command(*args, stdout=out)
    except CommandError as error:
        return out.getvalue(), str(error)
    return out.getvalue(), None


def test_each_trace_links_to_the_previous_one_in_its_project(lab):
    traces = [select(lab, budget=b) for b in (100, 130, 160)]
    rows = list(Trace.objects.filter(project=lab.project).order_by("chain_position"))
    assert [t.chain_position for t in rows] == [1, 2, 3]
    assert rows[0].previous_digest == CHAIN_GENESIS
    assert [r.previous_digest for r in rows[1:]] == [r.digest for r in rows[:-1]]
    assert len({r.digest for r in rows}) == 3 and all(len(r.digest) == 64 for r in rows)
    assert [t.pk for t in traces] == [r.pk for r in rows]
    out, error = verify("tlab")
    assert error is None and "tlab: 3 traces, chain intact" in out


def test_an_altered_trace_is_named_by_the_command_and_the_page(lab, client, django_user_model):
    from authority.models import RoleGrant

    first, second, third = (select(lab, budget=b) for b in (100, 130, 160))
    tamper("UPDATE selection_trace SET query = %s WHERE id = %s", ["rewritten", second.pk])
    assert Trace.objects.get(pk=second.pk).query == "rewritten"  # the trigger is back on:
    with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
        Trace.objects.filter(pk=third.pk).update(query="again")

    out, error = verify()
    assert error == "1 broken link in the trace chain"
    assert f"trace #{second.pk} (position 2): its content no longer matches its digest" in out
    assert f"#{first.pk}" not in out and f"#{third.pk}" not in out

    auditor = django_user_model.objects.create_user("auditor")
    RoleGrant.objects.create(user=auditor, project=lab.project, role="auditor")
    client.force_login(auditor)
    page = client.get(reverse("trace-chain")).content.decode()
    assert "1 broken link" in page
    assert f"trace #{second.pk}</a> (position 2): its content no longer matches its digest" in page


def test_an_altered_candidate_row_breaks_its_traces_link(lab):
    trace = select(lab)
    select(lab)
    tamper(
        "UPDATE selection_tracecandidate SET reason_code = 'ADMITTED' WHERE trace_id = %s AND position = 0",
        [trace.pk],
        table="selection_tracecandidate",
    )
    report = verify_chain(lab.project)
    assert [link.trace_id for link in report.broken] == [trace.pk]


def test_a_deleted_trace_breaks_the_next_link(lab):
    first, second, third = (select(lab, budget=b) for b in (100, 130, 160))
    # candidates reference the trace (PROTECT): an intruder removes both
    tamper("DELETE FROM selection_tracecandidate WHERE trace_id = %s", [second.pk], "selection_tracecandidate")
    tamper("DELETE FROM selection_trace WHERE id = %s", [second.pk])
    report = verify_chain(lab.project)
    assert {link.trace_id for link in report.broken} == {third.pk}
    assert any("traces 2..2 are missing" in link.problem for link in report.broken)
    assert any("does not link to the previous trace" in link.problem for link in report.broken)


def test_a_forged_digest_does_not_pass(lab):
    trace = select(lab)
    select(lab)
    tamper("UPDATE selection_trace SET digest = %s WHERE id = %s", ["f" * 64, trace.pk])
    broken = verify_chain(lab.project).broken
    # the forged trace fails its own digest, and the next no longer links to it
    assert {link.trace_id for link in broken} == {trace.pk, trace.pk + 1}


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_append_one_after_another(tmp_path):
    from tests.selection.test_traces import Lab

    lab = Lab(tmp_path)
    select(lab)  # warm the index and the model in this process
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def writer(n):
        try:
            barrier.wait(timeout=30)
            for i in range(5):
                select(lab, budget=100 + n * 10 + i)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    positions = list(
        Trace.objects.filter(project=lab.project).order_by("chain_position").values_list("chain_position", flat=True)
    )
    assert positions == list(range(1, 22))
    assert verify_chain(lab.project).intact
