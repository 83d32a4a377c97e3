"""Part 2: resident memory and time to a synced cache, and the decode cost behind them."""
