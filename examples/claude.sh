claude mcp add --transport stdio cairn -- cairn serve --transport stdio
