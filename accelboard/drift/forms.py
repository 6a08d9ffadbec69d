"""forms of the drift app (none yet)."""
