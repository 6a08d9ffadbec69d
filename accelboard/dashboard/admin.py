"""admin of the dashboard app (none yet)."""
