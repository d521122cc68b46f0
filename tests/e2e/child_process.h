// child_process.h: ddp_train started in the background, as the fault and
// signal suites drive it: a command in its own process group with its output
// in a file, polled for a line, signalled, and timed until it ends.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ddp::test {

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  std::vector<std::string> found;
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) found.push_back(line);
  return found;
}

// The processes whose parent is `parent` (from /proc/<pid>/stat).
inline std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> kids;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_text(e.path().string() + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 1));
    std::string state;
    long ppid = 0;
    fields >> state >> ppid;
    if (ppid == parent) kids.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return kids;
}

// True when `pid` is a running ddp_train that has a handler for `signal_number`
// (its /proc status: the name, and the bit in the caught-signals mask).
inline bool ddp_train_catches(pid_t pid, int signal_number) {
  const std::string status = read_text("/proc/" + std::to_string(pid) + "/status");
  if (status.find("Name:\tddp_train\n") == std::string::npos) return false;
  const size_t at = status.find("SigCgt:\t");
  if (at == std::string::npos) return false;
  const unsigned long long caught = std::strtoull(status.c_str() + at + 8, nullptr, 16);
  return (caught >> (signal_number - 1)) & 1ull;
}

// True when `pid` has `path` open (one of its /proc fd links points there).
inline bool has_open(pid_t pid, const std::string& path) {
  std::error_code ec;
  const std::filesystem::path fds = "/proc/" + std::to_string(pid) + "/fd";
  for (std::filesystem::directory_iterator it(fds, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code link_ec;
    if (std::filesystem::read_symlink(it->path(), link_ec) == path) return true;
  }
  return false;
}

// A command started in the background (its own process group, output to a
// file), so a test can signal it and time its end. The destructor kills a
// child that is still running, with its group and its own children (the
// ranks under mpiexec), so a failing test leaves nothing behind.
class Child {
 public:
  Child(const std::string& command, const std::string& log) : log_(log) {
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      const std::string line = "exec " + command + " >" + log + " 2>&1";
      execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0 && !status_) {
      for (pid_t kid : children_of(pid_)) kill(kid, SIGKILL);  // mpiexec's ranks sit in groups of their own
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  std::string output() const { return read_text(log_); }

  // True once the output holds `needle` (polled), false after timeout_s.
  bool wait_for_output(const std::string& needle, double timeout_s) const {
    const auto start = std::chrono::steady_clock::now();
    while (seconds_since(start) < timeout_s) {
      if (output().find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // The wait status once it ended, or nothing after timeout_s.
  std::optional<int> wait_exit(double timeout_s) {
    const auto start = std::chrono::steady_clock::now();
    while (!status_) {
      if (poll_exit()) break;
      if (seconds_since(start) > timeout_s) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status_;
  }

  // True once it has ended (reaps it without waiting).
  bool poll_exit() {
    int status = 0;
    if (!status_ && waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
    return status_.has_value();
  }

 private:
  pid_t pid_ = -1;
  std::string log_;
  std::optional<int> status_;
};

// The exit code, or -N for a process that signal N ended.
inline int exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : (WIFSIGNALED(status) ? -WTERMSIG(status) : -1000);
}

}  // namespace ddp::test
