# Helpers shared by the layer folders. One static library per top-level folder (docs/architecture.md
# §1), named shardplan_<layer> with the alias shardplan::<layer>; the layering is whatever DEPS each
# folder names.
#
#   shardplan_add_library(NAME tensor DEPS shardplan::kernels nlohmann_json::nlohmann_json
#                         [DIR path] [DEFINITIONS FOO=1] [EXCLUDE_DIRS cli])
# DIR (relative to the project root) defaults to NAME.

# Warnings for code we own. CUDA sources get them through nvcc's host-compiler pass-through.
# SHARDPLAN_WERROR (CI's test build) turns them into errors for our code only: third-party headers
# come in through -isystem and stay quiet.
function(shardplan_target_warnings target)
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "INTERFACE_LIBRARY")
    return()
  endif()
  set(_cxx -Wall -Wextra)
  set(_cuda -Xcompiler=-Wall,-Wextra)
  if(SHARDPLAN_WERROR)
    list(APPEND _cxx -Werror)
    set(_cuda -Xcompiler=-Wall,-Wextra,-Werror)
  endif()
  target_compile_options(${target} PRIVATE
    "$<$<COMPILE_LANGUAGE:CXX>:${_cxx}>"
    "$<$<COMPILE_LANGUAGE:CUDA>:${_cuda}>")
endfunction()

# Batches a library's sources when SHARDPLAN_UNITY_BUILD is on. A batch is one translation unit, so
# file-local (anonymous-namespace) names must be unique within a library; sources that cannot share
# one (each model family's file defines its own parse/build) set SKIP_UNITY_BUILD_INCLUSION.
function(shardplan_unity_build target batch_size)
  if(SHARDPLAN_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${batch_size})
  endif()
endfunction()

# A tri-state cache option: AUTO (the default: use it when found), ON (required), OFF.
function(shardplan_tristate_option name doc)
  set(${name} AUTO CACHE STRING "${doc}")
  set_property(CACHE ${name} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${name}}" _value)
  if(_value STREQUAL "AUTO")
    set(_mode AUTO)
  elseif(_value MATCHES "^(ON|YES|TRUE|Y|1)$")
    set(_mode ON)
  elseif(_value MATCHES "^(OFF|NO|FALSE|N|0)$")
    set(_mode OFF)
  else()
    message(FATAL_ERROR "${name}='${${name}}': expected AUTO, ON or OFF")
  endif()
  set(${name}_MODE ${_mode} PARENT_SCOPE)
endfunction()

# Sources are found by GLOB_RECURSE CONFIGURE_DEPENDS on purpose: several engineers add files to the
# layers at the same time, and a new .cpp must not need an edit of a shared CMake file (which would
# collide). CONFIGURE_DEPENDS re-runs the glob at build time, so a new file triggers a re-configure.
# A folder with no sources yet becomes an INTERFACE library, so dependants can always link
# shardplan::<layer>; once a .cpp appears it turns into a static library on the next build.
function(shardplan_add_library)
  cmake_parse_arguments(ARG "" "NAME;DIR" "DEPS;DEFINITIONS;EXCLUDE_DIRS" ${ARGN})
  if(NOT ARG_NAME)
    message(FATAL_ERROR "shardplan_add_library: NAME is required")
  endif()
  if(NOT ARG_DIR)
    set(ARG_DIR "${ARG_NAME}")
  endif()
  set(_dir "${PROJECT_SOURCE_DIR}/${ARG_DIR}")
  set(_patterns "${_dir}/*.cpp")
  if(SHARDPLAN_HAVE_CUDA)
    list(APPEND _patterns "${_dir}/*.cu")  # .cu only with CUDA on: the .cpp twin is the CPU path.
  endif()
  file(GLOB_RECURSE _sources CONFIGURE_DEPENDS ${_patterns})
  foreach(_excluded IN LISTS ARG_EXCLUDE_DIRS)
    list(FILTER _sources EXCLUDE REGEX "^${_dir}/${_excluded}/")
  endforeach()

  set(_target shardplan_${ARG_NAME})
  if(_sources)
    add_library(${_target} STATIC ${_sources})
    set(_scope PUBLIC)
    shardplan_unity_build(${_target} 8)
    shardplan_target_warnings(${_target})
  else()
    add_library(${_target} INTERFACE)
    set(_scope INTERFACE)
  endif()
  add_library(shardplan::${ARG_NAME} ALIAS ${_target})

  # Includes are spelled from the repository root: #include "tensor/tensor.h".
  target_include_directories(${_target} ${_scope} "${PROJECT_SOURCE_DIR}")
  if(ARG_DEPS)
    target_link_libraries(${_target} ${_scope} ${ARG_DEPS})
  endif()
  if(ARG_DEFINITIONS)
    target_compile_definitions(${_target} ${_scope} ${ARG_DEFINITIONS})
  endif()
endfunction()
