"""docs/tables.md is generated from the code and must be current."""

from jobs.store import tables_doc


def test_tables_doc_is_current():
    assert tables_doc.main(["--check"]) == 0, "run: python -m jobs.store.tables_doc"


def test_every_table_documented():
    text = tables_doc.DOC.read_text()
    for name in [*tables_doc.ALL_TABLES, *tables_doc.JOB_SCHEMAS]:
        assert f"## `{name}`" in text
