"""The finding's fields are written once, in ``jobs.findings.model.Finding``: findings.json's keys
and the ``findings`` table's rows follow them, and the table's declared Arrow schema
(``jobs.store.tables.FINDINGS_SCHEMA``, in the storage room, below the findings) is the one the
dataclass's annotations map to."""

import json
from dataclasses import fields

import pyarrow as pa

from jobs.findings.model import PRODUCER_KEYS, Evidence, Finding, document, to_rows
from jobs.store.tables import FINDINGS_SCHEMA

# a Python annotation -> its Arrow type (``X | None`` is the same column, nullable)
SCALARS = {"str": pa.string(), "int": pa.int64(), "Int32": pa.int32()}


def arrow_type(annotation: str) -> pa.DataType:
    annotation = annotation.removesuffix(" | None")
    if annotation == "list[Evidence]":
        return pa.list_(pa.struct([pa.field(f.name, arrow_type(f.type)) for f in fields(Evidence)]))
    if annotation == "list[dict[str, int]]":  # the producers entries: Kafka's producer id int64, epoch and sequences int32
        return pa.list_(pa.struct([pa.field(k, pa.int64() if k == "producer_id" else pa.int32()) for k in PRODUCER_KEYS]))
    if annotation.startswith("list["):
        return pa.list_(arrow_type(annotation[5:-1]))
    return SCALARS[annotation]


def test_table_schema_is_the_dataclass():
    derived = pa.schema([pa.field(f.name, arrow_type(f.type)) for f in fields(Finding)])
    assert derived.equals(FINDINGS_SCHEMA), (derived, FINDINGS_SCHEMA)


def test_json_and_rows_follow_the_fields():
    f = Finding(kind="acked_data_loss", severity="error", topic="t", partition=0, brokers=[2, 1], first_offset=5,
                producers=[{"producer_epoch": 1, "producer_id": 7}], evidence=[Evidence(1, "p", 3, "d")], id="x")
    doc = document([f], {})["findings"][0]
    assert list(doc) == FINDINGS_SCHEMA.names
    assert list(doc["producers"][0]) == list(PRODUCER_KEYS)
    (row,) = to_rows([f])
    table = pa.Table.from_pylist([dict(zip(FINDINGS_SCHEMA.names, row, strict=True))], FINDINGS_SCHEMA)
    assert json.loads(json.dumps(table.to_pylist()[0])) == doc
