"""forms of the dashboard app (none yet)."""
