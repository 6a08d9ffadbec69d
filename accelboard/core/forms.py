"""forms of the core app (none yet)."""
