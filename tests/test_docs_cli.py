"""docs/cli-reference.md is generated from the commands' own --help and must be current; every
command has help with an example; the shared options are one declaration; the docs the help and
the README name exist."""

from __future__ import annotations

import re

import typer
from conftest import REPO

from analyzer import cli, cli_doc
from analyzer.choices import FAIL_ON, REPORT_FORMATS, SALVAGE_FORMATS, SQL_FORMATS


def _commands() -> dict:
    return typer.main.get_command(cli.app).commands


def test_cli_reference_is_current():
    assert cli_doc.main(["--check"]) == 0, "run: python -m analyzer.cli_doc"


def test_every_command_is_documented_with_help_and_an_example():
    text = cli_doc.DOC.read_text(encoding="utf-8")
    for name, cmd in _commands().items():
        assert f"## `kafka-forensics {name}`" in text
        assert cmd.help and f"Example: kafka-forensics {name}" in cmd.help, name
        for param in cmd.params:
            assert param.name == "help" or getattr(param, "help", None), f"{name}: {param.name} has no help"


def _option(cmd, flag: str):
    return next((p for p in cmd.params if flag in getattr(p, "opts", ())), None)


def test_shared_options_are_one_declaration():
    """--master reads the same everywhere; --out is a DIR (collect's: the script FILE); --format and --fail-on show the choices the command accepts."""
    cmds = _commands()
    masters = {name: _option(c, "--master") for name, c in cmds.items() if _option(c, "--master")}
    assert set(masters) >= {"ingest", "sql", "analyze"}
    assert len({(p.help, p.metavar, p.default) for p in masters.values()}) == 1
    outs = {name: _option(c, "--out") for name, c in cmds.items() if _option(c, "--out")}
    assert outs.pop("collect").metavar == "FILE"  # the script it writes
    assert outs.pop("salvage").metavar == "FILE"  # the contract: salvage DIR --out FILE
    assert len(outs) >= 3 and {p.metavar for p in outs.values()} == {"DIR"}
    accepted = {"analyze": REPORT_FORMATS, "report": REPORT_FORMATS, "sql": SQL_FORMATS, "salvage": SALVAGE_FORMATS}
    shown = {name: _option(c, "--format").metavar for name, c in cmds.items() if _option(c, "--format")}
    assert shown == {name: "|".join(formats) for name, formats in accepted.items()}
    fail_on = {name: _option(c, "--fail-on").metavar for name, c in cmds.items() if _option(c, "--fail-on")}
    assert fail_on == {"analyze": "|".join(FAIL_ON), "report": "|".join(FAIL_ON)}


def test_docs_named_by_the_help_and_the_readme_exist():
    for source in (cli_doc.render(), (REPO / "README.md").read_text(encoding="utf-8")):
        named = set(re.findall(r"(?<![\w/])docs/[\w.-]+", source))  # this repository's docs/, not ../shared/docs
        assert named, "the CLI help and the README point at docs/"
        missing = {d for d in named if not (REPO / d.rstrip(".")).is_file()}
        assert not missing, missing
    assert "docs/cli-reference.md" in (REPO / "README.md").read_text(encoding="utf-8")
