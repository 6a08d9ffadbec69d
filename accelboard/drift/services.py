"""services of the drift app (none yet)."""
