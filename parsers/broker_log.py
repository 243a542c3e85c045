"""Broker text logs (log4j ``server.log``, ``controller.log``, ``state-change.log``) -> ``log_events`` rows.

Why: the log dirs say what the replicas hold *now*; only the broker's own log says what it did on the
way (a follower truncating 500 -> 300 after an unclean election, a leader starting epoch 2 at 300, a
broker killed without a shutdown). Operators collect these files after an incident, often rotated
(``server.log.1``, ``server.log.2026-11-22-19``), gzipped, and renamed (``node-1-server.log.gz``).

Format: Kafka's default layout ``[%d] %p %m (%c)%n``, e.g.
``[2026-11-22 19:09:59,421] INFO [Partition ue-0 broker=1] Log loaded ... (kafka.cluster.Partition)``.
log4j writes the broker's *local* time with no zone; we read it as UTC (``time`` is UTC-labelled but
is really "the broker's wall clock": shift it yourself if the brokers did not run in UTC).
Continuation lines (stack traces, the multi-line ``KafkaConfig values:`` dump) do not start with
``[`` and are skipped. Bytes that are not UTF-8 decode with U+FFFD. Only *interesting* lines
become rows; each keeps its 1-based ``line_no`` in the decompressed text and the line (``text``,
capped at 1000 chars).

Event vocabulary (``event`` column) and what ``offset`` means for each:

- ``truncation``: a replica truncated its log. ``offset`` = the truncation target. Wordings:
  3.x ``Truncating partition ue-0 with TruncationState(offset=300, completed=true) due to leader
  epoch and offset EpochEndOffset(errorCode=0, partition=0, leaderEpoch=0, endOffset=300)`` (``leader_epoch``
  from the EpochEndOffset) or ``... due to local high watermark 0`` (``hw`` = that HW); 2.1-3.2
  ``Truncating partition ue-0 to local high watermark 0``; 1.0-4.x ``[Log|UnifiedLog partition=ue-0, ...]
  Truncating to offset 300``; 0.10 ``Truncating log ue-0 to offset 300.``; 2.0+ WARN ``Truncating ue-0 to
  offset 300 below high watermark 500`` (``hw`` = 500: acknowledged data was cut); 3.x ``Truncate fully
  and reset fetch offset for partition ...`` and 0.10 ``Replica 2 for partition ue-0 reset its fetch
  offset from 500 to current leader 1's latest offset 300``.
- ``truncation_noop``: ``Truncating to 0 has no effect as the largest offset in the log is -1`` (1.0+)
  and 0.10's ``Truncating ue-0 to 0 has no effect ...``; ``offset`` = the requested target.
- ``log_recovery``: recovery after an unclean shutdown: ``Recovering unflushed segment 275`` (all
  versions; ``offset`` = segment base offset), ``Recovering 1 logs from DIR since no clean shutdown
  file was found`` (3.x), ``Attempting recovery for all logs in DIR since no clean shutdown file was
  found`` (2.x), ``Recovering file X by renaming from .swap files``.
- ``log_loaded``: ``Log loaded for partition ue-0 with initial high watermark 300`` (2.4+) / ``Replica
  loaded for partition ...`` (1.x-2.3): ``offset`` = ``hw`` = the checkpointed HW. ``Completed load of
  Log(dir=..., topic=ue, partition=0, highWatermark=0, ..., logEndOffset=300)`` (2.8+) and the older
  ``Completed load of log ... log end offset 300``: ``offset`` = log end offset and ``hw`` left null on
  purpose: that line prints the log's in-memory HW *before* the checkpoint is applied (0 in the
  real-cluster logs even where the checkpoint said 300).
- ``high_watermark``: any other line stating a current HW: DEBUG ``High watermark updated from
  (offset=0 ...) to (offset=300 ...)``; the KRaft ``[RaftManager id=1] High watermark set to
  ...(offset=14...)`` (topic ``__cluster_metadata``, partition 0).
- ``become_leader`` / ``become_follower``: state-change ``Leader ue-0 with topic id Some(x) starts at
  leader epoch 2 from offset 300 with partition epoch 4, high watermark 300, ISR [2], ...`` (3.x),
  ``Leader ue-0 starts at leader epoch ...`` (2.8), ``ue-0 starts at leader epoch 2 from offset 300 with
  high watermark ...`` (2.4), ``ue-0 starts at Leader Epoch 2 from offset 300.`` (1.1), ``Follower ue-0
  starts at leader epoch 0 from offset 300 with partition epoch 2 and high watermark 300. Current leader
  is 1.`` and the ``Skipped the become-leader|follower state change for ue-0 ... leaderEpoch=2, isr=[2, 3]
  ... Current high watermark 450`` lines. ``offset`` = the epoch start offset (the local log end), or
  the stated HW for the skipped form.
- ``leader_change``: controller-side leader moves: ZK ``Changed partition ue-0 from OfflinePartition to
  OnlinePartition with state LeaderAndIsr(leader=2, leaderEpoch=3, isr=List(2), zkVersion=4)`` (1.1-3.1;
  ``..., leaderRecoveryState=RECOVERED, partitionEpoch=5)`` in 3.2-3.4 and ``isrWithBrokerEpoch=List(
  BrokerState(brokerId=2, brokerEpoch=-1))`` from 3.5), KRaft ``partition change for ue-0 with topic ID x:
  leader: 1 -> 2, ...`` (DEBUG in 3.6), 4.x ``Setting new leader for topicId x, partition 0 to 2 using ELR``
  (KIP-966: clean), and the KRaft controller's first leader of a new partition, ``Replayed PartitionRecord
  for new partition ue-0 with topic ID x and PartitionRegistration(replicas=[1, 2, 3], isr=[1, 2, 3], ...,
  leader=1, ..., leaderEpoch=0, ...)``.
- ``isr_change``: ``Shrinking ISR from 1,2,3 to 1,2. Leader: (highWatermark: 450, ...)`` (``hw`` = 450),
  ``Expanding ISR from ...``, ``ISR updated to 1,2,3 and version updated to 5``, 0.10 ``Shrinking ISR
  for partition [ue,0] from ...`` and ``New leader and ISR for partition [ue,0] is {...}``; ``isr`` = the
  new ISR.
- ``unclean_election``: the ZK controller's ``Changed partition ue-0 from OfflinePartition to
  OnlinePartition with state LeaderAndIsr(..., leaderRecoveryState=RECOVERING, ...)`` (3.2+: the state
  only ``Election.leaderForOffline`` sets, for a leader outside the ISR; ``leader_recovery_state`` 1), and
  the controllers' sentences (``leader_recovery_state`` null): KRaft ``Setting new leader for topicId x,
  partition 0 to 2 using an unclean election`` (3.6+, no topic *name*: ``topic_id`` + ``partition``) and
  ``UNCLEAN partition change for ue-0 with topic ID x: isr: [1] -> [2], leader: -1 -> 2, ... leaderEpoch:
  1 -> 2`` (3.0-3.9: the new leader was not in the previous ISR, which a clean reassignment also logs;
  4.x: the partition is RECOVERING); ZK 0.8-1.0 WARN ``No broker in ISR is alive for [ue,0]. Elect leader
  2 from live brokers 2. There's potential data loss.``; 3.9+ ``Triggering unclean leader election for
  offline partition ue-0.`` Which of them decide an election is ``jobs/findings/elections.py``'s rule.
- ``leader_recovery``: ``The topic partition ue-0 was marked as RECOVERING. Marking the topic partition
  as RECOVERED.`` (3.2+, ``Partition.makeLeader`` of the new leader after an unclean election; ``leader`` =
  that broker, ``leader_recovery_state`` 1; 3.2 adds ``Leader log recovery is not implemented.``).
- ``startup``: the first line of a start: ``[BrokerServer id=1] Transition from SHUTDOWN to STARTING``,
  ``[ControllerServer id=100] Starting controller`` (KRaft), ``[KafkaServer id=1] starting`` (ZK 1.0+),
  ``[Kafka Server 1], starting`` (0.10). A combined broker+controller node logs two.
- ``shutdown``: ``[BrokerServer|KafkaServer id=1] shut down completed``, ``[Kafka Server 1], shut down
  completed``; a KRaft controller never logs a completion in 3.x, so its ``[ControllerServer id=100]
  shutting down`` counts. A ``startup`` with no ``shutdown`` before it means the process was killed.
- ``controlled_shutdown``: ``Beginning controlled shutdown.`` (KRaft broker), ``Starting controlled
  shutdown`` (ZK broker), controller-side ``Unfenced broker 2 has requested and been granted a controlled
  shutdown.`` and ZK ``Shutting down broker 2`` (``broker`` = the broker concerned).
- ``fenced`` / ``unfenced``: ``Fencing broker 1 because its session has timed out.``, ``The request from
  broker 3 to unfence has been granted ...`` (controller; ``broker`` = the subject) and the broker's own
  ``The broker has been unfenced. Transitioning from RECOVERY to RUNNING.``
- ``segment_deleted``: ``Deleting segment ...`` (every version's form); ``offset`` = first base offset.
- ``log_start_moved``: ``Incremented log start offset to 300 due to ...`` / ``Incrementing log start
  offset to 300`` (and the tiered ``local log start offset``); ``offset`` = the new log start.
- ``error``: any other ERROR/FATAL line (``logger`` says who).

``leader_recovery_state`` is the leaderRecoveryState a line states as the partition's state (0 RECOVERED,
1 RECOVERING: ZK ``LeaderAndIsr(...)``, ``PartitionRegistration(...)``, ``LeaderAndIsrPartitionState(...)``,
the new leader's RECOVERING line), null where it states none (a KRaft controller's diff
``leaderRecoveryState: RECOVERED -> RECOVERING`` is a sentence about a change, not counted).

``node`` comes from the line itself (``[Broker id=N]``, ``replicaId=N``, ``[KafkaServer id=N]``,
``[BrokerServer id=N]``, ``[QuorumController id=N]``, ...) else null: the caller may fill it from the
file name with :func:`node_from_name`. ``broker`` is the broker a controller-side line is *about*.

Gzip is detected by its magic bytes and decompressed in bounded chunks (multi-member files
included): output beyond ``max_output`` bytes, or beyond ``max_ratio`` x the compressed size once
past ``ratio_floor`` bytes, is a ``gzip_bomb`` problem; a cut-off or corrupt stream keeps the rows
before the damage and adds one ``truncated_gzip`` / ``corrupt_gzip`` problem.
"""

