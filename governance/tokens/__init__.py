"""API tokens: personal bearer tokens for the API and MCP, scoped to projects, shown once."""
