"""Every write is audited in its own transaction: each service that writes a model runs here for
real, in autocommit (a transactional test, no test-wide transaction to hide in), while every SQL
statement is captured with the PostgreSQL transaction it ran in. A write outside any transaction,
or in a transaction that wrote no audit row, fails the test, naming the service and the statement.

The inventory test finds every public function of the service modules that writes (calls .save,
.create, bulk_create, .update, .delete, COPY, ...) and fails when one is neither run below nor
listed in EXEMPT with the reason (docs/architecture.md, "Writes and their audit rows").
"""

from __future__ import annotations

import ast
import re
import uuid
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from tests.selection.test_traces import embedding_cache  # noqa: F401 - module-wide vectors

ROOT = Path(__file__).resolve().parent.parent
APPS = ("authority", "selection", "governance", "backtest")
WRITE_CALLS = {"save", "create", "bulk_create", "bulk_update", "update", "delete", "get_or_create",
               "update_or_create", "copy", "copy_expert", "audit_record"}  # fmt: skip
NOT_SERVICES = {"views.py", "api.py", "selectors.py", "admin.py", "apps.py", "urls.py", "models.py"}

# (module, function) -> why it writes without an audit row of its own
EXEMPT = {
    ("authority/audit.py", "audit_record"): "it is the audit row",
    ("authority/services.py", "frame_version_create"): "runs in its caller's transaction, which audits",
    ("authority/services.py", "promotion_create"): "runs in its caller's transaction, which audits",
    ("selection/evaluation/task_sets.py", "task_set_version_record"): "runs in its caller's transaction",
    ("selection/memory/changes.py", "memory_changes_append"): "runs in its caller's transaction",
    ("selection/traces/chain.py", "trace_tombstone"): "runs in retention's or erasure's transaction",
    ("selection/evaluation/jobs.py", "job_run"): "job progress: the job's own updates",
    ("selection/evaluation/jobs.py", "evaluation_enqueue"): "a job row; the evaluation it runs is audited",
    ("selection/evaluation/jobs.py", "corpus_import_enqueue"): "a job row; the import it runs is audited",
    ("selection/memory/embeddings.py", "model_fingerprint"): "a cached fingerprint of the model files",
    ("backtest/replay/reuse.py", "selection_code_fingerprint"): "a cached fingerprint of the code",
    ("selection/memory/generated.py", "generated_corpus_write"): "the bench's synthetic corpora",
    ("selection/memory/generated.py", "units_copy"): "the bench's synthetic corpora (COPY)",
    ("selection/memory/generated.py", "links_copy"): "the bench's synthetic corpora (COPY)",
    ("selection/telemetry.py", "configure_from_env"): "creates an OpenTelemetry resource, no row",
    ("selection/traces/recording.py", "traces_write"): "a trace is its own hash-chained, append-only record",
    ("backtest/replay/services.py", "replay_many"): "replays: the backtest's enqueue and finish are audited",
    ("backtest/replay/shadow.py", "shadow_one"): "a shadow replay: the backtest's enqueue and finish are audited",
    ("backtest/judging.py", "backtest_finish"): "judges a backtest's replays; run by its worker test",
    ("governance/proposals/services.py", "proposal_sync_state"): "the proposal's state read-model",
    ("governance/proposals/editor_views.py", "proposal_preview"): "copies a dict; writes nothing",
    ("governance/tokens/services.py", "token_user"): "a token's last use, at most once a minute",
    ("governance/webhooks/services.py", "on_audit"): "runs in the audited write's transaction",
    ("governance/webhooks/services.py", "webhook_attempt"): "a delivery attempt, recorded on the delivery",
    ("backtest/health/services.py", "health_check"): "a reading; audited only when failing gates change",
    ("selection/memory/markdown_reimport.py", "apply_differences"): "runs in the re-import's transaction, which audits",
    ("selection/memory/markdown_reimport.py", "mark_candidates"): "runs in the import's transaction, which audits",
    ("selection/memory/writes/idempotency.py", "write_once"): "the transaction of a memory write, which audits",
    ("selection/memory/writes/records.py", "memory_rewritten"): "runs in the erasure's transaction, which audits",
    ("selection/memory/writes/records.py", "supersession_close"): "runs in a memory write's transaction",
    ("selection/memory/writes/records.py", "unit_record"): "builds a units.jsonl object; writes nothing",
    ("selection/memory/query_encoder.py", "torch_graph_save"): "a file of the model's traced graph, no row",
    ("selection/serving/warm_up.py", "warm_up_start"): "starts the warm-up thread, no row",
}
# tables whose rows are written without an audit row of their own (see EXEMPT)
UNAUDITED_TABLES = {
    "selection_trace", "selection_tracecandidate", "selection_job", "governance_webhookdelivery",
    "backtest_taskreplay", "backtest_ablationreplay", "backtest_shadowreplay",
}  # fmt: skip
WRITE = re.compile(r'^\s*(INSERT\s+INTO|UPDATE|DELETE\s+FROM|COPY)\s+"?(\w+)"?', re.IGNORECASE)
AUDIT_TABLE = "authority_auditentry"


