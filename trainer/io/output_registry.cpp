// output_registry.cpp
#include "trainer/io/output_registry.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "trainer/io/atomic_file.h"

namespace fs = std::filesystem;

namespace ddp {
namespace {

// What identifies a file's present content without reading it.
struct FileStamp {
  uint64_t ino = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;
};

FileStamp stamp_of(const struct stat& st) {
  FileStamp s;
  s.ino = static_cast<uint64_t>(st.st_ino);
  s.size = static_cast<int64_t>(st.st_size);
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return s;
}

// The stamp of the regular file at `path` (through links), if it is one.
std::optional<FileStamp> regular_file_stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return stamp_of(st);
}

// `path` absolute with its links resolved, as records hold it.
std::string real_path(const std::string& path) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? path : canonical.string();
}

// A registry line: its stamp and path, or nullopt for a torn or foreign one.
struct Entry {
  FileStamp stamp;
  std::string path;
  bool append = false;
};

std::optional<Entry> entry_in(const nlohmann::json& line) {
  if (!line.is_object()) return std::nullopt;
  for (const char* key : {"ino", "size", "mtime_ns"})
    if (!line.contains(key) || !line[key].is_number_integer()) return std::nullopt;
  if (!line.contains("path") || !line["path"].is_string()) return std::nullopt;
  Entry e;
  e.stamp.ino = line["ino"].get<uint64_t>();
  e.stamp.size = line["size"].get<int64_t>();
  e.stamp.mtime_ns = line["mtime_ns"].get<int64_t>();
  e.path = line["path"].get<std::string>();
  e.append = line.contains("append") && line["append"].is_boolean() && line["append"].get<bool>();
  return e;
}

// Whether the file now at `real` (stamp `now`) is what `e` recorded: the
// same inode, size and time; or, for an append-only output, the same path
// and inode, no smaller and no older.
bool matches(const Entry& e, const FileStamp& now, const std::string& real) {
  if (e.stamp.ino != now.ino) return false;
  if (e.append) return e.path == real && e.stamp.size <= now.size && e.stamp.mtime_ns <= now.mtime_ns;
  return e.stamp.size == now.size && e.stamp.mtime_ns == now.mtime_ns;
}

std::string string_in(const nlohmann::json& line, const char* key) {
  return line.contains(key) && line[key].is_string() ? line[key].get<std::string>() : std::string("?");
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm {};
  ::gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// All of a file's bytes ("" when it cannot be read).
std::string read_all(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  FdCloser closer(fd);
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

// Calls fn(parsed line, line) for every line of the registry text that parses.
template <typename Fn>
void for_each_line(const std::string& text, Fn fn) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    const nlohmann::json parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_discarded()) fn(parsed, line);
  }
}

// The registry's lock, held while this lives (none where the lock file
// cannot be opened: a reader then reads unlocked, at worst a torn line).
class RegistryLock {
 public:
  RegistryLock(const std::string& registry, int operation) {
    const std::string lock_path = fs::path(registry).parent_path() / "outputs.lock";
    fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) fd_ = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return;
    while (::flock(fd_, operation) != 0) {
      if (errno != EINTR) break;
    }
  }
  ~RegistryLock() {
    if (fd_ >= 0) ::close(fd_);  // the lock goes with it
  }
  RegistryLock(const RegistryLock&) = delete;
  RegistryLock& operator=(const RegistryLock&) = delete;

 private:
  int fd_ = -1;
};

// Rewrites the locked registry with only its live entries, the last per
// file, the newest kRegistryMaxEntries: to a temporary file renamed over
// it, so a crash or a full disk leaves the old registry whole.
void compact(const std::string& registry) {
  std::map<std::pair<uint64_t, std::string>, size_t> last_of;  // (inode, path) -> its index in `kept`
  std::deque<std::string> kept;
  std::vector<bool> superseded;
  for_each_line(read_all(registry), [&](const nlohmann::json& parsed, const std::string& line) {
    const std::optional<Entry> e = entry_in(parsed);
    if (!e) return;
    const std::optional<FileStamp> now = regular_file_stamp(e->path);
    if (!now || !matches(*e, *now, e->path)) return;
    const auto key = std::make_pair(e->stamp.ino, e->path);
    if (const auto it = last_of.find(key); it != last_of.end()) superseded[it->second] = true;
    last_of[key] = kept.size();
    kept.push_back(line);
    superseded.push_back(false);
  });
  std::vector<const std::string*> live;
  for (size_t i = 0; i < kept.size(); ++i)
    if (!superseded[i]) live.push_back(&kept[i]);
  const size_t first = live.size() > kRegistryMaxEntries ? live.size() - kRegistryMaxEntries : 0;
  std::string text;
  for (size_t i = first; i < live.size(); ++i) text += *live[i] + "\n";
  const std::string temp = registry + kTempFileMarker + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  FdCloser closer(fd);
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (closer.close_now() != 0 || !written || ::rename(temp.c_str(), registry.c_str()) != 0) ::unlink(temp.c_str());
}

