"""The Spark session a run works in: how it is started and sized (``start``, ``conf``), over Spark
Connect (``connect``), how its work spreads (``parallel``), its heap (``memory``), Ctrl-C and stop
signals (``signals``), its scratch (``scratch``), the JVM's noise on stderr (``log_noise``) and its
class-data-sharing archive (``class_sharing``).

Why a room of its own: none of this is storage. It sits below ``jobs/store`` (whose catalog opens a
session) and imports nothing of ours but ``jobs.errors`` and ``jobs.terminal``, the standard-library leaves.
"""
