"""The deterministic demo fleet: ``plan`` (static data), ``generator`` (pure numpy), ``loader`` (writes)."""
