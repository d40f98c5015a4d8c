"""Memory units, tasks, ledgers, traces and evaluations; the engine lives in selection.engine."""
