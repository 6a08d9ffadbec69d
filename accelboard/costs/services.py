"""services of the costs app (none yet)."""
