"""choices of the notifications app (none yet)."""
