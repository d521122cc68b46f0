"""ddp_tools.common: what the tool families share (tool_files, output_registry, repo_paths, interpreter)."""
