# Optional backends: CUDA (kernels/), NCCL and MPI (collectives/). Each SHARDPLAN_WITH_<X> is AUTO, ON
# or OFF; the outcome is SHARDPLAN_HAVE_<X> (ON/OFF), exported to code as SHARDPLAN_HAVE_<X>=1/0 by the
# layer that owns the backend. Included once from the top-level CMakeLists.txt.

# ---- CUDA -----------------------------------------------------------------------------------------
set(SHARDPLAN_HAVE_CUDA OFF)
if(NOT SHARDPLAN_WITH_CUDA_MODE STREQUAL "OFF")
  # CMake only looks for nvcc on PATH; also try the toolkit's usual home so AUTO finds a stock install.
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(SHARDPLAN_NVCC nvcc HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda PATH_SUFFIXES bin)
    if(SHARDPLAN_NVCC)
      set(CMAKE_CUDA_COMPILER "${SHARDPLAN_NVCC}")
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Ampere (A100) and Hopper (H100/H200): what the cluster configs describe. CUDA 13 dropped
    # everything below sm_75, so older lists fail there. Only when the user (or CUDAARCHS) chose none.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    # .cu files are C++20 like the rest (CMake takes CUDA_STANDARD from CXX_STANDARD when unset); the
    # kernels' headers are shared with host code. CMake 3.25 does not know nvcc's flag for it (nvcc
    # has had -std=c++20 since 12.0), so name it here.
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION
       AND CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA"
       AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit)
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    set(SHARDPLAN_HAVE_CUDA ON)
  elseif(SHARDPLAN_WITH_CUDA_MODE STREQUAL "ON")
    message(FATAL_ERROR "SHARDPLAN_WITH_CUDA=ON but no CUDA compiler/toolkit was found "
                        "(set CUDACXX or CMAKE_CUDA_COMPILER, or use -DSHARDPLAN_WITH_CUDA=OFF)")
  endif()
endif()

# ---- NCCL (needs CUDA) ----------------------------------------------------------------------------
set(SHARDPLAN_HAVE_NCCL OFF)
if(NOT SHARDPLAN_WITH_NCCL_MODE STREQUAL "OFF")
  if(SHARDPLAN_HAVE_CUDA)
    # NCCL ships inside some CUDA toolkits and containers, else under NCCL_HOME or the system dirs.
    find_path(SHARDPLAN_NCCL_INCLUDE_DIR nccl.h
              HINTS ENV NCCL_HOME ENV NCCL_ROOT ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
    find_library(SHARDPLAN_NCCL_LIBRARY nccl
                 HINTS ENV NCCL_HOME ENV NCCL_ROOT ${CUDAToolkit_LIBRARY_DIR}
                 PATH_SUFFIXES lib lib64)
    if(SHARDPLAN_NCCL_INCLUDE_DIR AND SHARDPLAN_NCCL_LIBRARY)
      set(SHARDPLAN_HAVE_NCCL ON)
      add_library(shardplan_nccl INTERFACE IMPORTED)
      target_include_directories(shardplan_nccl INTERFACE "${SHARDPLAN_NCCL_INCLUDE_DIR}")
      target_link_libraries(shardplan_nccl INTERFACE "${SHARDPLAN_NCCL_LIBRARY}" CUDA::cudart)
      add_library(shardplan::nccl ALIAS shardplan_nccl)
    endif()
  endif()
  if(SHARDPLAN_WITH_NCCL_MODE STREQUAL "ON" AND NOT SHARDPLAN_HAVE_CUDA)
    message(FATAL_ERROR "SHARDPLAN_WITH_NCCL=ON needs CUDA, which is off or was not found "
                        "(SHARDPLAN_WITH_CUDA=${SHARDPLAN_WITH_CUDA})")
  elseif(SHARDPLAN_WITH_NCCL_MODE STREQUAL "ON" AND NOT SHARDPLAN_HAVE_NCCL)
    message(FATAL_ERROR "SHARDPLAN_WITH_NCCL=ON but NCCL was not found (nccl.h: "
                        "${SHARDPLAN_NCCL_INCLUDE_DIR}, libnccl: ${SHARDPLAN_NCCL_LIBRARY}); "
                        "set NCCL_HOME to its install prefix, or use -DSHARDPLAN_WITH_NCCL=OFF")
  endif()
endif()

# ---- MPI ------------------------------------------------------------------------------------------
set(SHARDPLAN_HAVE_MPI OFF)
if(NOT SHARDPLAN_WITH_MPI_MODE STREQUAL "OFF")
  find_package(MPI COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(SHARDPLAN_HAVE_MPI ON)
  elseif(SHARDPLAN_WITH_MPI_MODE STREQUAL "ON")
    message(FATAL_ERROR "SHARDPLAN_WITH_MPI=ON but MPI was not found "
                        "(apt-get install libopenmpi-dev, or use -DSHARDPLAN_WITH_MPI=OFF)")
  endif()
endif()
