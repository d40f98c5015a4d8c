"""A backtest's replays: one task under one side, the shadow replay of recorded selections, their dispatch."""
