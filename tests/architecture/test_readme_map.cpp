// test_readme_map.cpp: the README's map of concepts to files must name files
// that exist, and name every source file (STYLE.md: a hand-written map
// drifts unless a test checks it).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {
namespace fs = std::filesystem;

// `a/b.{h,cpp}` -> a/b.h, a/b.cpp; `a/b` -> a/b.h (a stem names its header).
std::vector<std::string> expand(const std::string& p) {
  const auto brace = p.find('{');
  if (brace == std::string::npos) return {p.find('.') == std::string::npos ? p + ".h" : p};
  std::vector<std::string> out;
  const std::string head = p.substr(0, brace), body = p.substr(brace + 1, p.find('}') - brace - 1);
  size_t start = 0;
  while (start <= body.size()) {
    const size_t comma = body.find(',', start);
    out.push_back(head + body.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// `cuda_*.cu` -> the regex cuda_[^/]*\.cu (a star stays within a folder).
std::regex glob_regex(const std::string& glob) {
  const std::string dots_escaped = std::regex_replace(glob, std::regex("\\."), "\\.");
  return std::regex(std::regex_replace(dots_escaped, std::regex("\\*"), "[^/]*"));
}

// A path, or a glob whose stars may stand in folder names too
// (`launch/ddp_tools/*/__init__.py`), names at least one file.
bool exists_or_glob(const fs::path& root, const std::string& rel) {
  const auto star = rel.find('*');
  if (star == std::string::npos) return fs::exists(root / rel);
  const size_t slash = rel.rfind('/', star);  // the folders before the first star
  const fs::path dir = slash == std::string::npos ? root : root / rel.substr(0, slash);
  if (!fs::is_directory(dir)) return false;
  const std::regex re = glob_regex(rel);
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (std::regex_match(fs::relative(e.path(), root).generic_string(), re)) return true;
  return false;
}

// The paths the map's rows name (second column onward), braces expanded.
std::vector<std::string> map_paths(const fs::path& root) {
  std::ifstream in(root / "README.md");
  std::vector<std::string> paths;
  std::string line;
  bool in_map = false;
  const std::regex code("`([^`]+)`");
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_map = line.find("Map of concepts") != std::string::npos;
    if (!in_map || line.rfind("| ", 0) != 0) continue;
    const std::string files = line.substr(line.find('|', 2) + 1);
    for (std::sregex_iterator it(files.begin(), files.end(), code), end; it != end; ++it) {
      const std::string token = (*it)[1];
      if (token.find('/') == std::string::npos) continue;  // not a path (e.g. a test name)
      if (token.back() == '/') {                           // a folder: covers what it holds
        paths.push_back(token);
        continue;
      }
      for (const std::string& p : expand(token)) paths.push_back(p);
    }
  }
  return paths;
}

// A named path covers `rel`: the same file, a folder holding it, or a glob
// (`kernels/cuda/cuda_*.cu`) matching it.
bool covered(const std::vector<std::string>& named, const std::string& rel) {
  for (const std::string& n : named) {
    if (n == rel) return true;
    if (n.back() == '/' && rel.rfind(n, 0) == 0) return true;
    if (n.find('*') != std::string::npos && std::regex_match(rel, glob_regex(n))) return true;
  }
  return false;
}

TEST(ReadmeMap, EveryPathExists) {
  const fs::path root = DDP_SOURCE_DIR;
  ASSERT_TRUE(fs::exists(root / "README.md")) << "README.md not found";
  int checked = 0;
  for (const std::string& p : map_paths(root)) {
    EXPECT_TRUE(exists_or_glob(root, p)) << "README map names a missing file: " << p;
    ++checked;
  }
  EXPECT_GT(checked, 20) << "the README map was not found or is nearly empty";
}

// The other direction: every source file of kernels/, comm/, trainer/ and
// launch/ (C++, CUDA, Python, shell) is named by the map or covered by a
// folder or glob it names, so a new file cannot hide from the map.
// launch/results/ holds measurements, not sources.
TEST(ReadmeMap, EverySourceFileIsNamed) {
  const fs::path root = DDP_SOURCE_DIR;
  const std::vector<std::string> named = map_paths(root);
  ASSERT_GT(named.size(), 20u) << "the README map was not found or is nearly empty";
  const std::regex source(".*\\.(h|cpp|cu|cuh|py|sh)");
  int seen = 0;
  for (const char* top : {"kernels", "comm", "trainer", "launch"}) {
    for (auto it = fs::recursive_directory_iterator(root / top); it != fs::recursive_directory_iterator(); ++it) {
      const std::string rel = fs::relative(it->path(), root).generic_string();
      if (it->is_directory() && (rel == "launch/results" || it->path().filename() == "__pycache__")) {
        it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file() || !std::regex_match(rel, source)) continue;
      ++seen;
      EXPECT_TRUE(covered(named, rel)) << "README map does not name " << rel << " (add it to the row of its concept)";
    }
  }
  EXPECT_GT(seen, 100) << "the source tree was not found under " << root;
}

}  // namespace
