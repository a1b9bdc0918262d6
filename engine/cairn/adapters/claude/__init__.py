"""The Claude Code adapter, one module per concern:

- hooks: the hook events' handler (`handle`: what SessionStart and each prompt inject);
- capture: turn capture at Stop and PreCompact, and the review queue at SessionEnd;
- transcripts: where Claude Code keeps transcripts, reading them, importing them;
- session: a session's pause and state file, shared by hooks and capture;
- doctor: `cairn doctor`'s checks that Claude Code runs Cairn's hooks.

The hook process (cairn.adapters.claude.hook_process) and the warm process (cairn.adapters.warm.client) call in here.
"""
