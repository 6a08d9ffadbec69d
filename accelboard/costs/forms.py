"""forms of the costs app (none yet)."""
