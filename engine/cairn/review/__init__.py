"""Review: what may be wrong with the memories and the user's verdict on each. `memory.review`
(review_api) over the durable review queue (queue), proposals staged from writes and imports
(staging), maintenance: duplicates, near-duplicates, clusters, stale memories, contradictions
(maintenance), and the import of existing guidance files (guidance).
"""
