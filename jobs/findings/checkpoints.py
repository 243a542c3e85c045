"""Checkpointed offsets beyond what the replica's log holds (a HW checkpoint below the LEO is benign)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Row

from .model import Evidence, Finding

if TYPE_CHECKING:
    from .case import Case

FINDING_KINDS = {"checkpoint_inconsistent": "warning"}


def checkpoint_findings(replicas: list[Row]) -> list[Finding]:
    """Checkpointed offsets beyond what the replica's log holds.

    A HW checkpoint *below* the LEO is normal (it lags by design). Above it, the replica lacks
    offsets it once knew were committed: that is ``truncation_below_hw`` (``truncation.py``).
    """
    out = []
    for r in replicas:
        if r["dir_state"] != "live" or r["segments"] == 0:
            continue
        for col, name in (("recovery_point", "recovery point"), ("log_start_checkpoint", "log start offset"),
                          ("cleaner_offset", "cleaner offset")):
            v = r[col]
            if v is not None and v > r["leo"]:
                out.append(Finding(
                    kind="checkpoint_inconsistent", severity=FINDING_KINDS["checkpoint_inconsistent"], topic=r["topic"], partition=r["partition"], brokers=[r["broker"]],
                    first_offset=r["leo"], last_offset=v - 1,
                    evidence=[Evidence(r["broker"], r["log_dir"], None, f"{name} checkpoint {v} > LEO {r['leo']}")],
                    explanation=f"The {name} checkpointed for {r['topic']}-{r['partition']} on broker {r['broker']} is "
                                f"beyond the log end ({v} > {r['leo']}): the log lost data after the checkpoint was written.",
                ))
    return out


def find(case: Case) -> list[Finding]:
    return checkpoint_findings(case.replicas)
