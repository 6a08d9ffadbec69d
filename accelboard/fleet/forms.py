"""forms of the fleet app (none yet)."""
