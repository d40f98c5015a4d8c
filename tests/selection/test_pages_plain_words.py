"""The pages tell the truth in plain words, on the real PostgreSQL: the counterfactual tries every
lever and names what decided a unit, the unit page shows its lineage, labelling shows each unit's
words, the traces list filters by source, work type, outcome and text (in the URL), every code
links to the glossary with a one-line tooltip, a 403 names the action refused, error messages say
what is accepted, the project page spells out the stop rule, and a trace diff names memory's
change beside the frame's."""

from __future__ import annotations

import re

from django.db import transaction
from django.urls import reverse

from selection.engine.attribution import FailureCode
from selection.engine.conditions import CONDITIONS
from selection.engine.explain.glossary import anchor
from selection.engine.reason_codes import ReasonCode

from . import test_traces as trace_lab

# the trace explorer's tiny corpus, its people and its cached vectors (tests/selection/test_traces.py)
embedding_cache, lab, people, auditor_client = (
    trace_lab.embedding_cache,
    trace_lab.lab,
    trace_lab.people,
    trace_lab.auditor_client,
)
detail = trace_lab.detail
GLOSSARY_LINK = '<a class="gloss" href="{href}#([^"]+)" title="([^"]+)"><code>{code}</code></a>'


def _section(html: str, start: str, end: str = "</section>") -> str:
    part = html[html.index(start) :]
    return part[: part.index(end)]


# --- the counterfactual and the unit page -------------------------------------------------------


def test_the_counterfactual_names_the_successor_of_a_superseded_unit(lab, auditor_client):
    trace = lab.select().trace
    html = auditor_client.get(reverse("trace-counterfactual", args=[trace.pk, "r0"])).content.decode()
    decided = _section(html, 'id="decided"', "</dd>")
    assert 'data-rule="supersession"' in decided and "superseded by r1" in decided
    assert 'data-unit="r1"' in decided and reverse("unit-detail", args=["tlab", "r1"]) in decided
    # every lever of the frame is tried or says why it does not apply
    for kind in ("budget", "class_rank", "class_pull", "stop_rule", "scope"):
        assert f'id="cf-{kind}"' in html, kind


def test_the_counterfactual_tries_the_scope(lab, auditor_client):
    trace = lab.select().trace
    html = auditor_client.get(reverse("trace-counterfactual", args=[trace.pk, "o1"])).content.decode()
    assert re.search(r'id="cf-scope" data-kind="scope" data-found="true" data-value="1"', html)
    assert "scope tlab, tother (adds tother)" in html
    assert 'data-rule="scope"' in html


def test_the_unit_page_shows_lineage_validity_and_evidence(lab, auditor_client):
    old = auditor_client.get(reverse("unit-detail", args=["tlab", "r0"])).content.decode()
    lineage = _section(old, 'id="lineage"')
    superseded_by = _section(lineage, 'id="lineage-supersedes-in"', "</dd>")
    assert 'data-unit="r1"' in superseded_by and "R1" in superseded_by
    assert "to 2026-06-01" in _section(old, 'id="unit-validity"', "</dd>")
    assert "expired" in _section(old, 'id="unit-validity"', "</dd>")
    new = auditor_client.get(reverse("unit-detail", args=["tlab", "r1"])).content.decode()
    assert 'data-unit="r0"' in _section(new, 'id="lineage-supersedes"', "</dd>")
    assert 'data-unit="n1"' in _section(new, 'id="lineage-echo_of-in"', "</dd>")  # n1 restates r1
    assert "with no end" in _section(new, 'id="unit-validity"', "</dd>")
    lonely = auditor_client.get(reverse("unit-detail", args=["tlab", "n3"])).content.decode()
    assert "No unit supersedes, restates, refutes or supports this one" in lonely


# --- labelling and finding ----------------------------------------------------------------------


def test_labelling_shows_each_units_title_and_text_inline(lab, people, client):
    trace = lab.select().trace
    client.force_login(people["reviewer"])
    html = client.get(reverse("trace-label", args=[trace.pk])).content.decode()
    row = _section(html, 'data-unit="r1"', "</tr>")
    assert "R1" in row and "rank candidates by query relevance inside each class bucket" in row
    assert "budget_omitted" in row and "BUDGET_EXHAUSTED" in row  # its disposition and reason beside it
    # a unit of a project the labeller holds no role in is not shown
    other = _section(html, 'data-unit="o1"', "</tr>")
    assert "always spend the whole budget" not in other and "[redacted: you hold no role in project tother]" in other


