// output_registry.h: which existing files this project wrote, so that an
// output replaces only what ddp_train (or one of its tools) wrote itself and
// a file it did not write (a binary, a user's array, another tool's metrics,
// another model's config.json) is never replaced without --overwrite.
//
// A file's content cannot say who wrote it (a user's .npy is a .npy), so the
// writer remembers instead: every output, once complete, is recorded as one
// JSON line in a registry under the XDG state directory
//   $XDG_STATE_HOME/ddp_train/outputs.jsonl  (else ~/.local/state/...)
//   {"dev": D, "ino": I, "size": S, "mtime_ns": M, "path": "/abs/file",
//    "writer": "ddp_train --metrics", "time": "2026-12-07T17:30:00Z"}
// and a file is "ours" while it is still exactly what was recorded: the same
// inode, size and modification time. A file edited since, copied (a new
// inode) or made by anyone else is not. The Python tools keep the same
// registry (launch/ddp_tools/common/output_registry.py): keep them in step.
//
// Files are matched by inode, size and modification time, not by device:
// an NFS or Lustre mount's device number differs from node to node, so a
// requeued job on another node still knows its files. An append-only output
// (--metrics) is recorded with "append": true when its first line is written
// and when it is closed: it stays ours while the file at its recorded path
// has the recorded inode and has only grown since, so a run killed in
// between leaves a file a resumed run still appends to.
//
// Every access locks <registry dir>/outputs.lock (flock: LOCK_EX to append
// one line in one write(2), LOCK_SH to read). Past kRegistryCompactBytes an
// append rewrites the registry (a temporary file renamed over it) with only
// the entries whose files still match, the last per file, at most
// kRegistryMaxEntries of them. A registry that cannot be written costs a
// note: a later run asks for --overwrite to replace (or append to) that
// output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ddp {

// The registry's size past which an append compacts it, and the live
// entries a compaction keeps (the newest), so compacting stays bounded.
constexpr int64_t kRegistryCompactBytes = int64_t{1} << 20;
constexpr size_t kRegistryMaxEntries = 2000;

// The registry file, or "" where neither XDG_STATE_HOME (absolute) nor HOME
// is set (then nothing is recorded and nothing is found).
std::string output_registry_path();

// Who wrote a file, as recorded.
struct OutputRecord {
  std::string writer;  // "ddp_train --predictions"
  std::string time;    // UTC, ISO 8601
};

// Records the complete regular file at `path` as written by `writer` (the
// program and the flag); `append`: an append-only output (see above). Never
// throws: a registry that cannot be written is one note on stderr per
// process. Devices and pipes are not recorded.
void record_output(const std::string& path, const std::string& writer, bool append = false) noexcept;

// The last record that matches the regular file now at `path` (following
// links), if any.
std::optional<OutputRecord> owner_of(const std::string& path);

// "<label> <path>: exists and is not a file ddp_train wrote (no record of it
// in <registry>)", for a refusal.
std::string not_ours_text(const std::string& path, const std::string& label);

// Whether the program may replace what is at `path` (`label`: the flag that
// names it, "--predictions"). Nothing there, something other than a regular
// file or a link (the caller's own rules decide those), or an empty file:
// "". A file this project wrote: the line to print, "<label> <path>:
// replacing it (written by <writer> at <time>)". Anyone else's, or a link to
// nothing: with `overwrite`, "<label> <path>: replacing it (--overwrite)";
// without, throws ddp::Error naming it, the registry and --overwrite.
std::string check_replaceable(const std::string& path, const std::string& label, bool overwrite);

// The name this process was started as ("ddp_train"), for writer strings.
std::string program_name();

}  // namespace ddp
