"""views of the fleet app (none yet)."""
