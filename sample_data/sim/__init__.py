"""A step-by-step Kafka replication simulator: ``cluster`` (mechanics), ``model`` (state),
``truth`` (ground truth from the event log), ``materialize`` (broker dirs via ``sample_data.writer``)."""

from .cluster import Cluster, Size

__all__ = ["Cluster", "Size"]
