"""services of the dashboard app (none yet)."""
