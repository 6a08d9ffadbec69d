"""Models and their variants, workloads, benchmark runs, their metrics and the series they form."""
