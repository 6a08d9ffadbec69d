"""forms of the benchmarks app (none yet)."""