from __future__ import annotations

import itertools
import os
import re
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc

from parsers.common import Parsed, Problem, problems_table

LOG_EVENTS_SCHEMA = pa.schema(
    [
        pa.field("line_no", pa.int64()),
        pa.field("time", pa.timestamp("us", tz="UTC")),
        pa.field("level", pa.string()),
        pa.field("logger", pa.string()),
        pa.field("node", pa.int32()),
        pa.field("event", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("topic_id", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("leader_epoch", pa.int32()),
        pa.field("leader", pa.int32()),
        pa.field("isr", pa.list_(pa.int32())),
        pa.field("hw", pa.int64()),
        pa.field("leader_recovery_state", pa.int8()),
        pa.field("broker", pa.int32()),
        pa.field("text", pa.string()),
    ]
)
SCHEMA = LOG_EVENTS_SCHEMA  # the name every parser module gives its table schema

EVENTS = (
    "truncation",
    "truncation_noop",
    "log_recovery",
    "log_loaded",
    "high_watermark",
    "become_leader",
    "become_follower",
    "leader_change",
    "isr_change",
    "unclean_election",
    "leader_recovery",
    "startup",
    "shutdown",
    "controlled_shutdown",
    "fenced",
    "unfenced",
    "segment_deleted",
    "log_start_moved",
    "error",
)

TEXT_CAP = 1000
MAX_OUTPUT = 2 << 30  # decompressed bytes read from one gzip, at most
MAX_RATIO = 200  # decompressed / compressed, checked once past RATIO_FLOOR
RATIO_FLOOR = 32 << 20
_CHUNK = 8 << 20  # text is processed in blocks of about this size: memory stays bounded
_MAX_LINE = 1 << 20  # a "line" longer than this is cut (zeros, binary junk)

# ---------------------------------------------------------------------------------------- file names

_NAME_RE = re.compile(
    r"(?:^|[-_.])(server|controller|state-change|kafkaserver|kafka)\.(?:log|out)"
    r"(?:\.\d{4}-\d{2}-\d{2}(?:-\d{2}(?:-\d{2})?)?|\.\d+)*(?:\.gz)?$",
    re.IGNORECASE,
)
_KIND = {
    "server": "server",
    "kafkaserver": "server",
    "kafka": "server",
    "controller": "controller",
    "state-change": "state_change",
}
_NODE_NAME_RE = re.compile(r"(?:^|[-_.])(?:node|broker|controller|kafka)[-_]?(\d+)(?=[-_.])", re.IGNORECASE)


def is_broker_log(name: str) -> str | None:
    """Which Kafka log4j file a (collected) file name is: 'server' | 'controller' | 'state_change' | None.

    Matches rotated (``.1``, ``.2026-11-22-19``), gzipped and prefixed (``node-1-``) names, and
    ``kafkaServer.out`` (the daemon's stdout, same content as server.log). Other log4j files
    (log-cleaner, request, authorizer) are not broker event logs and give None.
    """
    m = _NAME_RE.search(os.path.basename(name))
    return _KIND[m.group(1).lower()] if m else None


def node_from_name(name: str) -> int | None:
    """The node id an operator put in a collected file's name (``node-1-server.log.gz`` -> 1), else None."""
    m = _NODE_NAME_RE.search(os.path.basename(name))
    return int(m.group(1)) if m else None


# ------------------------------------------------------------------------------------------ reading


def _plain_chunks(data: bytes | memoryview) -> Iterator[bytes]:
    """Plain text in fixed-size pieces, so a 2 GB log is never decoded into one string."""
    mv = memoryview(data)
    for i in range(0, len(mv), _CHUNK):
        yield bytes(mv[i : i + _CHUNK])


def _gunzip_chunks(
    data: bytes | memoryview, problems: list[Problem], max_output: int, max_ratio: int, ratio_floor: int
) -> Iterator[bytes | None]:
    """Decompress every gzip member, never holding more than one chunk; damage becomes a problem.

    Yields ``None`` once after damage (the consumer then drops the partial line it holds).
    """
    mv = memoryview(data)
    size = len(mv)
    limit = min(max_output, max(ratio_floor, max_ratio * size))
    out_total = 0
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    feed_size = 1 << 20
    inp = bytes(mv[0:feed_size])
    pos = len(inp)
    while True:
        try:
            out = d.decompress(inp, _CHUNK)
        except zlib.error as e:
            problems.append(Problem(max(0, pos - len(d.unconsumed_tail)), "corrupt_gzip", f"gzip stream damaged: {e}"))
            yield None
            return
        if out:
            if out_total + len(out) > limit:
                keep = limit - out_total
                yield out[:keep]
                problems.append(
                    Problem(
                        pos,
                        "gzip_bomb",
                        f"decompressed output passed {limit} bytes ({size} compressed; caps: {max_output} bytes, "
                        f"{max_ratio}x past {ratio_floor}); the rest was not read",
                    )
                )
                yield None
                return
            out_total += len(out)
            yield out
        if d.eof:
            member_start = pos - len(d.unused_data)
            if bytes(mv[member_start : member_start + 2]) == b"\x1f\x8b":  # `cat a.gz b.gz`: another member
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                inp = bytes(mv[member_start : member_start + feed_size])
                pos = member_start + len(inp)
                continue
            if mv[member_start:].tobytes().strip(b"\x00"):
                problems.append(
                    Problem(member_start, "trailing_garbage", f"{size - member_start} bytes after the last gzip member")
                )
            return
        inp = d.unconsumed_tail
        if not inp and not out:
            if pos >= size:
                tail = d.flush()
                if tail and out_total + len(tail) <= limit:
                    out_total += len(tail)
                    yield tail
                problems.append(
                    Problem(
                        size, "truncated_gzip", f"gzip stream ends before its end marker after {out_total} decompressed bytes"
                    )
                )
                yield None
                return
            inp = bytes(mv[pos : pos + feed_size])
            pos += len(inp)


def _lines(chunks: Iterator[bytes | None]) -> Iterator[tuple[str | None, bool]]:
    """Blocks of whole lines as text, ``(block, False)``; after damage ``(None, partial_line_dropped)``.

    A block never ends inside a line, so UTF-8 sequences are never split (0x0A is never part of one).
    """
    carry = b""
    for chunk in chunks:
        if chunk is None:
            yield None, bool(carry)
            return
        nl = chunk.rfind(b"\n")
        if nl < 0:
            if len(carry) < _MAX_LINE:
                carry += chunk[: _MAX_LINE - len(carry)]
            continue
        block = carry + chunk[:nl]
        carry = chunk[nl + 1 : nl + 1 + _MAX_LINE]
        yield block.decode("utf-8", "replace"), False
    if carry:
        yield carry.decode("utf-8", "replace"), False


# ------------------------------------------------------------------------------------------ patterns

# Cheap prefilter: a block's lines are split and matched in Arrow's C++ kernels (RE2: one linear pass for all
# keywords, where a Python regex alternation or one str.find per keyword is several times slower); only
# header lines holding a keyword reach Python.
_KEYWORDS = (
    "Truncat",
    "reset its fetch",
    "igh watermark",
    "ecover",
    "RECOVERING",
    "Completed load",
    "starts at",
    "Skipped the become",
    "ISR",
    "unclean ",
    "using ELR",
    "hanged partition",
    "partition change",
    "Replayed PartitionRecord for new",
    "STARTING",
    "Starting controller",
    "starting",
    "shut down completed",
    "] shutting down",
    "ontrolled shutdown",
    "Shutting down broker",
    "Fencing broker",
    "unfence",
    "Deleting segment",
    "log start offset to",
    "] ERROR ",
    "] FATAL ",
)
_KEY_PATTERN = r"^\[.*(?:" + "|".join(re.escape(k) for k in _KEYWORDS) + ")"
_HEAD_RE = re.compile(
    r"\[(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[,.](\d{1,6}))?\] +(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL) (.*)"
)
_LOGGER_RE = re.compile(r" \(([A-Za-z_$][\w.$]*)\)\s*$")
_NODE_RE = re.compile(
    r"\[(?:Broker|KafkaServer|BrokerServer|ControllerServer|QuorumController|KafkaRaftServer|RaftManager|"
    r"BrokerLifecycleManager|SharedServer|Controller|MetadataLoader|BrokerMetadataPublisher|TransactionCoordinator)"
    r" (?:id|nodeId)=(\d+)|replicaId=(\d+)|\[(?:Kafka Server|Controller|GroupCoordinator) (\d+)\]|\[Partition \S+ broker=(\d+)\]|on [Bb]roker (\d+)\]"
)
_PREFIX_TP_RE = re.compile(
    r"\[(?:Log|UnifiedLog|LocalLog|LogLoader|Partition) partition=([^,\]\s]+)|\[Partition (\S+) broker=\d+\]"
)
_INT_RE = re.compile(r"-?\d+")

R = re.compile
_P = {
    "trunc_state": R(
        r"Truncating partition (\S+) with TruncationState\(offset=(-?\d+), completed=\w+\) due to "
        r"(?:local high watermark (-?\d+)|leader epoch and offset (.*))"
    ),
    "trunc_local_hw": R(r"Truncating partition (\S+) to local high watermark (-?\d+)"),
    "trunc_below_hw": R(r"Truncating (\S+) to offset (-?\d+) below high watermark (-?\d+)"),
    "trunc_fully": R(
        r"Truncate fully and reset fetch offset for partition (\S+) from (-?\d+) to the current leader's start offset (-?\d+)"
    ),
    "trunc_noop": R(r"Truncating (?:(\S+) )?to (-?\d+) has no effect as the largest offset in the log is (-?\d+)"),
    "trunc_log": R(r"Truncating (?:log (\S+) )?to offset (-?\d+)"),
    "reset_fetch": R(
        r"Replica (\d+) for partition (\S+) reset its fetch offset from (-?\d+) to current leader (\d+)'s (?:latest|start) offset (-?\d+)"
    ),
    "recover_segment": R(r"Recovering unflushed segment (\d+)(?: in log (\S+?)\.?(?: |$)|\. \S+ recovered for (\S+?)\.(?: |$))?"),
    "recover_logs": R(
        r"(?:Recovering \d+ logs from|Attempting recovery for all logs in) (\S+) since no clean shutdown file was found"
    ),
    "recover_swap": R(r"Recovering file (\S+) by renaming from"),
    "loaded_hw": R(r"(?:Log|Replica) loaded for partition (\S+) with initial high watermark (-?\d+)"),
    "completed_load_new": R(
        r"Completed load of Log\(dir=[^,]*(?:, topicId=([^,]*))?, topic=([^,]*), partition=(\d+), highWatermark=-?\d+, "
        r"lastStableOffset=-?\d+, logStartOffset=-?\d+, logEndOffset=(-?\d+)\)"
    ),
    "completed_load_old": R(r"Completed load of log (?:(\S+) )?with \d+ (?:log )?segments.*?log end offset (-?\d+)"),
    "hw_updated": R(r"High watermark updated from .*?offset=(-?\d+).*? to .*?offset=(-?\d+)"),
    "hw_raft": R(r"\[RaftManager (?:id|nodeId)=\d+\] High watermark set to .*?offset=(-?\d+)"),
    "starts_at": R(
        r"(?:(Leader|Follower) )?(\S+) (?:with topic id (\S+) )?starts at [Ll]eader [Ee]poch (-?\d+) from offset (-?\d+)"
    ),
    "skipped": R(r"Skipped the become-(leader|follower) state change"),
    "recovering": R(r"The topic partition (\S+) was marked as RECOVERING"),
    "unclean_set": R(r"Setting new leader for topicId (\S+), partition (\d+) to (-?\d+) using an unclean election"),
    "unclean_change": R(r"UNCLEAN partition change for (\S+) with topic ID (\S+): (.*)"),
    "unclean_zk": R(r"No broker in ISR is alive for (\S+)\. Elect leader (-?\d+) from live brokers"),
    "unclean_trigger": R(r"Triggering unclean leader election for offline partition (\S+?)\.?(?: |$)"),
    "partition_record": R(
        r"Replayed PartitionRecord for new partition (\S+) with topic ID (\S+) and PartitionRegistration\((.*)\)"
    ),
    "change_kraft": R(r"partition change for (\S+) with topic ID (\S+): (.*)"),
    "change_zk": R(r"Changed partition (\S+) from (\w+) to \w+ with state LeaderAndIsr\((.*)\)"),
    "elr_set": R(r"Setting new leader for topicId (\S+), partition (\d+) to (-?\d+) using ELR"),
    "isr_move": R(r"(Shrinking|Expanding) ISR (?:for partition (\S+) )?from ([\d,]*) to ([\d,]*)"),
    "isr_updated": R(r"ISR updated to \[?([\d,]*)\]?"),
    "isr_zk_old": R(r"New leader and ISR for partition (\S+) is (.*)"),
    "startup": R(
        r"\[(?:BrokerServer|KafkaServer|ControllerServer) id=\d+\] (?:Transition from SHUTDOWN to STARTING|starting|Starting controller)"
        r"|\[Kafka Server \d+\], starting"
    ),
    "shutdown": R(
        r"\[(?:BrokerServer|KafkaServer) id=\d+\] shut down completed|\[Kafka Server \d+\], shut down completed|\[ControllerServer id=\d+\] shutting down"
    ),
    "cs_self": R(
        r"Beginning controlled shutdown\.|(?:\[KafkaServer id=\d+\] |\[Kafka Server \d+\], )Starting controlled shutdown"
    ),
    "cs_ctrl": R(r"Unfenced broker (\d+) has requested and been granted a controlled shutdown|\]:? Shutting down broker (\d+)"),
    "fencing": R(r"Fencing broker (\d+) because"),
    "unfence_ctrl": R(r"The request from broker (\d+) to unfence has been granted"),
    "unfenced_self": R(r"The broker has been unfenced"),
    "seg_deleted": R(r"Deleting segments? (?:files )?(?:.*?baseOffset=(\d+)|(\d+))"),
    "log_start": R(r"Increment(?:ed|ing) (?:local )?log start offset to (-?\d+)"),
}
_EPOCH_END_RE = R(r"leaderEpoch=(-?\d+)")
_LEADER_KV_RE = R(r"\bleader[=:]\s*(?:-?\d+ -> )?(-?\d+)|\"leader\":(-?\d+)")
_EPOCH_KV_RE = R(r"\bleaderEpoch[=:]\s*(?:-?\d+ -> )?(-?\d+)|\"leader_epoch\":(-?\d+)")
_ISR_KV_RE = R(r"\bisr[=:]\s*(?:\[[^\]]*\] -> )?(?:\[([^\]]*)\]|List\(([^)]*)\))|\"isr\":\[([^\]]*)\]"
                r"|\bisrWithBrokerEpoch=List\(((?:BrokerState\([^)]*\)(?:, )?)*)\)")
_BROKER_ID_RE = R(r"brokerId=(-?\d+)")
# the leaderRecoveryState a line states as the partition's state (LeaderAndIsr, PartitionRegistration,
# LeaderAndIsrPartitionState), never the "leaderRecoveryState: A -> B" of a KRaft controller's diff
_LRS_KV_RE = R(r"\bleaderRecoveryState=(RECOVERED|RECOVERING|0|1)\b")
_LRS = {"RECOVERED": 0, "0": 0, "RECOVERING": 1, "1": 1}
_HW_STATED_RE = R(r"[Hh]igh watermark (-?\d+)|highWatermark: (-?\d+)")
_ISR_STATED_RE = R(r"\bISR \[([^\]]*)\]")
_CUR_LEADER_RE = R(r"Current leader is (-?\d+)")
_PIDX_RE = R(r"partitionIndex=(\d+)")
_TP_FOR_RE = R(r" for (?:partition )?(\[[^\]]+\]|[^\s,]+-\d+)")


def _split_tp(s: str | None) -> tuple[str | None, int | None]:
    """``ue-0`` / ``[ue,0]`` -> ('ue', 0); anything else -> (s, None)."""
    if not s:
        return None, None
    s = s.rstrip(".,:;)")
    if s.startswith("[") and s.endswith("]") and "," in s:
        t, _, p = s[1:-1].rpartition(",")
        return (t, int(p)) if p.strip().isdigit() else (s, None)
    t, sep, p = s.rpartition("-")
    if sep and p.isdigit() and t:
        return t, int(p)
    return s, None


def _ints(s: str | None) -> list[int] | None:
    return None if s is None else [int(x) for x in _INT_RE.findall(s)]


def _first(m: re.Match | None) -> str | None:
    if m is None:
        return None
    return next((g for g in m.groups() if g is not None), None)


def _int(s: str | None) -> int | None:
    return None if s is None else int(s)


def _some(s: str | None) -> str | None:
    """``Some(x)`` -> x, ``None`` -> None: how Scala prints an Option topic id."""
    if s is None or s == "None":
        return None
    if s.startswith("Some(") and s.endswith(")"):
        return s[5:-1]
    return s


def _tp(m: re.Match, group: int = 1) -> dict:
    """``topic``/``partition`` of the ``ue-0`` or ``[ue,0]`` in ``m``'s group."""
    t, p = _split_tp(m[group])
    return {"topic": t, "partition": p}


def _truncation_stated(m: re.Match, msg: str) -> dict:
    ev = {"event": "truncation", **_tp(m), "offset": int(m[2])}
    if m[3] is not None:
        ev["hw"] = int(m[3])
    elif m[4] is not None and (e := _EPOCH_END_RE.search(m[4])):
        ev["leader_epoch"] = int(e[1])
    return ev


def _epoch_start(m: re.Match, msg: str) -> dict:
    follower = m[1] == "Follower"
    ev = {
        "event": "become_follower" if follower else "become_leader",
        **_tp(m, 2),
        "topic_id": _some(m[3]),
        "leader_epoch": int(m[4]),
        "offset": int(m[5]),
        "hw": _int(_first(_HW_STATED_RE.search(msg))),
        "isr": _ints(_first(_ISR_STATED_RE.search(msg))),
    }
    ev["leader"] = _int(_first(_CUR_LEADER_RE.search(msg))) if follower else "node"
    return ev


def _skipped_state_change(m: re.Match, msg: str) -> dict:
    tpm = _TP_FOR_RE.search(msg)
    t, p = _split_tp(tpm[1] if tpm else None)
    if p is None and (pi := _PIDX_RE.search(msg)):
        p = int(pi[1])
    tid = re.search(r"with topic id (\S+)", msg)
    hw = _int(_first(re.search(r"Current high watermark (-?\d+)", msg)))
    ev = {
        "event": f"become_{m[1]}",
        "topic": t,
        "partition": p,
        "topic_id": _some(tid[1]) if tid else None,
        "hw": hw,
        "offset": hw,
    }
    ev.update(_kv(msg))
    return ev


def _isr_move(m: re.Match, msg: str) -> dict:
    return {"event": "isr_change", **_tp(m, 2), "isr": _ints(m[4]), "hw": _int(_first(_HW_STATED_RE.search(msg)))}


def _partition_change(m: re.Match, msg: str) -> dict:
    return {"event": "leader_change" if "leader:" in m[3] else "isr_change", **_tp(m), "topic_id": m[2], **_kv(m[3])}


def _zk_partition_change(m: re.Match, msg: str) -> dict:
    kv = _kv(m[3])
    # only an offline partition's election marks RECOVERING (Election.leaderForOffline, 3.2+): the unclean one
    unclean = m[2] == "OfflinePartition" and kv.get("leader_recovery_state") == 1
    return {"event": "unclean_election" if unclean else "leader_change", **_tp(m), **kv}


# (needle, pattern, builder): the first rule whose needle is in the message and whose pattern matches
# it says the event; the builder makes the event's fields from the match (and the whole message,
# for fields a line states anywhere). The needle is a plain substring every line the pattern
# matches holds, so most lines are turned down without running a regular expression. Order matters
# where two patterns match one line (``trunc_log`` is the catch-all of the truncations,
# ``change_kraft`` of the partition changes).
Rule = tuple[str, re.Pattern, Callable[[re.Match, str], dict]]
_RULES: tuple[Rule, ...] = (
    ("Truncat", _P["trunc_state"], _truncation_stated),
    ("Truncat", _P["trunc_local_hw"], lambda m, msg: {"event": "truncation", **_tp(m), "offset": int(m[2]), "hw": int(m[2])}),
    ("Truncat", _P["trunc_below_hw"], lambda m, msg: {"event": "truncation", **_tp(m), "offset": int(m[2]), "hw": int(m[3])}),
    ("Truncat", _P["trunc_fully"], lambda m, msg: {"event": "truncation", **_tp(m), "offset": int(m[3])}),
    ("Truncat", _P["trunc_noop"], lambda m, msg: {"event": "truncation_noop", **_tp(m), "offset": int(m[2])}),
    ("Truncat", _P["trunc_log"], lambda m, msg: {"event": "truncation", **_tp(m), "offset": int(m[2])}),
    ("reset its fetch offset", _P["reset_fetch"],
     lambda m, msg: {"event": "truncation", **_tp(m, 2), "offset": int(m[5]), "leader": int(m[4]), "node": int(m[1])}),
    ("Recover", _P["recover_segment"],
     lambda m, msg: {"event": "log_recovery", **dict(zip(("topic", "partition"), _split_tp(m[2] or m[3]))), "offset": int(m[1])}),
    ("Recover", _P["recover_swap"], lambda m, msg: {"event": "log_recovery"}),
    ("ecover", _P["recover_logs"], lambda m, msg: {"event": "log_recovery"}),  # ("Recovering …" or "… recovery for all …")
    ("loaded for partition", _P["loaded_hw"], lambda m, msg: {"event": "log_loaded", **_tp(m), "offset": int(m[2]), "hw": int(m[2])}),
    ("Completed load of", _P["completed_load_new"],
     lambda m, msg: {"event": "log_loaded", "topic_id": _some(m[1]), "topic": m[2], "partition": int(m[3]), "offset": int(m[4])}),
    ("Completed load of", _P["completed_load_old"], lambda m, msg: {"event": "log_loaded", **_tp(m), "offset": int(m[2])}),
    ("UNCLEAN partition change", _P["unclean_change"],
     lambda m, msg: {"event": "unclean_election", **_tp(m), "topic_id": m[2], **_kv(m[3])}),
    ("unclean election", _P["unclean_set"],
     lambda m, msg: {"event": "unclean_election", "topic_id": m[1], "partition": int(m[2]), "leader": int(m[3])}),
    ("No broker in ISR is alive", _P["unclean_zk"], lambda m, msg: {"event": "unclean_election", **_tp(m), "leader": int(m[2])}),
    ("Triggering unclean", _P["unclean_trigger"], lambda m, msg: {"event": "unclean_election", **_tp(m)}),
    ("RECOVERING", _P["recovering"],
     lambda m, msg: {"event": "leader_recovery", **_tp(m), "leader": "node", "leader_recovery_state": 1}),
    ("starts at", _P["starts_at"], _epoch_start),
    ("Skipped the become", _P["skipped"], _skipped_state_change),
    ("High watermark", _P["hw_updated"], lambda m, msg: {"event": "high_watermark", "offset": int(m[2]), "hw": int(m[2])}),
    ("High watermark", _P["hw_raft"],
     lambda m, msg: {"event": "high_watermark", "topic": "__cluster_metadata", "partition": 0, "offset": int(m[1]), "hw": int(m[1])}),
    ("ISR", _P["isr_move"], _isr_move),
    ("ISR", _P["isr_updated"], lambda m, msg: {"event": "isr_change", "isr": _ints(m[1])}),
    ("ISR", _P["isr_zk_old"], lambda m, msg: {"event": "isr_change", **_tp(m), **_kv(m[2])}),
    ("Replayed PartitionRecord for new", _P["partition_record"],
     lambda m, msg: {"event": "leader_change", **_tp(m), "topic_id": m[2], **_kv(m[3])}),
    ("partition change for", _P["change_kraft"], _partition_change),
    ("Changed partition", _P["change_zk"], _zk_partition_change),
    ("using ELR", _P["elr_set"], lambda m, msg: {"event": "leader_change", "topic_id": m[1], "partition": int(m[2]), "leader": int(m[3])}),
    ("Server", _P["startup"], lambda m, msg: {"event": "startup"}),
    ("shut", _P["shutdown"], lambda m, msg: {"event": "shutdown"}),
    ("controlled shutdown", _P["cs_self"], lambda m, msg: {"event": "controlled_shutdown", "broker": "node"}),
    ("down", _P["cs_ctrl"], lambda m, msg: {"event": "controlled_shutdown", "broker": int(_first(m))}),
    ("enc", _P["fencing"], lambda m, msg: {"event": "fenced", "broker": int(m[1])}),
    ("enc", _P["unfence_ctrl"], lambda m, msg: {"event": "unfenced", "broker": int(m[1])}),
    ("enc", _P["unfenced_self"], lambda m, msg: {"event": "unfenced", "broker": "node"}),
    ("Deleting segment", _P["seg_deleted"], lambda m, msg: {"event": "segment_deleted", "offset": _int(m[1] or m[2])}),
    ("log start offset to", _P["log_start"], lambda m, msg: {"event": "log_start_moved", "offset": int(m[1])}),
)


# the rules in order, those that follow each other with one needle under it: a needle is looked
# for once (each look scans the message)
_BY_NEEDLE = tuple((needle, tuple((pattern, build) for _, pattern, build in rules))
                   for needle, rules in itertools.groupby(_RULES, key=lambda rule: rule[0]))


def _classify(msg: str) -> dict | None:
    """The event a log message states, with its fields (``_RULES``); None when the line is not interesting."""
    for needle, rules in _BY_NEEDLE:
        if needle in msg:
            for pattern, build in rules:
                if m := pattern.search(msg):
                    return build(m, msg)
    return None


def _kv(s: str) -> dict:
    """leader / leaderEpoch / isr from ``leader=2, leaderEpoch=3, isr=List(2)``, ``leader: -1 -> 2`` or JSON."""
    out: dict = {}
    if (m := _LEADER_KV_RE.search(s)) is not None:
        out["leader"] = int(_first(m))
    if (m := _EPOCH_KV_RE.search(s)) is not None:
        out["leader_epoch"] = int(_first(m))
    if (m := _ISR_KV_RE.search(s)) is not None:
        if m[4] is not None:  # 3.5+: isrWithBrokerEpoch=List(BrokerState(brokerId=2, brokerEpoch=-1), ...)
            out["isr"] = [int(b) for b in _BROKER_ID_RE.findall(m[4])]
        else:
            out["isr"] = _ints(_first(m) or "")
    if (m := _LRS_KV_RE.search(s)) is not None:
        out["leader_recovery_state"] = _LRS[m[1]]
    return out


# ------------------------------------------------------------------------------------------ parsing

_DAY_CACHE: dict[tuple[int, int, int], int] = {}


def _micros(h: re.Match) -> int | None:
    """log4j's zone-less local time, read as UTC, in microseconds since the epoch."""
    y, mo, d = int(h[1]), int(h[2]), int(h[3])
    day = _DAY_CACHE.get((y, mo, d))
    if day is None:
        try:
            day = int(datetime(y, mo, d, tzinfo=UTC).timestamp())
        except ValueError:
            return None
        _DAY_CACHE[(y, mo, d)] = day
    hh, mm, ss = int(h[4]), int(h[5]), int(h[6])
    if hh > 23 or mm > 59 or ss > 60:
        return None
    frac = h[7] or "0"
    return (day + hh * 3600 + mm * 60 + ss) * 1_000_000 + int(frac.ljust(6, "0"))


def _row_for(line: str, line_no: int, cols: dict[str, list]) -> bool:
    """Append the row of one interesting line; False when the line is not a log4j header line."""
    h = _HEAD_RE.match(line)
    if h is None:
        return False
    level = h[8]
    body = h[9].rstrip("\r")
    lg = _LOGGER_RE.search(body)
    logger = lg[1] if lg else None
    msg = body[: lg.start()] if lg else body
    ev = _classify(msg)
    if ev is None:
        if level not in ("ERROR", "FATAL"):
            return True
        ev = {"event": "error"}
    nm = _NODE_RE.search(msg)
    node = ev.pop("node", None)
    if node is None and nm is not None:
        node = int(_first(nm))
    for k in ("leader", "broker"):
        if ev.get(k) == "node":
            ev[k] = node
    if ev.get("topic") is None and ev.get("partition") is None and (pm := _PREFIX_TP_RE.search(msg)):
        ev["topic"], ev["partition"] = _split_tp(pm[1] or pm[2])
    cols["line_no"].append(line_no)
    cols["time"].append(_micros(h))
    cols["level"].append("WARN" if level == "WARNING" else level)
    cols["logger"].append(logger)
    cols["node"].append(node)
    for k in ("event", "topic", "topic_id", "partition", "offset", "leader_epoch", "leader", "isr", "hw", "leader_recovery_state", "broker"):
        cols[k].append(ev.get(k))
    cols["text"].append(line[:TEXT_CAP])
    return True


def _scan_block(text: str, first_line_no: int, cols: dict[str, list], seen: list[int]) -> int:
    """Rows of one block of whole lines; returns the number of lines in it.

    ``seen[0]`` is set once a log4j header line is seen, so a file that is not log4j at all is reported.
    """
    lines = pc.split_pattern(pa.array([text], pa.string()), "\n").flatten()
    idx = pc.indices_nonzero(pc.match_substring_regex(lines, _KEY_PATTERN))
    for i, line in zip(idx.to_pylist(), lines.take(idx).to_pylist()):
        _row_for(line, first_line_no + i, cols)
    if not seen[0] and (text.startswith("[") or "\n[" in text) and _HEAD_RE.search(text[:200_000]):
        seen[0] = 1
    return len(lines)


def parse(
    data: bytes,
    path: str,
    *,
    max_output: int = MAX_OUTPUT,
    max_ratio: int = MAX_RATIO,
    ratio_floor: int = RATIO_FLOOR,
) -> Parsed:
    """Interesting lines of one broker log4j file (plain or gzip) as ``LOG_EVENTS_SCHEMA`` rows.

    Never raises on bad bytes: damaged gzip, a decompression bomb or a file that is not a log4j
    log at all each become one problem row (``truncated_gzip``, ``corrupt_gzip``, ``gzip_bomb``,
    ``trailing_garbage``, ``not_log4j``), with the rows read before the damage kept. A gzip problem's
    ``position`` is a byte offset in the *compressed* file (where the damage is); ``not_log4j`` is at line 1.
    """
    problems: list[Problem] = []
    cols: dict[str, list] = {f.name: [] for f in LOG_EVENTS_SCHEMA}
    seen = [0]
    try:
        head = bytes(memoryview(data)[:2])
        chunks: Iterator[bytes | None]
        if head == b"\x1f\x8b":
            chunks = _gunzip_chunks(data, problems, max_output, max_ratio, ratio_floor)
        else:
            chunks = _plain_chunks(data)
        line_no = 1
        nonempty = False
        for block, dropped in _lines(chunks):
            if block is None:
                if dropped and problems:
                    p = problems[-1]
                    problems[-1] = Problem(p.position, p.kind, p.detail + f"; the partial line {line_no} was dropped")
                continue
            nonempty = nonempty or bool(block.strip())
            n = _scan_block(block, line_no, cols, seen)
            line_no += n
        if nonempty and not seen[0] and not problems:
            problems.append(Problem(1, "not_log4j", "no line has the log4j header [yyyy-MM-dd HH:mm:ss,SSS] LEVEL"))
    except Exception as e:  # a parser never raises: whatever slipped through is one problem row
        problems.append(Problem(0, "parser_error", f"{type(e).__name__}: {e}"))
        n = min(len(v) for v in cols.values())
        cols = {k: v[:n] for k, v in cols.items()}
    table = pa.table({f.name: pa.array(cols[f.name], f.type) for f in LOG_EVENTS_SCHEMA}, schema=LOG_EVENTS_SCHEMA)
    return Parsed(table=table, problems=problems_table(path, problems))


def parse_file(path: str) -> Parsed:
    """Convenience for tools: read a file read-only and :func:`parse` it."""
    from parsers.common import FileBytes

    with FileBytes(path) as fb:
        return parse(fb.data, path)


__all__: list[str] = ["LOG_EVENTS_SCHEMA", "EVENTS", "is_broker_log", "node_from_name", "parse", "parse_file"]
