// test_readme_map.cpp: the README's map of concepts to files must name files
// that exist (STYLE.md: a hand-written map drifts unless a test checks it).
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

bool exists_or_glob(const fs::path& root, const std::string& rel) {
  const auto star = rel.find('*');
  if (star == std::string::npos) return fs::exists(root / rel);
  const fs::path dir = root / fs::path(rel).parent_path();
  const std::string name = fs::path(rel).filename().string();
  const std::regex re(std::regex_replace(name, std::regex("\\*"), ".*"));
  if (!fs::is_directory(dir)) return false;
  for (const auto& e : fs::directory_iterator(dir))
    if (std::regex_match(e.path().filename().string(), re)) return true;
  return false;
}

TEST(ReadmeMap, EveryPathExists) {
  const fs::path root = DDP_SOURCE_DIR;
  std::ifstream in(root / "README.md");
  ASSERT_TRUE(in) << "README.md not found";
  std::string line;
  bool in_map = false;
  int checked = 0;
  const std::regex code("`([^`]+)`");
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_map = line.find("Map of concepts") != std::string::npos;
    if (!in_map || line.rfind("| ", 0) != 0) continue;
    const std::string files = line.substr(line.find('|', 2) + 1);  // second column onward
    for (std::sregex_iterator it(files.begin(), files.end(), code), end; it != end; ++it) {
      const std::string token = (*it)[1];
      if (token.find('/') == std::string::npos) continue;  // not a path (e.g. a test name)
      for (const std::string& p : expand(token)) {
        EXPECT_TRUE(exists_or_glob(root, p)) << "README map names a missing file: " << p;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 20) << "the README map was not found or is nearly empty";
}

}  // namespace
