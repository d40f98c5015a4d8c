"""backtest NAME --proposal ID: run a proposal's backtest through the Celery workers, print the gates.

With --shadow N it also replays the project's last N live selections (traces of the `select`
command, the API, the MCP server) under both versions and says which bundles would change.

With --latest it starts nothing: it waits for the proposal's latest backtest (the one its
submission started, as `propose --from-file` does in CI). --format markdown prints the
pull-request comment (backtest.review.markdown; --site makes its links absolute) and --format
json the decision document; --exit-code exits 1 when a gate failed (docs/ci.md).

NAME is a corpus, ID a proposal's uid from proposals.yaml or its number. The backtest is started
by the system (as an imported proposal has no author to act for) through backtest_enqueue, the
same service a proposal submitted in the dashboard calls; a worker must be consuming the queue.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from celery import current_app
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from authority.errors import GovernanceError
from backtest import selectors, services
from backtest.models import Backtest, BacktestStatus
from backtest.review import markdown
from backtest.review import selectors as review_selectors
from governance.models import Proposal
from rules import gate_verdict as gates
from selection.models import Corpus


def worker_queues(timeout: float = 2.0) -> dict[str, list[str]]:
    """Worker name -> queues it consumes, for every worker that answers within `timeout`."""
    replies = current_app.control.inspect(timeout=timeout).active_queues() or {}
    return {name: [q["name"] for q in queues] for name, queues in replies.items()}


def find_proposal(corpus: Corpus, ident: str) -> Proposal:
    proposals = Proposal.objects.select_related("project", "frame_version", "base_version").filter(
        project__corpus=corpus
    )
    found = proposals.filter(uid=ident).first()
    if found is None and ident.isdigit():
        found = proposals.filter(pk=int(ident)).first()
    if found is None:
        known = ", ".join(proposals.order_by("pk").values_list("uid", flat=True)) or "none"
        raise CommandError(f'no proposal "{ident}" in corpus {corpus.name} (its proposals: {known})')
    return found


def backtest_document(backtest: Backtest) -> dict:
    """The --json document: the decision, the primary metric, every gate and every task."""
    decision = backtest.decision
    primary = decision.gate_results[0]
    proposal = backtest.proposal
    return {
        "backtest": backtest.pk,
        "proposal": {"id": proposal.pk, "uid": proposal.uid, "title": proposal.title, "project": proposal.project.slug},
        "baseline_version": backtest.baseline_version.number,
        "candidate_version": backtest.candidate_version.number,
        "condition": backtest.condition,
        "engine_version": backtest.engine_version,
        "task_set_digest": backtest.task_set_digest,
        "decision": "passed" if decision.passed else "failed",
        "primary": {
            "metric": decision.primary_metric,
            "baseline": primary["baseline"],
            "candidate": primary["candidate"],
            "delta": primary["delta"],
        },
        "gates": decision.gate_results,
        "means": {"baseline": decision.baseline_means, "candidate": decision.candidate_means},
        "tasks": {
            row["task"]: {"baseline": row["baseline"], "candidate": row["candidate"], "delta": row["delta"]}
            for row in decision.per_task_deltas
        },
        # one row per part of the patch (2 to MAX_ABLATION_PARTS parts), else empty
        "ablation": [
            {
                "part": effect["part"],
                "alone": effect["alone"],
                "marginal": effect["marginal"],
                "flagged": effect["flagged"],
                "hurt_tasks": effect["hurt_tasks"],
                "alone_passed": effect["alone_passed"],
                "why": effect["why"],
            }
            for effect in decision.ablation
        ],
        "ablation_note": (backtest.ablation or {}).get("note", ""),
        "shadow": selectors.shadow_document(backtest),
    }


class Command(BaseCommand):
    help = "Backtest a proposal of a corpus through the Celery workers and print the decision per gate."

    def add_arguments(self, parser):
        parser.add_argument("name", help="corpus name")
        parser.add_argument("--proposal", required=True, help="proposal id from proposals.yaml, or its number")
        parser.add_argument("--json", dest="json_path", help="write the decision document to this file")
        parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the backtest")
        parser.add_argument(
            "--latest",
            action="store_true",
            help="start nothing: wait for the proposal's latest backtest (the one its submission started)",
        )
        parser.add_argument(
            "--format",
            dest="output",
            choices=("text", "markdown", "json"),
            default="text",
            help="text (the table), markdown (a pull-request comment) or json (the decision document)",
        )
        parser.add_argument("--site", default="", help="the site's address, for absolute links in the markdown")
        parser.add_argument("--exit-code", action="store_true", help="exit with status 1 when a gate failed")
        parser.add_argument(
            "--shadow",
            type=int,
            default=None,
            metavar="N",
            help="also replay the project's last N live selections under both versions "
            "(default FG_BACKTEST_SHADOW; 0: none)",
        )
        parser.add_argument(
            "--memory-now",
            action="store_true",
            help="replay every task against memory as of now (default: as of the sequence each task was made at)",
        )

    def handle(
        self,
        *args,
        name,
        proposal,
        json_path,
        timeout,
        shadow=None,
        latest=False,
        output="text",
        site="",
        exit_code=False,
        memory_now=False,
        **options,
    ):
        try:
            corpus = Corpus.objects.get(name=name)
        except Corpus.DoesNotExist:
            raise CommandError(f'no corpus "{name}": import it with `manage.py import_corpus PATH`') from None
        target = find_proposal(corpus, proposal)
        backtest = review_selectors.latest_backtest(proposal=target) if latest else None
        if latest and backtest is None:
            raise CommandError(f"proposal {target.pk} has no backtest to wait for: run this without --latest")
        consumers = []
        if backtest is None or backtest.status not in (BacktestStatus.FINISHED, BacktestStatus.ERROR):
            queue = settings.CELERY_TASK_DEFAULT_QUEUE  # a backtest that has ended needs no worker
            consumers = [w for w, queues in worker_queues().items() if queue in queues]
            if not consumers:
                raise CommandError(
                    f'no Celery worker consumes the queue "{queue}": start one with `make worker` '
                    "(with the same FG_CELERY_QUEUE) and run this again"
                )
        if backtest is None:
            try:
                backtest = services.backtest_enqueue(
                    proposal=target, requested_by=None, shadow=shadow, memory_now=memory_now
                )
            except GovernanceError as error:
                raise CommandError(str(error)) from error
        self.stderr.write(
            f"backtest #{backtest.pk}: {target.project.slug} v{backtest.candidate_version.number} "
            f"({target.uid or target.title}) against v{backtest.baseline_version.number}, "
            f"{len(backtest.task_ids)} tasks, on {', '.join(consumers) or 'no worker (it has ended)'}"
        )
        backtest = self._wait(backtest, timeout)
        if backtest.status == BacktestStatus.ERROR:
            raise CommandError(f"backtest #{backtest.pk} failed: {backtest.error}")
        document = backtest_document(backtest)
        if output == "markdown":
            self.stdout.write(markdown.backtest_markdown(backtest, site=site.rstrip("/")), ending="")
        elif output == "json":
            self.stdout.write(json.dumps(document, indent=2, ensure_ascii=False))
        else:
            self._print(document)
        if json_path:
            Path(json_path).write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            self.stderr.write(f"wrote {json_path}")
        if exit_code and document["decision"] != "passed":
            failed = [g["gate"] + " " + g["metric"] for g in document["gates"] if not g["passed"]]
            self.stderr.write(f"backtest #{backtest.pk} failed its gates: {', '.join(failed)}")
            raise SystemExit(1)

    def _wait(self, backtest: Backtest, timeout: float) -> Backtest:
        deadline = time.monotonic() + timeout
        total = selectors.backtest_progress(backtest=backtest).total
        with tqdm(total=total, unit="replay", desc="replays", file=self.stderr._out, leave=True) as bar:
            while True:
                backtest = selectors.backtest_by_id(backtest_id=backtest.pk)
                backtest = services.backtest_fail_if_stale(backtest=backtest)
                progress = selectors.backtest_progress(backtest=backtest)
                bar.update(progress.done - bar.n)
                if progress.finished:
                    return backtest
                if time.monotonic() > deadline:
                    raise CommandError(
                        f"backtest #{backtest.pk} is still {backtest.status} after {timeout:g} s "
                        f"({progress.done} of {total} replays); it goes on in the workers"
                    )
                time.sleep(0.25)

    def _print(self, doc: dict) -> None:
        out = self.stdout
        verdict = doc["decision"].upper()
        style = self.style.SUCCESS if doc["decision"] == "passed" else self.style.ERROR
        proposal = doc["proposal"]
        out.write(
            f"\n{proposal['project']} proposal {proposal['uid'] or proposal['id']}: {proposal['title']}\n"
            f"v{doc['candidate_version']} against v{doc['baseline_version']}, condition {doc['condition']}, "
            f"{len(doc['tasks'])} tasks: " + style(verdict)
        )
        out.write("")
        header = f"  {'gate':9} {'metric':20} {'baseline':>9} {'candidate':>9} {'delta':>8}  result  reason"
        out.write(header)
        for g in doc["gates"]:
            mark = self.style.SUCCESS("passed") if g["passed"] else self.style.ERROR("FAILED")
            out.write(
                f"  {g['gate']:9} {g['metric']:20} {gates.fmt(g['baseline']):>9} {gates.fmt(g['candidate']):>9} "
                f"{gates.signed(g['delta']):>8}  {mark}  {g['reason']}"
            )
            if g.get("evidence"):
                out.write(f"  {'':9} {'':20} {'':>9} {'':>9} {'':>8}          {g['evidence']}")
        metrics = [g["metric"] for g in doc["gates"]]
        metrics = list(dict.fromkeys(metrics))
        out.write("")
        width = max([len(t) for t in doc["tasks"]] + [4])
        out.write(f"  {'task':{width}} " + " ".join(f"{m[:22]:>24}" for m in metrics))
        for task, row in doc["tasks"].items():
            cells = [
                f"{gates.fmt(row['baseline'][m])}→{gates.fmt(row['candidate'][m])} {gates.signed(row['delta'][m]):>7}"
                for m in metrics
            ]
            out.write(f"  {task:{width}} " + " ".join(f"{c:>24}" for c in cells))
        self._print_ablation(doc, metrics)
        self._print_shadow(doc)

    def _print_shadow(self, doc: dict) -> None:
        shadow = doc["shadow"]
        if shadow is None:
            return
        out = self.stdout
        out.write(f"\n  shadow replay: v{doc['candidate_version']} {shadow['summary']}")
        for row in shadow["selections"]:
            if row["error"]:
                out.write(f"    trace {row['trace']:>6} ({row['source']}): {row['error']}")
                continue
            change = "CHANGED" if row["changed"] else "same   "
            moved = f"+{len(row['entered'])} −{len(row['left'])} units"
            tokens, leak = row["tokens"], row["leakage"]
            out.write(
                f"    trace {row['trace']:>6} ({row['source']:6}) {change} {moved:>16}  tokens "
                f"{tokens['baseline']}→{tokens['candidate']}  leakage {gates.fmt(leak['baseline'])}→"
                f"{gates.fmt(leak['candidate'])}  {row['query'][:60]}"
            )

    def _print_ablation(self, doc: dict, metrics: list[str]) -> None:
        out = self.stdout
        if doc["ablation_note"]:
            out.write(f"\n  ablation: {doc['ablation_note']}")
        if not doc["ablation"]:
            return
        out.write("\n  ablation: each part alone (against the baseline) / within the whole (whole − whole without it)")
        width = max(len(row["part"]) for row in doc["ablation"])
        out.write(f"  {'part':{width}} " + " ".join(f"{m[:22]:>24}" for m in metrics) + "  alone   flag")
        for row in doc["ablation"]:
            cells = [f"{gates.signed(row['alone'][m])} / {gates.signed(row['marginal'][m])}" for m in metrics]
            alone = "passes" if row["alone_passed"] else "fails "
            flag = self.style.ERROR("FLAGGED") if row["flagged"] else "-"
            out.write(f"  {row['part']:{width}} " + " ".join(f"{c:>24}" for c in cells) + f"  {alone}  {flag}")
            for why in row["why"]:
                out.write(f"  {'':{width}}   {why}")
            if row["hurt_tasks"]:
                out.write(f"  {'':{width}}   hurts {', '.join(row['hurt_tasks'])}")
