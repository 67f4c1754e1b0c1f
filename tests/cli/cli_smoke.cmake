# ctest `cli_smoke`: the shardplan binary keeps the CLI contract of DESIGN.md. Run as
#   cmake -DSHARDPLAN=<path to shardplan> -DEXPECTED_VERSION=0.1.0 -P cli_smoke.cmake

# run(<expected exit code> <args...>): runs shardplan, checks the exit code, leaves OUT and ERR.
function(run expected_rc)
  execute_process(COMMAND "${SHARDPLAN}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc STREQUAL "${expected_rc}")
    message(FATAL_ERROR "shardplan ${ARGN}: exit ${rc}, expected ${expected_rc}\n"
                        "stdout:\n${out}\nstderr:\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
  set(ERR "${err}" PARENT_SCOPE)
endfunction()

function(expect_match what regex text)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: expected to match '${regex}', got:\n${text}")
  endif()
endfunction()

run(0 --version)
expect_match("--version" "^shardplan ${EXPECTED_VERSION}\n$" "${OUT}")

run(0 --help)
expect_match("--help" "Usage:" "${OUT}")
expect_match("--help lists the env verb" "env" "${OUT}")

run(0 env)
expect_match("env" "nccl" "${OUT}")

# --json: one JSON document on stdout, whether the flag comes before or after the verb.
foreach(args IN ITEMS "env;--json" "--json;env")
  run(0 ${args})
  string(JSON version ERROR_VARIABLE json_error GET "${OUT}" version)
  if(json_error OR NOT version STREQUAL EXPECTED_VERSION)
    message(FATAL_ERROR "shardplan ${args}: not a JSON document with version ${EXPECTED_VERSION}: "
                        "${json_error}\n${OUT}")
  endif()
endforeach()

# Bad input: exit 2 and exactly one line on stderr, nothing on stdout.
foreach(args IN ITEMS "" "--no-such-flag" "no-such-verb" "env;--bogus")
  run(2 ${args})
  expect_match("shardplan ${args} stderr" "^shardplan: error: [^\n]+\n$" "${ERR}")
  if(NOT OUT STREQUAL "")
    message(FATAL_ERROR "shardplan ${args}: wrote to stdout on error:\n${OUT}")
  endif()
endforeach()
