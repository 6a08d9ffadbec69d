"""The price book (effective-dated accelerator, electricity and carbon prices) and cost reports."""
