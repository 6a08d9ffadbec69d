"""Teams, membership and roles, job-run bookkeeping, configuration checks and shared plumbing."""
