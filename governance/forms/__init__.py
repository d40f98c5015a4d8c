"""The governance pages' forms: the structured frame editor (editor.py, its stop-rule fields in
admission.py) and the audit log's filter (audit.py)."""

from .audit import AuditFilterForm
from .editor import ProposeForm, parse_patch

__all__ = ["AuditFilterForm", "ProposeForm", "parse_patch"]
