"""Memories: the write and read paths of one project's memories. The engine (remember, recall,
replace, forget, history: engine) with its steps (writes, detection, reads), the one validator of a
memory's fields (records), automatic supersession (supersede, with supersede_words, _rules, _parts,
_guards) and the slots a project has one value of (slots), the recall pipeline (ranking), path and
command scopes (scopes, scope_index), and every way a memory is shown (render).
"""
