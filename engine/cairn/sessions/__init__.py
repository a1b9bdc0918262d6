"""Captured sessions: Claude Code transcripts (and LoCoMo files) read into turns, stored, and searched
with their context and their dates: `memory.sessions` (sessions_api), reading and ranking turns
(turns), time expressions in a query (timewindow).
"""
