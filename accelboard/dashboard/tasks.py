"""tasks of the dashboard app (none yet)."""
