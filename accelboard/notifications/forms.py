"""forms of the notifications app (none yet)."""
