"""The governance pages' forms: the structured frame editor (editor.py, its stop-rule fields in
admission.py, its text forms in editor_text.py) and the audit log's filter (audit.py)."""

from .audit import AuditFilterForm
from .editor import ProposeForm
from .editor_text import parse_patch

__all__ = ["AuditFilterForm", "ProposeForm", "parse_patch"]
