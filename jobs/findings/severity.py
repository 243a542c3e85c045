"""The severity order, defined once: findings, the report and ``--fail-on`` read it from here
(no Spark import, so the report and the CLI load it cheaply)."""

SEVERITIES = ("error", "warning", "info")  # worst first
SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}  # lower is worse
