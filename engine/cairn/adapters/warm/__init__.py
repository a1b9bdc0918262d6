"""The warm process: one per user and data root, holding the embedding model and each open store's
vectors (service), the client every other process asks it through (client), and the embedders
those processes give the engine (embedders).
"""
