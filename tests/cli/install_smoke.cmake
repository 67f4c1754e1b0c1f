# ctest `install_smoke`: `cmake --install` gives a bin/shardplan that finds the configs installed
# beside it (share/shardplan/configs, Note [Locating configs] in base/config_paths.h), from
# any working directory, and still does after the whole prefix is moved elsewhere. Run as
#   cmake -DBUILD_DIR=<build> -DPREFIX=<scratch dir> -P install_smoke.cmake
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}/a"
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS "${PREFIX}/a/bin/shardplan")
  message(FATAL_ERROR "cmake --install gave no bin/shardplan (exit ${rc}): ${err}")
endif()
file(RENAME "${PREFIX}/a" "${PREFIX}/moved")  # a relocated prefix must keep working
foreach(what IN ITEMS "inspect;--model;llama3-8b;--seq;16" "collective;--cluster;dgx-h100;--kind;all_reduce;--group-size;8;--bytes;1MiB")
  execute_process(COMMAND "${PREFIX}/moved/bin/shardplan" ${what} --json WORKING_DIRECTORY /
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "installed shardplan ${what}: exit ${rc}: ${err}")
  endif()
endforeach()
# The model came from the installed configs, not from the source tree compiled into the binary.
execute_process(COMMAND "${PREFIX}/moved/bin/shardplan" inspect --model llama3-8b --seq 16 --json
                WORKING_DIRECTORY / OUTPUT_VARIABLE out)
string(JSON config GET "${out}" config)
if(NOT config STREQUAL "${PREFIX}/moved/share/shardplan/configs/models/llama3-8b.json")
  message(FATAL_ERROR "installed shardplan read ${config}, expected its own "
                      "${PREFIX}/moved/share/shardplan/configs/models/llama3-8b.json")
endif()
file(REMOVE_RECURSE "${PREFIX}")