def test_the_traces_list_filters_by_source_work_type_outcome_and_text(lab, people, client):
    from selection.traces.outcomes import outcome_report

    agent = lab.select().trace
    evaluation = lab.select(source="evaluation").trace
    backtest = lab.select(source="backtest").trace
    outcome_report(user=people["lead"], trace_id=agent.pk, verdict="helped")
    client.force_login(people["auditor"])

    def listed(**params) -> set[int]:
        html = client.get(reverse("trace-list"), params).content.decode()
        return {int(pk) for pk in re.findall(r'<tr data-trace="(\d+)"', html)}

    assert listed(source="agent") == {agent.pk}
    assert listed(source="evaluation") == {evaluation.pk}
    assert listed(source="backtest") == {backtest.pk}
    assert listed(source="shadow") == set()
    assert listed(outcome="helped") == {agent.pk}
    assert listed(outcome="none") == {evaluation.pk, backtest.pk}
    assert listed(work_type="review") == {agent.pk, evaluation.pk, backtest.pk}
    assert listed(work_type="release") == set()
    assert listed(q="ranking budget rule reviewed") == {agent.pk, evaluation.pk, backtest.pk}
    assert listed(q="t-review") == {agent.pk, evaluation.pk, backtest.pk}  # the task id
    assert listed(q="nowhere-to-be-found") == set()
    assert listed(project="tlab", source="agent", outcome="helped", q="budget") == {agent.pk}
    # the filter lives in the URL: the page shows it chosen and links to itself
    html = client.get(reverse("trace-list"), {"source": "agent", "q": "budget"}).content.decode()
    assert '<option value="agent" selected>' in html and 'value="budget"' in html
    assert 'id="filter-link"' in html and "source=agent" in html


# --- the glossary ---------------------------------------------------------------------------------


def test_every_code_links_to_its_glossary_entry_with_a_one_line_tooltip(lab, auditor_client):
    glossary = auditor_client.get(reverse("glossary")).content.decode()
    keys = [*CONDITIONS, *(r.value for r in ReasonCode), *(e.value for e in FailureCode)]
    keys += ["class pull", "stop rule", "establishment", "~query"]
    for key in keys:
        assert f'id="{anchor(key)}"' in glossary, key
    trace = lab.select().trace
    other = lab.select(frame_version=lab.version(2)).trace
    for url in (
        detail(trace.pk),
        reverse("trace-counterfactual", args=[trace.pk, "r0"]),
        reverse("trace-diff") + f"?a={trace.pk}&b={other.pk}",
        reverse("trace-list"),
    ):
        html = auditor_client.get(url).content.decode()
        codes = re.findall(r"<code>([A-Z][A-Z0-9_]{3,}|C[0-6O](?:~[a-z]+)*)</code>", html)
        assert codes, url
        for code in set(codes):
            if code in ("EXPLICIT",):
                continue
            link = re.search(GLOSSARY_LINK.format(href=reverse("glossary"), code=re.escape(code)), html)
            bare = html.count(f"<code>{code}</code>")
            linked = len(re.findall(rf'"><code>{re.escape(code)}</code></a>', html))
            assert link and bare == linked, f"{url}: {code} is shown without its glossary link"
            assert link.group(1) == anchor(code.split("~")[0]) and len(link.group(2)) > 10


def test_a_hedged_condition_is_explained_in_words():
    from selection.engine.explain.glossary import lookup

    entry = lookup("C6~query")
    assert entry.key == "C6" and "query-only" in entry.line and "~" in entry.line


# --- refusals and errors --------------------------------------------------------------------------


def test_every_403_names_the_action_actually_refused(lab, people, client):
    client.force_login(people["auditor"])
    response = client.get(reverse("project-webhooks", args=["tlab"]))
    page = response.content.decode()
    assert response.status_code == 403
    detail_text = _section(page, 'id="error-detail"', "</p>")
    assert "Auditor may not manage webhooks in tlab" in detail_text and "promote" not in detail_text
    client.force_login(people["reviewer"])
    from governance.models import Proposal

    proposal = Proposal.objects.get(uid="notes-first")
    response = client.post(reverse("proposal-backtest-start", args=[proposal.pk]))
    assert response.status_code == 403
    assert "Reviewer may not start a backtest in tlab" in response.content.decode()
    response = client.post(reverse("proposal-split", args=[proposal.pk]))
    assert response.status_code == 403 and "may not split a proposal" in response.content.decode()


def test_error_messages_say_what_is_accepted_in_the_users_words():
    from selection.corpus.limits import value_problems
    from selection.corpus.places import Place, Report

    issues_report = Report()
    place = Place("units.jsonl", path=("id",), line=1)
    issues_report.identifier("B 1", place, "unit id")
    issues_report.number(1e308, place)
    issues_report.number("lots", place)
    text = " | ".join(i.message for i in issues_report.issues)
    assert '"B 1" is not a valid name: use lower-case letters, digits, "-", "_" and "."' in text
    assert "the number 1e+308 is out of range: a number must lie between" in text
    assert 'expected a number such as 0.6, got "lots"' in text
    [(_, big)] = list(value_problems({"x": 2**60}))
    for message in (text, big):
        assert "2^53" not in message and "[a-z0-9]" not in message and "a number (1e+308)" not in message


