"""services of the benchmarks app (none yet)."""
