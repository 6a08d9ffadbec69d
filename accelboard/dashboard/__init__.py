"""The pages team leads, engineers and finance live in: overview, trends, hardware, hosts."""
