"""``once audit RUN_DIR``: check a run's delivery journals on Apache Spark (PySpark)."""
