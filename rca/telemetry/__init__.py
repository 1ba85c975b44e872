"""What rca receives, as columnar batches: spans, log records, data points and alerts, the
conventions that read meaning out of their attributes, the metric table and the fault vocabulary."""
