"""Serving a selection: the API, MCP and the select command ask through serve.py.

The package's face names what those interfaces call: the selection (serve.py) and the outcome
report an agent sends back about it (traces/outcomes.py).
"""

from selection.serving.serve import StrictRoutingRefused, select_for_user, select_in_project
from selection.traces.outcomes import outcome_report

__all__ = ["StrictRoutingRefused", "outcome_report", "select_for_user", "select_in_project"]
