"""ddp_tools.common: what the tool families share (tool_files, repo_paths, interpreter)."""
