"""Production inference metrics: what serving engines report per interval, per model variant and host."""
