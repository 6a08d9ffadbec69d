"""forms of the alerts app (none yet)."""
