"""views of the costs app (none yet)."""
