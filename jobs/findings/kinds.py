"""The finding kinds read outside the detector that declares them (the report, salvage, the
restart preview, the demo): named once here, a leaf the report imports without loading any
detector (or Spark), and the detectors declare them in their ``FINDING_KINDS`` under these names."""

ACKED_DATA_LOSS = "acked_data_loss"  # loss.py
CONSUMER_READ_LOST_DATA = "consumer_read_lost_data"  # loss.py
REPLICA_DIVERGENCE = "replica_divergence"  # divergence.py
TRUNCATION_BELOW_HW = "truncation_below_hw"  # truncation.py

# the kinds whose offsets name records some replica holds and the surviving log lacks, in the
# order a record (salvage) or a truncation (the restart preview) is attributed to one of them
LOSS_KINDS = (ACKED_DATA_LOSS, REPLICA_DIVERGENCE, TRUNCATION_BELOW_HW)
