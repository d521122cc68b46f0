// output_directory.h: the directory an output file goes into, checked
// before anything is written and named as the user gave it: "--metrics
// runs/m.jsonl: its directory runs is a file, not a directory", not a
// resolved absolute path or a bare errno text ("Permission denied" for a
// path through a file, "Too many levels of symbolic links" without a name).
#pragma once

#include <string>

namespace ddp {

// The directory part of `path` as given ("." for a bare name, "/" for a
// file at the root).
std::string given_directory_of(const std::string& path);

// Throws ddp::Error "<flag> <path>: its directory <dir> ..." when the
// directory of `path` does not exist, is not a directory (a file, a link
// that loops), or cannot take a new file (no write or search permission, a
// read-only filesystem).
void require_output_directory(const std::string& path, const std::string& flag);

}  // namespace ddp
