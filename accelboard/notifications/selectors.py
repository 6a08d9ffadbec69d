"""selectors of the notifications app (none yet)."""
