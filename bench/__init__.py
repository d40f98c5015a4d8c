"""The performance benchmark: a synthetic corpus, one module per measure, runner.run puts them together."""
