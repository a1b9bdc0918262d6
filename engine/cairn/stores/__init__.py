"""Stores: which store a working directory belongs to (paths), which backend holds a store and opening
it (backends), and administering the stores of the data root: create, list, rename, delete, migrate,
back up, restore (admin).
"""
