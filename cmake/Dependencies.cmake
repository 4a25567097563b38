# Every dependency comes from Debian 12 packages (see README). libkvc never links libvulkan:
# volk loads it at run time, so programs start on machines without a Vulkan loader.
find_path(KVC_VULKAN_INCLUDE_DIR vulkan/vulkan.h REQUIRED)            # libvulkan-dev (headers only)
find_path(KVC_VOLK_DIR volk.c PATHS /usr/include REQUIRED)            # libvulkan-volk-dev
find_file(KVC_VKFFT_HEADER vkFFT.h PATHS /usr/include REQUIRED)       # libvkfft-dev
find_program(KVC_GLSLANG_VALIDATOR glslangValidator REQUIRED)         # glslang-tools
include(${CMAKE_CURRENT_LIST_DIR}/CoopmatGlslang.cmake)
find_package(Threads REQUIRED)

# glslang-dev and spirv-tools ship static archives only; VkFFT compiles its GLSL at run time
# through them. Link order from ../shared/GPU.md.
set(KVC_GLSLANG_LIBS glslang MachineIndependent OSDependent GenericCodeGen OGLCompiler SPIRV
    glslang-default-resource-limits SPIRV-Tools-opt SPIRV-Tools)
set(KVC_GLSLANG_LIBRARIES "")
foreach(lib ${KVC_GLSLANG_LIBS})
  find_library(KVC_LIB_${lib} NAMES lib${lib}.a ${lib} REQUIRED)
  list(APPEND KVC_GLSLANG_LIBRARIES ${KVC_LIB_${lib}})
endforeach()

# vkFFT.h 1.2.26 does not compile against glslang 12 as shipped: its glslang_resource_t
# initializer lacks the nine mesh/task *_ext fields glslang 12 added. Patch a copy in the
# build tree with glslang's defaults (../shared/GPU.md); the sources keep no copy.
file(READ ${KVC_VKFFT_HEADER} KVC_VKFFT_TEXT)
string(REPLACE "/* .maxDualSourceDrawBuffersEXT = */ 1,"
       "256, 256, 128, 128, 128, 128, 128, 128, 4, /* glslang 12 mesh/task limits */\n/* .maxDualSourceDrawBuffersEXT = */ 1,"
       KVC_VKFFT_TEXT "${KVC_VKFFT_TEXT}")
file(WRITE ${CMAKE_BINARY_DIR}/vkfft_patched/vkFFT.h "${KVC_VKFFT_TEXT}")
set(KVC_VKFFT_INCLUDE_DIR ${CMAKE_BINARY_DIR}/vkfft_patched)
