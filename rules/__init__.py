"""Pure rules outside the engine: frame patches and diffs, gate verdicts, ablation, health judgement.

No Django, no Celery, no app: import-linter holds it (pyproject.toml).
"""
