// The SPIR-V modules compiled from shaders/ at build time (see cmake/EmbedShaders.cmake).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvc::vk {

struct ShaderModuleWords {
  const char* name;  // the shader file's stem, e.g. "attention_decode"
  const uint32_t* words;
  size_t word_count;
};

const std::vector<ShaderModuleWords>& embedded_shaders();

// Whether this build embeds `name` (the *_coopmat shaders need glslang >= 13 at build time).
inline bool has_embedded_shader(const std::string& name) {
  for (const ShaderModuleWords& shader : embedded_shaders())
    if (name == shader.name) return true;
  return false;
}

}  // namespace kvc::vk
