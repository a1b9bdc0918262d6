"""Storage: the stores of both backends behind one contract (protocol.StoreBackend)."""
