"""Evidence and entries several detectors cite alike: what the surviving log shows, and the
producers of a range."""

from __future__ import annotations

from jobs.replicas.survivors import Survivor, brokers_text

from .model import Evidence


def survivor_evidence(survivor: Survivor, detail: str) -> Evidence:
    """What the surviving log shows, on its broker; undetermined: on none, naming the candidates."""
    if survivor.broker is not None:
        return Evidence(survivor.broker, None, None, f"surviving log ({survivor.why}) {detail}")
    return Evidence(None, None, None, f"surviving log undetermined ({survivor.why}); each of brokers "
                                      f"{brokers_text(c['broker'] for c in survivor.candidates)} {detail}")


def producer_entries(keys: list | None, first_sequence: int | None, last_sequence: int | None) -> list[dict]:
    """A finding's ``producers`` of a range: each (producer_id, producer_epoch) of ``keys`` (at most
    ten: the lowest) with the range's lowest and highest base sequence. In (id, epoch) order:
    ``keys`` is a set, in whatever order Spark's hash set or the driver gives it, and the finding
    must read the same whichever told it."""
    ordered = sorted(keys or [], key=lambda k: (k["producer_id"], -1 if k["producer_epoch"] is None else k["producer_epoch"]))
    return [{"producer_id": k["producer_id"], "producer_epoch": k["producer_epoch"], "first_sequence": first_sequence,
             "last_sequence": last_sequence} for k in ordered][:10]
