"""forms of the serving app (none yet)."""
