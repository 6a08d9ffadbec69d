"""tasks of the core app (none yet)."""
