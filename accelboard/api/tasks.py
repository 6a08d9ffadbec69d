"""The API runs no background jobs of its own: ingest enqueues the fleet's rollup tasks."""
