"""`python manage.py mcp`: the MCP server over stdio, for a local agent; FG_API_TOKEN authenticates.

stdout carries the protocol alone, so nothing else is printed there.
"""

from __future__ import annotations

import os

from django.core.management.base import BaseCommand, CommandError

from governance.mcp_server import TOKEN_ENV, build_server


class Command(BaseCommand):
    help = f"Serve the MCP tools (select, get_trace, explain_unit, report_outcome) over stdio; set {TOKEN_ENV}."

    def handle(self, *args, **options):
        if not os.environ.get(TOKEN_ENV):
            raise CommandError(f"set {TOKEN_ENV} to a personal API token (see the API tokens page)")
        build_server().run("stdio")
