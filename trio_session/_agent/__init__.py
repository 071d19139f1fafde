"""The agent loop: requests, the streamed answer, tools, the compactors."""
