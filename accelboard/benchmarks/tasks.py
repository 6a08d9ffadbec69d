"""tasks of the benchmarks app (none yet)."""
