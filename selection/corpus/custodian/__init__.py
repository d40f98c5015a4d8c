"""The MemoryCustodian layout, read as its own protocol defines it (pure Python, no Django).

markdown: which lines are structure; protocol: the Protocol section; manifest_parts: budgets and
prose sections; entries: the entry grammar; subjects: the Subject registry; conflicts: the
peer's structural conflict findings; layout: the tree kept for a byte-faithful export.
"""
