"""Serving a selection: every interface (API, MCP, the select command) asks through serve.py."""

from selection.serving.serve import StrictRoutingRefused, select_for_user

__all__ = ["StrictRoutingRefused", "select_for_user"]
