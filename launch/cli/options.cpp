// options.cpp: parse_options: every group of flags (flag_groups.h) read from
// the command line, then from --config, into one TrainConfig.
#include "launch/cli/options.h"

#include <boost/program_options.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "kernels/error.h"
#include "launch/cli/flag_groups.h"
#include "launch/cli/options_check.h"
#include "trainer/config/config_check.h"
#include "trainer/config/init_weights_shape.h"
#include "trainer/io/int_list.h"

namespace po = boost::program_options;

namespace ddp {

namespace {

// Boost.Program_options (1.74 at least) builds an error's what() by
// replacing each %placeholder% of its template until none is left, so a
// value that contains a placeholder (`--lr %value%`, a config key
// "%canonical_option%") loops forever while the message grows (found by
// tests/fuzz/fuzz_config.cpp). Before what() is called, every '%' in the
// substituted values becomes U+FF05 (a full-width percent sign), so no
// placeholder can reappear and every other message stays Boost's own. The
// values are protected members; a pointer to member formed through a derived
// class reads them without copying or slicing the exception.
struct PlaceholderValues : po::error_with_option_name {
  static const std::map<std::string, std::string>& of(const po::error_with_option_name& e) {
    return e.*(&PlaceholderValues::m_substitutions);
  }
};

void defuse_placeholders(po::error_with_option_name& e) {
  const std::map<std::string, std::string> values = PlaceholderValues::of(e);
  for (const auto& [key, value] : values) {
    if (value.find('%') == std::string::npos) continue;
    std::string safe;
    for (char ch : value) safe += ch == '%' ? std::string("\xef\xbc\x85") : std::string(1, ch);
    e.set_substitute(key, safe);
  }
}

// A flag's parsed value as text, whatever its type: the start-up agreement
// compares these between ranks, so two spellings of one value ("0.1",
// "1e-1") are one text. Throws for a type added without a case here (a test
// parses every flag's default).
std::string value_text(const boost::any& value, const std::string& flag) {
  if (value.empty()) return "(unset)";
  if (const auto* v = boost::any_cast<std::string>(&value)) return "'" + *v + "'";
  if (const auto* v = boost::any_cast<bool>(&value)) return *v ? "true" : "false";
  if (const auto* v = boost::any_cast<int>(&value)) return std::to_string(*v);
  if (const auto* v = boost::any_cast<int64_t>(&value)) return std::to_string(*v);
  if (const auto* v = boost::any_cast<uint64_t>(&value)) return std::to_string(*v);
  if (const auto* v = boost::any_cast<double>(&value)) {
    // The shortest text that reads back as the same double: equal texts are
    // equal values, and 0.1 reads as a user wrote it; a whole number as one.
    if (std::fabs(*v) < 1e15 && *v == std::floor(*v)) return std::to_string(static_cast<long long>(*v));
    std::string text;
    for (int digits = 1; digits <= 17; ++digits) {
      std::ostringstream out;
      out.precision(digits);
      out << *v;
      text = out.str();
      if (std::strtod(text.c_str(), nullptr) == *v) break;
    }
    return text;
  }
  throw Error("--" + flag + ": a flag of a type the start-up agreement cannot print (options.cpp: value_text)");
}

std::vector<Setting> flag_values(const po::options_description& all, const po::variables_map& vm) {
  std::vector<Setting> out;
  for (const auto& option : all.options()) {
    const std::string& flag = option->long_name();
    const auto it = vm.find(flag);
    out.push_back({"--" + flag, it == vm.end() ? "(unset)" : value_text(it->second.value(), flag)});
  }
  return out;
}

}  // namespace

ParsedOptions parse_options(int argc, const char* const argv[]) {
  ParsedOptions out;
  TrainConfig& c = out.config;
  FlagText t;

  po::options_description all(
      "ddp_train: data-parallel FP16 training of an MLP or a GPT, with dynamic loss scaling and ZeRO\n\n"
      "Usage: [mpirun -np N] ddp_train [options]\n");
  all.add(general_flags(c, t))
      .add(data_flags(c))
      .add(model_flags(t))
      .add(gpt_flags(c, t))
      .add(optimisation_flags(c, t))
      .add(loss_scaling_flags(c, t))
      .add(output_flags(c, t))
      .add(bench_flags(out.bench))
      .add(fault_flags(c, t));

  po::variables_map vm;
  try {
    // No positional arguments: a stray word (a value without its flag, a
    // second value) is an error naming it. Collected under a hidden name so
    // the message can quote it; --help does not list it.
    std::vector<std::string> stray;
    po::options_description parsed;
    parsed.add(all).add_options()("stray-words", po::value(&stray));
    po::positional_options_description every_word;
    every_word.add("stray-words", -1);
    po::store(po::command_line_parser(argc, argv).options(parsed).positional(every_word).run(), vm);
    if (!stray.empty() || vm.count("stray-words"))
      throw Error("unexpected argument '" + vm["stray-words"].as<std::vector<std::string>>().front() +
                  "': every option is --name value (see --help)");
    for (const auto& [name, value] : vm)
      if (!value.defaulted()) c.command_line_flags.insert(name);
    if (vm.count("config")) {
      const std::string path = vm["config"].as<std::string>();
      if (path.empty()) throw Error("--config: the path is empty");
      std::istringstream in(read_config_text(path));
      // Unknown keys are errors (allow_unregistered = false).
      const po::parsed_options from_file = po::parse_config_file(in, all, false);
      // One level only: a config that names another would be silently ignored.
      for (const po::option& o : from_file.options)
        if (o.string_key == "config")
          throw Error("--config " + path + ": a config file cannot name another config file (config = ...)");
      po::store(from_file, vm);  // stored second: the command line wins
    }
    po::notify(vm);
  } catch (po::error_with_option_name& e) {
    defuse_placeholders(e);
    throw Error(std::string(e.what()) + " (see --help)");
  } catch (const po::error& e) {
    throw Error(std::string(e.what()) + " (see --help)");
  }
  std::ostringstream help;
  help << all;
  out.help_text = help.str();
  out.show_help = vm.count("help") > 0;
  if (out.show_help) return out;
  out.flag_values = flag_values(all, vm);
  for (const auto& [name, value] : vm)
    if (!value.defaulted()) c.given_flags.insert(name);
  c.config_path = t.config_file;
  apply_run_flags(vm, t, c);
  apply_model_flags(vm, t, out.bench, c);
  apply_optimisation_flags(t, c);
  apply_bench_flags(out.bench);
  check_batch_flags(vm);
  check_zero_flags(vm);
  apply_fault_flags(t, c);
  apply_output_flags(t, c);
  if (vm.count("check-worlds") && !parse_int_list(t.check_worlds, 1, int64_t{1} << 20, out.check_worlds))
    throw Error("--check-worlds " + t.check_worlds + ": expected world sizes N[,N...], each from 1 to 2^20");
  // Which flags were given where first (the command line drops a config
  // file's flag it overrides), then the values of the config that results:
  // the check the Trainer makes of a config built in code.
  check_flags_as_a_whole(c, out.bench);
  // The shape Hugging Face weights give, once the flags make sense together (it reads the files).
  c.init_weights_note = bind_to_init_weights_shape(c);
  check_train_config(c);
  return out;
}

}  // namespace ddp
