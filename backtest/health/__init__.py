"""Frame health over time: each project's promoted frame read on its task set, daily and after
every import, task-set change and promotion, judged against the frame's first reading under the
gates the project declares (services.health_check, the one path; docs/architecture.md)."""