def _writing_functions() -> set[tuple[str, str]]:
    found = set()
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            parts = set(path.relative_to(ROOT).parts)
            if parts & {"migrations", "engine", "management"} or "selection/corpus/" in str(path):
                continue
            if path.name in NOT_SERVICES or path.name.startswith("views"):
                continue
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                    calls = {
                        n.func.attr for n in ast.walk(node)
                        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    }  # fmt: skip
                    if calls & WRITE_CALLS:
                        found.add((str(path.relative_to(ROOT)), node.name))
    return found


class Writes:
    """Each write statement with the transaction id it ran in (None: autocommit, no transaction)."""

    def __init__(self):
        self.rows: list[tuple[str, str, int | None]] = []

    def __call__(self, execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        match = WRITE.match(sql)
        if match:
            with connection.connection.cursor() as raw:  # a second cursor: the first keeps its rows
                raw.execute("SELECT txid_current_if_assigned()")
                txid = raw.fetchone()[0]
            self.rows.append((match.group(2).lower(), sql[:160], txid))
        return result


@contextmanager
def captured():
    writes = Writes()
    with connection.execute_wrapper(writes):
        yield writes


def check(name: str, writes: Writes, action: str) -> list[str]:
    """What is wrong with the writes of one service call: unprotected, or unaudited."""
    problems = []
    audited = {txid for table, _, txid in writes.rows if table == AUDIT_TABLE}
    if not writes.rows:
        problems.append(f"{name}: wrote nothing (the test's call is wrong)")
    for table, sql, txid in writes.rows:
        if table in UNAUDITED_TABLES or table == AUDIT_TABLE:
            continue
        if txid is None:
            problems.append(f"{name}: {sql} ran outside any transaction")
        elif txid not in audited:
            problems.append(f"{name}: {sql} ran in a transaction that wrote no audit row")
    from authority.models import AuditEntry

    if not AuditEntry.objects.filter(action=action).exists():
        problems.append(f"{name}: no {action} audit row")
    return problems


def test_every_writing_function_is_run_here_or_exempt_with_its_reason():
    covered = {key for key, *_ in CALLS}
    missing = _writing_functions() - covered - set(EXEMPT)
    assert not missing, f"writing functions neither checked nor exempt: {sorted(missing)}"
    stale = set(EXEMPT) - _writing_functions()
    assert not stale, f"exemptions of functions that no longer write (or moved): {sorted(stale)}"


# (module, function) whose writes the walk checks, the audit action, and the step that runs it;
# steps run in order on one world and may use what an earlier one made
CALLS = [
    (("authority/services.py", "role_grant"), "role.granted"),
    (("authority/services.py", "role_revoke"), "role.revoked"),
    (("governance/tokens/services.py", "token_create"), "token.created"),
    (("governance/tokens/services.py", "token_revoke"), "token.revoked"),
    (("governance/webhooks/services.py", "webhook_create"), "webhook.created"),
    (("governance/webhooks/services.py", "webhook_secret_rotate"), "webhook.secret_rotated"),
    (("selection/traces/outcomes.py", "outcome_report"), "trace.outcome_reported"),
    (("selection/traces/labelling.py", "trace_label"), "task.labelled"),
    (("selection/traces/retention.py", "retention_policy_set"), "retention.set"),
    (("selection/memory/local_overlays.py", "local_unit_put"), "local_unit.put"),
    (("selection/memory/local_overlays.py", "local_unit_remove"), "local_unit.removed"),
    (("backtest/review/services.py", "review_comment"), "proposal.commented"),
    (("selection/traces/retention.py", "retention_apply"), "retention.expired"),
    (("selection/evaluation/ladder.py", "evaluation_run"), "evaluation.run"),
    (("backtest/services.py", "backtest_enqueue"), "backtest.started"),
    (("backtest/judging.py", "backtest_fail"), "backtest.failed"),
    (("backtest/review/services.py", "backtest_review"), "backtest.rejected"),
    (("selection/memory/erasure.py", "unit_erase"), "unit.erased"),
    (("selection/memory/writes/services.py", "unit_create"), "unit.created"),
    (("selection/memory/writes/services.py", "unit_supersede"), "unit.superseded"),
]


@pytest.mark.django_db(transaction=True)
def test_every_service_writes_inside_a_transaction_with_its_audit_row(tmp_path, django_user_model, settings):
    from authority import services as authority_services
    from authority.models import RoleGrant
    from backtest import judging
    from backtest import services as backtests
    from backtest.models import Backtest, BacktestDecision
    from backtest.review import services as reviews
    from backtest.review.selectors import current_engine_version, current_task_set_digest
    from config.celery import app
    from governance.models import Proposal
    from governance.proposals.services import proposal_submit
    from governance.tokens import services as tokens
    from governance.webhooks import services as webhooks
    from selection.evaluation.ladder import evaluation_run
    from selection.memory import erasure, local_overlays
    from selection.memory.writes import services as memory_writes
    from selection.models import MemoryUnit, TraceCandidate
    from selection.traces import labelling, outcomes, retention
    from tests.selection.test_traces import Lab

    lab = Lab(tmp_path)
    project = lab.project
    lead = django_user_model.objects.create_user("w-lead")
    reviewer = django_user_model.objects.create_user("w-reviewer")
    other = django_user_model.objects.create_user("w-other")
    void = f"fg-audit-void-{uuid.uuid4().hex[:8]}"
    RoleGrant.objects.create(user=lead, project=project, role="lead")
    RoleGrant.objects.create(user=reviewer, project=project, role="reviewer")
    trace = lab.select().trace
    proposal = Proposal.objects.filter(project=project).first() or proposal_submit(
        project=project, author=lead, title="t", patch={"class_pull": 4}
    )
    made: dict = {}

    def enqueue_on_a_void_queue():
        # the backtest's replays go to a queue no worker reads, emptied after: its enqueue is
        # what is checked here, not its run
        was = app.conf.task_default_queue
        app.conf.task_default_queue = void
        try:
            return made.setdefault("backtest", backtests.backtest_enqueue(proposal=proposal, requested_by=lead))
        finally:
            app.conf.task_default_queue = was
            with app.connection_for_write() as broker:
                broker.default_channel.queue_purge(void)

    first_unit = TraceCandidate.objects.filter(trace=trace).first().unit_uid
    hook_url = "https://hooks.example.com/"

    def token_create():
        made["token"] = tokens.token_create(user=lead, name="w", project=project, role="lead")

    def webhook_create():
        made["hook"] = webhooks.webhook_create(project=project, lead=lead, url=hook_url, events=["proposal.promoted"])

    def backtest_review():
        # a finished backtest as the worker leaves it (its run is the worker tests')
        backtest = Backtest.objects.create(
            proposal=proposal, baseline_version=proposal.base_version, candidate_version=proposal.frame_version,
            task_ids=[], task_set_digest=current_task_set_digest(project=project) or "digest",
            engine_version=current_engine_version() or "engine", gates={}, status="finished",
        )  # fmt: skip
        BacktestDecision.objects.create(
            backtest=backtest, passed=False, primary_metric="must_include_recall", baseline_means={},
            candidate_means={}, gate_results=[], per_task_deltas=[],
        )  # fmt: skip
        with captured() as writes:
            reviews.backtest_review(backtest=backtest, reviewer=reviewer, verdict="reject", comment="no")
        return writes

    def written_fields(text):
        return {"class": MemoryUnit.objects.filter(project=project).first().evidence_class, "text": text}

    def unit_create():
        made["written"] = memory_writes.unit_create(
            actor=lead, project=project, fields=written_fields("a finding"), via="api"
        ).unit

    def unit_erase():
        unit = MemoryUnit.objects.filter(project=project).first()
        erasure.unit_erase(unit=unit, lead=lead, reason="asked to", now=timezone.now() + timedelta(seconds=1))

    steps = {
        "role_grant": lambda: authority_services.role_grant(user=other, project=project, role="auditor", actor=lead),
        "role_revoke": lambda: authority_services.role_revoke(user=other, project=project, role="auditor", actor=lead),
        "token_create": token_create,
        "token_revoke": lambda: tokens.token_revoke(user=lead, token_id=made["token"].token.pk),
        "webhook_create": webhook_create,
        "webhook_secret_rotate": lambda: webhooks.webhook_secret_rotate(
            project=project, lead=lead, endpoint_id=made["hook"].endpoint.pk
        ),
        "outcome_report": lambda: outcomes.outcome_report(user=lead, trace_id=trace.pk, verdict="helped"),
        "trace_label": lambda: labelling.trace_label(trace=trace, user=lead, labels={first_unit: "MUST"}),
        "retention_policy_set": lambda: retention.retention_policy_set(project=project, lead=lead, live_days=30),
        "local_unit_put": lambda: local_overlays.local_unit_put(user=lead, project=project, uid="me-x", text="mine"),
        "local_unit_remove": lambda: local_overlays.local_unit_remove(user=lead, project=project, uid="me-x"),
        "review_comment": lambda: reviews.review_comment(proposal=proposal, author=lead, body="looks right"),
        "retention_apply": lambda: retention.retention_apply(project=project, now=timezone.now() + timedelta(days=60)),
        "evaluation_run": lambda: evaluation_run(corpus=lab.corpus, conditions=["C6"], actor=lead),
        "backtest_enqueue": enqueue_on_a_void_queue,
        "backtest_fail": lambda: judging.backtest_fail(backtest_id=made["backtest"].pk, error="the test stops it"),
        "backtest_review": backtest_review,
        "unit_erase": unit_erase,
        "unit_create": unit_create,
        "unit_supersede": lambda: memory_writes.unit_supersede(
            actor=lead, project=project, targets=[made["written"]], fields=written_fields("a later finding"), via="api"
        ),
    }
    problems = []
    for (module, name), action in CALLS:
        with captured() as writes:
            inner = steps[name]()
        if isinstance(inner, Writes):  # a step that set up rows first: only the service's writes
            writes = inner
        problems += check(f"{module}::{name}", writes, action)
    assert not problems, "\n".join(problems)
