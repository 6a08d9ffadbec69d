"""views of the serving app (none yet)."""