def test_the_editor_names_the_rule_a_work_type_name_breaks(lab, people, client):
    client.force_login(people["lead"])
    html = client.post(reverse("proposal-create", args=["tlab"]), {"new_wt_name": "Design Review"}).content.decode()
    assert "is not a valid name: use lower-case letters" in html and "[a-z0-9]" not in html


def test_no_page_names_a_command(lab, people, client):
    client.force_login(people["lead"])
    for url in (reverse("project-retention", args=["tlab"]), reverse("trace-chain"), reverse("home")):
        html = client.get(url).content.decode()
        assert "manage.py" not in html, url


# --- the project page and memory's change ------------------------------------------------------------


def test_the_project_page_spells_out_the_stop_rule_and_every_other_setting(lab, people, client):
    client.force_login(people["auditor"])
    html = client.get(reverse("project-detail", args=["tlab"])).content.decode()
    stop = _section(html, 'id="setting-admission"', "</dd>")
    assert 'data-declared="false"' in stop and "default applies (rule unlisted)" in stop
    assert "0.75" in stop
    for key in ("establishment", "bundle_order", "approval"):
        assert f'id="setting-{key}"' in html, key


def test_a_declared_stop_rule_reads_field_by_field():
    from selection.engine.explain.frame_words import frame_settings

    admission = {"rule": "relative", "floor": 0.4, "tier_cap": 7, "unlisted": 2, "unlisted_floor": 0.75}
    [stop, *_] = frame_settings({"admission": admission})
    text = " ".join(stop.lines)
    assert stop.declared and "floor 0.4" in text and "Tier cap 7" in text and "second 4, the third 3" in text
    assert "at most 2 units of classes the work type does not list" in text and "Unlisted floor 0.75" in text
    [off, *_] = frame_settings({"admission": {"rule": "none"}})
    assert off.lines == ("Rule none: only the budget ends a bundle.",)


def _erase_and_add(lab, people):
    """A lead erases n3 and a unit is written: both appended to the corpus's memory sequence."""
    from selection.memory.changes import memory_changes_append
    from selection.memory.erasure import unit_erase
    from selection.models import MemoryUnit

    n3 = MemoryUnit.objects.get(corpus=lab.corpus, uid="n3")
    unit_erase(unit=n3, lead=people["lead"], reason="personal data")
    with transaction.atomic():
        added = MemoryUnit.objects.create(
            corpus=lab.corpus, project=lab.project, uid="n9", evidence_class="note", text="Note: new.", tokens=3
        )
        memory_changes_append(lab.corpus.pk, [(n3.pk, "erased"), (added.pk, "created")], via="command")


def test_the_trace_diff_names_memorys_change_beside_the_frames(transactional_db, lab, people, auditor_client):
    # committed transactions: each change's recorded_at is its own commit's time, after trace a
    a = lab.select().trace
    _erase_and_add(lab, people)
    b = lab.select(frame_version=lab.version(2)).trace
    html = auditor_client.get(reverse("trace-diff"), {"a": a.pk, "b": b.pk}).content.decode()
    memory = _section(html, 'id="diff-memory"')
    cause = _section(memory, 'id="diff-cause"', "</p>")
    assert "frame</strong> changed (v1 → v2)" in cause and "memory</strong> changed too" in cause
    assert "1 unit added, 0 changed, 1 erased" in cause
    assert 'data-unit="n9" data-change="added"' in memory and 'data-unit="n3" data-change="erased"' in memory
    # both traces recorded the memory sequence their selection read
    assert "placed by the memory sequence its selection read" in memory
    # then and now says it before anything is replayed
    now = auditor_client.get(reverse("trace-now", args=[a.pk])).content.decode()
    assert "Memory since then: 1 unit added, 0 changed, 1 erased (<code>n3</code>)" in now
    # the same memory on both sides says so
    c = lab.select().trace
    same = auditor_client.get(reverse("trace-diff"), {"a": b.pk, "b": c.pk}).content.decode()
    assert "memory is the <strong>same</strong>" in _section(same, 'id="diff-memory"')


def test_memory_change_is_placed_by_sequence_when_both_traces_carry_one(lab, people):
    from selection.models import Corpus, Trace
    from selection.traces.memory_diff import memory_diff

    before = Corpus.objects.get(pk=lab.corpus.pk).sequence
    _erase_and_add(lab, people)
    after = Corpus.objects.get(pk=lab.corpus.pk).sequence
    stored = lab.select().trace
    then = Trace(project=lab.project, memory_sequence=before, created_at=stored.created_at, header=stored.header)
    now = Trace(project=lab.project, memory_sequence=after, created_at=stored.created_at, header=stored.header)
    diff = memory_diff(then, now)
    assert diff.placed_by == "sequence" and diff.added == ("n9",) and diff.erased == ("n3",)
    assert memory_diff(then, then).same
    backwards = memory_diff(now, then)
    assert backwards.backwards and backwards.erased == ("n3",)
