"""The Dynamic Distributor: watches partition loads, computes MLDC, commands rebalances."""
