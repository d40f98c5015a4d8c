"""proposals.yaml, governance's part of a corpus: checked, imported and exported with the rest.

Registered with selection's importer at start-up (GovernanceConfig.ready); the importer calls it
inside its one transaction, so a corpus and its proposals land together or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from selection.corpus import CorpusData, CorpusIssue, ProposalSpec
from selection.memory.corpus_parts import ImportedCorpus

from .models import Proposal
from .proposals.services import proposal_import

_LIMITS = {"id": Proposal._meta.get_field("uid").max_length, "title": Proposal._meta.get_field("title").max_length}


class ProposalsPart:
    def too_long(self, data: CorpusData) -> list[CorpusIssue]:
        issues = []
        for index, spec in enumerate(data.proposals):
            where = f"proposals[{index}] (line {spec.line})"
            for field, value in (("id", spec.id), ("title", spec.title)):
                if len(value) > _LIMITS[field]:
                    issues.append(
                        CorpusIssue(
                            "proposals.yaml", where, field,
                            f"{len(value)} characters; at most {_LIMITS[field]} can be stored",
                        )
                    )
        return issues

    def write(self, imported: ImportedCorpus, advanced) -> None:
        for spec in imported.data.proposals:
            proposal_import(
                project=imported.projects[spec.project],
                base=imported.first_versions[spec.project],
                spec=spec,
                carried=imported.carried,
                actor=imported.actor,
            )
            advanced(1)

    def export(self, projects: Sequence[Any], extras: dict[str, Any]) -> list[ProposalSpec]:
        specs = []
        rows = Proposal.objects.filter(project__in=projects).select_related("project").order_by("id")
        for row in rows:
            # a proposal written in the dashboard has no file id: it gets one from its row
            uid = row.uid or f"proposal-{row.pk}"
            specs.append(
                ProposalSpec(
                    id=uid,
                    project=row.project.slug,
                    patch=row.patch,
                    title=row.title,
                    rationale=row.rationale,
                    extras=extras.get(uid, {}) if row.uid else {},
                )
            )
        return specs


PROPOSALS = ProposalsPart()
