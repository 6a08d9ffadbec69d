"""The versioned JSON API (``/api/v1/``): ingest of telemetry, runs and serving metrics, and reads."""
