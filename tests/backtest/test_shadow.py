"""Shadow replay: a backtest replays the project's last recorded live selections, made here by
the test through the API and the `select` command, under the baseline and the candidate."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse

from backtest import judging, services
from backtest.models import Backtest, ShadowReplay
from backtest.replay import dispatch
from backtest.replay import services as replays
from backtest.replay import shadow as shadows
from governance.management.commands.backtest import backtest_document
from governance.tokens import services as tokens
from selection.models import Trace

from .conftest import proposal

pytestmark = pytest.mark.django_db

DESIGN_QUERY = "Does the proposed hybrid ranking design hold up against our design principles and the baseline?"
SELECTIONS = [
    {"project": "sift", "query": DESIGN_QUERY, "work_frame": {"work_type": "design-review"}, "budget_tokens": 700},
    {"project": "sift", "query": "What is still open before release 4.2 can ship?", "budget_tokens": 700,
     "work_frame": {"work_type": "release-readiness"}},
]  # fmt: skip


def run_inline(backtest: Backtest):
    for task_id in backtest.task_ids:
        for side in dispatch.replay_sides(backtest):
            replays.replay_one(backtest_id=backtest.pk, task_id=task_id, side=side)
    for trace_id in backtest.shadow["traces"]:
        shadows.shadow_one(backtest_id=backtest.pk, trace_id=trace_id)
    return judging.backtest_finish(backtest_id=backtest.pk)


def test_a_backtest_replays_recent_selections_and_says_which_bundles_change(client, sift, sift_users, capsys):
    lead = sift_users["lead"]
    secret = tokens.token_create(user=lead, name="agent", project=sift, role="lead", days=7).secret
    made = []
    for body in SELECTIONS:
        response = client.post(
            "/api/v1/select", body, content_type="application/json", headers={"Authorization": f"Bearer {secret}"}
        )
        assert response.status_code == 200, response.content
        made.append(response.json()["trace_id"])
    call_command("select", project="sift", query=DESIGN_QUERY + " Which notes matter?", work_type="design-review")
    made.append(Trace.objects.filter(source="select").latest("created_at", "id").pk)
    made.reverse()  # newest first

    target = proposal("looser-stop-rule")  # design review drops design notes, the stop rule loosens
    backtest = services.backtest_enqueue(proposal=target, requested_by=None, shadow=10)
    assert backtest.shadow == {"requested": 10, "traces": made}  # backtest and evaluation traces are not selections
    decision = run_inline(backtest)
    assert decision is not None
    rows = {r.selection_id: r for r in ShadowReplay.objects.filter(backtest=backtest)}
    assert set(rows) == set(made) and not any(r.error for r in rows.values())
    print("\nshadow replay of looser-stop-rule over the test's 3 selections:")
    for trace_id in made:
        r = rows[trace_id]
        print(
            f"  trace {trace_id} ({Trace.objects.get(pk=trace_id).source}): changed={r.changed} "
            f"entered={r.entered} left={r.left} tokens {r.baseline_tokens}->{r.candidate_tokens} "
            f"leakage {r.baseline_leakage:.3f}->{r.candidate_leakage:.3f} reproduced={r.reproduced}"
        )
    # every selection was made under v1, the baseline: its baseline replay gives the recorded bundle
    assert all(r.reproduced for r in rows.values())
    work_types = {t: Trace.objects.get(pk=t).header["work_frame"]["work_type"] for t in made}
    assert sorted(work_types.values()) == ["design-review", "design-review", "release-readiness"]
    # design review drops its design notes and the pull widens: a design-review selection changes
    # (which of the two does depends on the frame's stop rule)
    design = [rows[t] for t in made if work_types[t] == "design-review"]
    assert any(r.changed and r.left for r in design)
    for r in rows.values():
        assert r.changed == bool(r.entered or r.left) or r.baseline_tokens != r.candidate_tokens
        assert r.baseline_trace.source == r.candidate_trace.source == "shadow"
        assert r.candidate_trace.frame_version == target.frame_version.number
    changed = sum(1 for r in rows.values() if r.changed)

    # replaying a selection again writes nothing
    traces = Trace.objects.count()
    assert shadows.shadow_one(backtest_id=backtest.pk, trace_id=made[0]).pk == rows[made[0]].pk
    assert Trace.objects.count() == traces

    # the --json document and the pages
    document = backtest_document(Backtest.objects.get(pk=backtest.pk))
    assert document["shadow"]["changed"] == changed and document["shadow"]["replayed"] == 3
    first = document["shadow"]["selections"][0]
    assert first["trace"] == made[0] and set(first) >= {"changed", "entered", "left", "tokens", "leakage", "diff"}
    client.force_login(sift_users["reviewer"])
    page = client.get(reverse("proposal-detail", args=[target.pk])).content.decode()
    assert f"would change {changed} of 3 recent bundles" in page
    detail = client.get(reverse("backtest-detail", args=[backtest.pk])).content.decode()
    row = rows[made[0]]
    assert f"{reverse('trace-diff')}?a={row.baseline_trace_id}&amp;b={row.candidate_trace_id}" in detail
