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

}  // namespace kvc::vk
