"""The values an option of the CLI takes, each list written once: ``--help`` shows it, the command
checks the option against it before any work (exit 2 with one line: ``cli.one_of``), and the code
that prints a format reads the same list. No pandas or Spark here: the CLI imports it at start-up.
"""

from __future__ import annotations

from jobs.findings.severity import SEVERITIES

REPORT_FORMATS = ("text", "json", "html")  # analyze and report: what they print (analyzer.report.render)
SQL_FORMATS = ("table", "json", "csv")  # analyzer.sql.emit
SALVAGE_FORMATS = ("text", "json")
FAIL_ON = SEVERITIES  # exit 1 when a finding is at or above this severity (analyzer.report.exit_code)
