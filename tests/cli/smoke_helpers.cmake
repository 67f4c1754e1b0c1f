# Helpers of the CLI smoke scripts (cli_smoke.cmake, cli_language_smoke.cmake); SHARDPLAN is the
# binary under test.

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

# json_get(<var> <document> <path...>): the value at path; json_length: the length of the array
# at path. Either fails the test when the path is missing.
function(json_query var mode document)
  string(JSON value ERROR_VARIABLE json_error ${mode} "${document}" ${ARGN})
  if(json_error)
    message(FATAL_ERROR "no '${ARGN}' in the JSON document: ${json_error}\n${document}")
  endif()
  set(${var} "${value}" PARENT_SCOPE)
endfunction()

function(json_get var document)
  json_query(value GET "${document}" ${ARGN})
  set(${var} "${value}" PARENT_SCOPE)
endfunction()

function(json_length var document)
  json_query(value LENGTH "${document}" ${ARGN})
  set(${var} "${value}" PARENT_SCOPE)
endfunction()
