// Which bindings a SPIR-V module may write (vulkan/shader_access.h): the recorder's barriers
// rest on it, so a binding is read-only only where the module says so.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "vulkan/shader_access.h"
#include "vulkan/shader_registry.h"

namespace kvc::vk {

namespace {

// A SPIR-V module of the instructions given, each {opcode, operands...}: the scan reads
// decorations, types and variables only, so nothing else need be there.
std::vector<uint32_t> module_of(std::initializer_list<std::vector<uint32_t>> instructions) {
  std::vector<uint32_t> words = {0x07230203u, 0x00010300u, 0, 100, 0};
  for (const std::vector<uint32_t>& instruction : instructions) {
    words.push_back(uint32_t(instruction.size()) << 16 | instruction[0]);
    words.insert(words.end(), instruction.begin() + 1, instruction.end());
  }
  return words;
}

constexpr uint32_t kDecorate = 71, kMemberDecorate = 72, kStruct = 30, kPointer = 32, kVariable = 59,
                   kRuntimeArray = 29, kArray = 28, kNonWritable = 24, kBinding = 33, kSet = 34, kStorageBuffer = 12;

std::vector<bool> written(const std::vector<uint32_t>& words, uint32_t bindings) {
  return written_bindings(words.data(), words.size(), bindings);
}

}  // namespace

TEST_CASE("shader access: readonly blocks, readonly variables, arrays of blocks, aliases and other sets") {
  // %10 = struct {2 members}, both NonWritable; %11 pointer to it; %20 variable at binding 0.
  // %12 = struct {1 member}, writable; %13 pointer; %21 at binding 1.
  // %14 = runtime array of %10; %15 pointer; %22 at binding 2 (an array of readonly blocks).
  // %16 = struct {2 members}, one NonWritable; %17 pointer; %23 at binding 3.
  // %24 = variable of %13 at binding 4, NonWritable on the variable itself.
  // %25 (readonly, %11) and %26 (writable, %13) both at binding 5: one alias writes.
  // %27 (writable) at binding 6 of set 1: not set 0, binding 6 unused there.
  // %18 = array of %12 (binding 7, via %19): an array of writable blocks.
  const std::vector<uint32_t> words = module_of({
      {kDecorate, 20, kBinding, 0},       {kDecorate, 20, kSet, 0},
      {kDecorate, 21, kBinding, 1},       {kDecorate, 22, kBinding, 2},
      {kDecorate, 23, kBinding, 3},       {kDecorate, 24, kBinding, 4},
      {kDecorate, 24, kNonWritable},      {kDecorate, 25, kBinding, 5},
      {kDecorate, 26, kBinding, 5},       {kDecorate, 27, kBinding, 6},
      {kDecorate, 27, kSet, 1},           {kDecorate, 28, kBinding, 7},
      {kMemberDecorate, 10, 0, kNonWritable}, {kMemberDecorate, 10, 1, kNonWritable},
      {kMemberDecorate, 16, 1, kNonWritable},
      {kStruct, 10, 1, 1},                {kPointer, 11, kStorageBuffer, 10},
      {kStruct, 12, 1},                   {kPointer, 13, kStorageBuffer, 12},
      {kRuntimeArray, 14, 10},            {kPointer, 15, kStorageBuffer, 14},
      {kStruct, 16, 1, 1},                {kPointer, 17, kStorageBuffer, 16},
      {kArray, 18, 12, 3},                {kPointer, 19, kStorageBuffer, 18},
      {kVariable, 11, 20, kStorageBuffer}, {kVariable, 13, 21, kStorageBuffer},
      {kVariable, 15, 22, kStorageBuffer}, {kVariable, 17, 23, kStorageBuffer},
      {kVariable, 13, 24, kStorageBuffer}, {kVariable, 11, 25, kStorageBuffer},
      {kVariable, 13, 26, kStorageBuffer}, {kVariable, 13, 27, kStorageBuffer},
      {kVariable, 19, 28, kStorageBuffer},
  });
  const std::vector<bool> expected = {false, true, false, true, false, true, true, true};
  CHECK(written(words, 8) == expected);
  // Bindings past the module's are written (the shader may not use them, but nothing says so).
  CHECK(written(words, 10) == std::vector<bool>{false, true, false, true, false, true, true, true, true, true});
}

TEST_CASE("shader access: a malformed module counts every binding as written") {
  // Two instructions: words 5-8 (Binding) and 9-11 (NonWritable).
  const std::vector<uint32_t> words = module_of({{kDecorate, 20, kBinding, 0}, {kDecorate, 20, kNonWritable}});
  CHECK(written(words, 1) == std::vector<bool>{false});
  std::vector<uint32_t> no_words = words;
  no_words[9] = 0u << 16 | kDecorate;
  CHECK(written(no_words, 2) == std::vector<bool>{true, true});
  std::vector<uint32_t> overrun = words;
  overrun[9] = 4u << 16 | kDecorate;  // one word more than the module has
  CHECK(written(overrun, 1) == std::vector<bool>{true});
  const std::vector<uint32_t> header_only(words.begin(), words.begin() + 3);
  CHECK(written(header_only, 1) == std::vector<bool>{true});
}

TEST_CASE("shader access: a wrong magic number, decoration groups and a cyclic type count as written") {
  // Binding 0 readonly through its variable; binding 1 a readonly block behind a pointer.
  std::vector<uint32_t> words = module_of({{kDecorate, 20, kBinding, 0}, {kDecorate, 20, kNonWritable},
                                           {kDecorate, 21, kBinding, 1}, {kMemberDecorate, 10, 0, kNonWritable},
                                           {kStruct, 10, 1}, {kPointer, 11, kStorageBuffer, 10},
                                           {kVariable, 11, 21, kStorageBuffer}});
  CHECK(written(words, 2) == std::vector<bool>{false, false});
  std::vector<uint32_t> wrong_magic = words;
  wrong_magic[0] = 0x03022307u;  // the bytes swapped
  CHECK(written(wrong_magic, 2) == std::vector<bool>{true, true});
  constexpr uint32_t kDecorationGroup = 73;
  std::vector<uint32_t> grouped = words;
  grouped.push_back(2u << 16 | kDecorationGroup);
  grouped.push_back(30);
  CHECK(written(grouped, 2) == std::vector<bool>{true, true});
  // %14 = runtime array of itself: binding 2's type chain never ends; the others are unaffected.
  std::vector<uint32_t> cyclic = module_of({{kDecorate, 20, kBinding, 0}, {kDecorate, 20, kNonWritable},
                                           {kDecorate, 22, kBinding, 2}, {kRuntimeArray, 14, 14},
                                           {kPointer, 15, kStorageBuffer, 14}, {kVariable, 15, 22, kStorageBuffer}});
  CHECK(written(cyclic, 3) == std::vector<bool>{false, true, true});
}

namespace {

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// A shader's GLSL with the files it includes (from shaders/include, where the build looks).
std::string shader_source(const std::string& name) {
  const std::string dir = KVC_SHADER_SOURCE_DIR;
  std::string text = read_text(dir + "/" + name + ".comp"), expanded;
  const std::regex include_line(R"re(#include\s+"([^"]+)")re");
  std::sregex_iterator it(text.begin(), text.end(), include_line), end;
  for (; it != end; ++it) expanded += read_text(dir + "/include/" + (*it)[1].str()) + "\n";
  return text + "\n" + expanded;
}

// What the GLSL says, an oracle beside the SPIR-V: per binding, whether a declaration of it
// lacks `readonly` (bindings never declared count as written, as the scan has them).
std::vector<bool> declared_written(const std::string& source) {
  // Any layout qualifiers around the binding (std430, set = 0, ...), any qualifiers before `buffer`.
  const std::regex declaration(R"re(layout\s*\([^)]*\bbinding\s*=\s*(\d+)[^)]*\)\s*((?:[a-z]+\s+)*)buffer\b)re");
  std::vector<int> readers, writers;
  for (std::sregex_iterator it(source.begin(), source.end(), declaration), end; it != end; ++it) {
    const size_t binding = std::stoul((*it)[1].str());
    readers.resize(std::max(readers.size(), binding + 1));
    writers.resize(readers.size());
    ++((*it)[2].str().find("readonly") != std::string::npos ? readers : writers)[binding];
  }
  std::vector<bool> written(readers.size());
  for (size_t binding = 0; binding < written.size(); ++binding) written[binding] = writers[binding] > 0 || readers[binding] == 0;
  return written;
}

}  // namespace

TEST_CASE("shader access: every embedded shader's bindings as its GLSL declares them") {
  size_t shaders = 0, read_only = 0;
  for (const ShaderModuleWords& shader : embedded_shaders()) {
    INFO(shader.name);
    const std::vector<bool> expected = declared_written(shader_source(shader.name));
    REQUIRE(!expected.empty());  // every shader binds a buffer, and its source was found
    CHECK(written_bindings(shader.words, shader.word_count, uint32_t(expected.size())) == expected);
    ++shaders;
    read_only += size_t(std::count(expected.begin(), expected.end(), false));
  }
  MESSAGE(shaders, " shaders, ", read_only, " read-only bindings");
  CHECK(shaders >= 40);
  CHECK(read_only >= 100);
}

}  // namespace kvc::vk
