"""The warm process: one per user and data root, holding the embedding model and each open store's
vectors (service; what a hook asks of it: runtime), the client every other process asks it through
(client), and the embedders those processes give the engine (embedders).
"""