void note_once(const std::string& path, const std::string& registry, const std::string& why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr, "note: cannot record %s in %s (%s): a later run will ask for --overwrite to replace it\n",
                 path.c_str(), registry.c_str(), why.c_str());
  });
}

// The line appended for the file `st` at `path`.
std::string record_line(const std::string& path, const struct stat& st, const std::string& writer, bool append) {
  nlohmann::json line;
  line["dev"] = static_cast<uint64_t>(st.st_dev);  // for people reading it; not matched
  line["ino"] = static_cast<uint64_t>(st.st_ino);
  line["size"] = static_cast<int64_t>(st.st_size);
  line["mtime_ns"] = stamp_of(st).mtime_ns;
  line["path"] = real_path(path);
  line["writer"] = writer;
  line["time"] = utc_now();
  if (append) line["append"] = true;
  // nlohmann's dump sorts keys; readers do not depend on their order.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// Appends `line` to the locked registry: after a newline if the last line
// was left torn, so a torn line never swallows this one. Returns errno, 0.
int append_line(const std::string& registry, std::string line) {
  const int fd = ::open(registry.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  FdCloser closer(fd);
  struct stat st {};
  char last = '\n';
  if (::fstat(fd, &st) == 0 && st.st_size > 0 && ::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n')
    line.insert(line.begin(), '\n');
  if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return errno != 0 ? errno : EIO;
  return closer.close_now();
}

}  // namespace

std::string output_registry_path() {
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state != nullptr && state[0] == '/') return std::string(state) + "/ddp_train/outputs.jsonl";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') return std::string(home) + "/.local/state/ddp_train/outputs.jsonl";
  return "";
}

std::string program_name() { return program_invocation_short_name; }

void record_output(const std::string& path, const std::string& writer, bool append) noexcept {
  try {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    const std::string registry = output_registry_path();
    if (registry.empty()) return note_once(path, "a registry", "neither XDG_STATE_HOME nor HOME is set");
    const std::string line = record_line(path, st, writer, append);
    const fs::path dir = fs::path(registry).parent_path();
    std::error_code ec;
    // Who wrote what is the user's own business: the directory is theirs alone.
    if (fs::create_directories(dir, ec)) fs::permissions(dir, fs::perms::owner_all, ec);
    if (ec) return note_once(path, registry, ec.message());
    const RegistryLock lock(registry, LOCK_EX);
    if (const int err = append_line(registry, line); err != 0) return note_once(path, registry, std::strerror(err));
    struct stat registry_st {};
    if (::stat(registry.c_str(), &registry_st) == 0 && registry_st.st_size > kRegistryCompactBytes) compact(registry);
  } catch (const std::exception& e) {  // out of memory: the output is written, only its record is lost
    note_once(path, output_registry_path(), e.what());
  }
}

std::optional<OutputRecord> owner_of(const std::string& path) {
  const std::optional<FileStamp> now = regular_file_stamp(path);
  const std::string registry = output_registry_path();
  if (!now || registry.empty()) return std::nullopt;
  const std::string real = real_path(path);
  const RegistryLock lock(registry, LOCK_SH);
  std::optional<OutputRecord> found;
  for_each_line(read_all(registry), [&](const nlohmann::json& parsed, const std::string&) {
    const std::optional<Entry> e = entry_in(parsed);
    if (e && matches(*e, *now, real)) found = OutputRecord{string_in(parsed, "writer"), string_in(parsed, "time")};
  });
  return found;
}

std::string not_ours_text(const std::string& path, const std::string& label) {
  const std::string registry = output_registry_path();
  return label + " " + path + ": exists and is not a file ddp_train wrote (no record of it in " +
         (registry.empty() ? std::string("a registry: neither XDG_STATE_HOME nor HOME is set") : registry) + ")";
}

std::string check_replaceable(const std::string& path, const std::string& label, bool overwrite) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "";
  const bool dangling_link = S_ISLNK(st.st_mode) && ::stat(path.c_str(), &st) != 0;
  if (!dangling_link && (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)) return "";
  const std::string named = label + " " + path;
  if (!dangling_link) {
    if (const std::optional<OutputRecord> record = owner_of(path))
      return named + ": replacing it (written by " + record->writer + " at " + record->time + ")";
  }
  if (overwrite) return named + ": replacing it (--overwrite)";
  const std::string what = dangling_link ? named + ": a symbolic link to nothing, which the write would replace"
                                         : not_ours_text(path, label);
  throw Error(what + "; not replacing it: pass --overwrite or choose another path");
}

}  // namespace ddp
