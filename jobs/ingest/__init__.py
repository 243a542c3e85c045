"""Files → tables: discovery, archives, task planning, the executor-side parse task, the ingest
pipeline and its progress."""
