// test_include_graph.cpp: the architecture test. The folders of code form one
// order (tests/architecture/folder_order.txt); every #include "..." of kernels/, comm/,
// trainer/ and launch/ must run down it (a file includes its own folder or
// one above), and no headers may include each other in a cycle. It reads the
// sources themselves, so a new include against the order fails here, with
// the file, the line and the folders named.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {
namespace fs = std::filesystem;

const fs::path kRoot = DDP_SOURCE_DIR;
const char* const kTopFolders[] = {"kernels", "comm", "trainer", "launch"};

// The order of tests/architecture/folder_order.txt: folder -> rank (0 lowest).
std::map<std::string, int> read_folder_order(std::vector<std::string>& problems) {
  std::ifstream in(kRoot / "tests" / "architecture" / "folder_order.txt");
  if (!in) problems.push_back("tests/architecture/folder_order.txt cannot be read");
  std::map<std::string, int> rank;
  std::string line;
  int next = 0;
  while (std::getline(in, line)) {
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (line.empty() || line[0] == '#') continue;
    if (!fs::is_directory(kRoot / line)) problems.push_back("folder_order.txt names " + line + ": not a folder");
    if (!rank.emplace(line, next++).second) problems.push_back("folder_order.txt names " + line + " twice");
  }
  return rank;
}

bool is_code(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".h" || ext == ".cpp" || ext == ".cu" || ext == ".cuh";
}

// Every file of code under the top folders, relative to the root.
std::vector<std::string> code_files() {
  std::vector<std::string> files;
  for (const char* top : kTopFolders) {
    if (!fs::is_directory(kRoot / top)) continue;
    for (const auto& e : fs::recursive_directory_iterator(kRoot / top))
      if (e.is_regular_file() && is_code(e.path())) files.push_back(fs::relative(e.path(), kRoot).generic_string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string folder_of(const std::string& file) { return fs::path(file).parent_path().generic_string(); }

struct Include {
  std::string target;  // relative to the root
  int line = 0;
};

// The project's own includes of `file`: quoted paths that name a file under
// the root (the include directory) or beside `file`; others are not ours.
std::vector<Include> includes_of(const std::string& file) {
  static const std::regex quoted_include(R"re(^\s*#\s*include\s+"([^"]+)")re");
  std::ifstream in(kRoot / file);
  std::vector<Include> out;
  std::string text;
  std::smatch m;
  for (int line = 1; std::getline(in, text); ++line) {
    if (!std::regex_search(text, m, quoted_include)) continue;
    const std::string path = m[1];
    if (fs::is_regular_file(kRoot / path)) {
      out.push_back({path, line});
    } else {
      const fs::path beside = fs::path(folder_of(file)) / path;
      if (fs::is_regular_file(kRoot / beside)) out.push_back({beside.lexically_normal().generic_string(), line});
    }
  }
  return out;
}

TEST(IncludeGraph, FolderOrderIsReadable) {
  std::vector<std::string> problems;
  const std::map<std::string, int> rank = read_folder_order(problems);
  for (const std::string& p : problems) ADD_FAILURE() << p;
  EXPECT_GE(rank.size(), 10u) << "folder_order.txt lists too few folders to be the real order";
}

TEST(IncludeGraph, EveryFolderOfCodeIsDeclared) {
  std::vector<std::string> problems;
  const std::map<std::string, int> rank = read_folder_order(problems);
  std::set<std::string> undeclared;
  const std::vector<std::string> files = code_files();
  ASSERT_GT(files.size(), 100u) << "too few source files found under " << kRoot;
  for (const std::string& f : files)
    if (!rank.count(folder_of(f))) undeclared.insert(folder_of(f) + " (e.g. " + f + ")");
  for (const std::string& u : undeclared)
    ADD_FAILURE() << "a folder of code not in tests/architecture/folder_order.txt: " << u;
}

TEST(IncludeGraph, IncludesRunDownTheFolderOrder) {
  std::vector<std::string> problems;
  const std::map<std::string, int> rank = read_folder_order(problems);
  ASSERT_TRUE(problems.empty()) << problems.front();
  int checked = 0;
  for (const std::string& file : code_files()) {
    const auto from = rank.find(folder_of(file));
    if (from == rank.end()) continue;  // EveryFolderOfCodeIsDeclared reports it
    for (const Include& inc : includes_of(file)) {
      ++checked;
      const std::string to_folder = folder_of(inc.target);
      const auto to = rank.find(to_folder);
      if (to == rank.end()) {
        ADD_FAILURE() << file << ":" << inc.line << " includes " << inc.target << ", a folder not in the order";
      } else if (to->second > from->second) {
        ADD_FAILURE() << file << ":" << inc.line << " includes " << inc.target << ": " << to_folder << " comes after "
                      << from->first << " in tests/architecture/folder_order.txt (an include up the order)";
      }
    }
  }
  EXPECT_GT(checked, 500) << "too few includes found: is the include pattern still right?";
}

// Within a folder the order allows any include; headers must still not
// include each other in a cycle (#pragma once would hide it until a type is
// used before it is declared).
TEST(IncludeGraph, NoHeadersIncludeEachOtherInACycle) {
  std::map<std::string, std::vector<std::string>> edges;
  for (const std::string& file : code_files())
    for (const Include& inc : includes_of(file)) edges[file].push_back(inc.target);
  enum class Mark { None, Open, Done };
  std::map<std::string, Mark> mark;
  std::vector<std::string> path;
  std::vector<std::string> cycles;
  // Depth first; an edge to a file still open closes a cycle.
  std::function<void(const std::string&)> visit = [&](const std::string& f) {
    mark[f] = Mark::Open;
    path.push_back(f);
    for (const std::string& t : edges[f]) {
      if (mark[t] == Mark::Open) {
        std::string text;
        for (auto it = std::find(path.begin(), path.end(), t); it != path.end(); ++it) text += *it + " -> ";
        cycles.push_back(text + t);
      } else if (mark[t] == Mark::None) {
        visit(t);
      }
    }
    path.pop_back();
    mark[f] = Mark::Done;
  };
  for (const auto& e : edges)
    if (mark[e.first] == Mark::None) visit(e.first);
  for (const std::string& c : cycles) ADD_FAILURE() << "an include cycle: " << c;
}

}  // namespace
