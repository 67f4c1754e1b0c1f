# ctest `error_lines_smoke` (label mpi): under mpirun every error is one line written at once
# (Note [One line, one write] in planner/cli/cli_common.cpp), so lines from several ranks failing
# together never run into each other, and each names its rank once:
# "shardplan: error: rank N on HOST: ...". Five runs of a 3-rank job on a 4-rank plan (every rank
# refuses it at the same moment), and a rank that fails at run time.
# Run as cmake -DSHARDPLAN=<bin> -DMPIRUN=<tests/mpi/mpirun.sh> -DWORK_DIR=<dir> -P ...
include("${CMAKE_CURRENT_LIST_DIR}/../cli/smoke_helpers.cmake")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
run(0 plan --model gpt2 --cluster cpu-local --gpus 4 --seq 512 --global-batch 8
    --out "${WORK_DIR}/plan4.json")

# Every line of `text` that names a rank must be exactly one rank's line.
function(expect_whole_rank_lines what text)
  string(REPLACE "\n" ";" lines "${text}")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "rank [0-9]+ on")
      continue()
    endif()
    if(NOT line MATCHES "^shardplan: error: rank [0-9]+ on [^ :]+: " OR
       line MATCHES "rank [0-9]+ on .*rank [0-9]+ on")
      message(FATAL_ERROR "${what}: a broken or run-together line:\n${line}\nall of stderr:\n${text}")
    endif()
  endforeach()
endfunction()

foreach(i RANGE 1 5)
  execute_process(COMMAND "${MPIRUN}" -np 3 "${SHARDPLAN}" materialize --plan
                          "${WORK_DIR}/plan4.json" --device cpu
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET TIMEOUT 60)
  if(rc STREQUAL "0")
    message(FATAL_ERROR "3 ranks on a 4-rank plan: exit 0")
  endif()
  expect_match("run ${i}: 3 ranks on a 4-rank plan" "rank [0-2] on [^:]+: the plan is for 4 ranks"
               "${err}")
  expect_whole_rank_lines("run ${i}" "${err}")
endforeach()

# A run-time failure names the rank once (it named it twice: "rank 1 on vm: rank 1 on cpu: ...").
set(ENV{SHARDPLAN_TEST_FAIL_RANK} 1)
execute_process(COMMAND "${MPIRUN}" -np 4 "${SHARDPLAN}" materialize --plan "${WORK_DIR}/plan4.json"
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET TIMEOUT 60)
unset(ENV{SHARDPLAN_TEST_FAIL_RANK})
expect_match("failing rank" "shardplan: error: rank 1 on [^ :]+: injected failure" "${err}")
expect_whole_rank_lines("failing rank" "${err}")
# A fault variable that is not a rank of the job: every rank refuses it (exit 2), none ignores it.
set(ENV{SHARDPLAN_TEST_KILL_RANK} 4)
execute_process(COMMAND "${MPIRUN}" -np 4 "${SHARDPLAN}" materialize --plan "${WORK_DIR}/plan4.json"
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET TIMEOUT 60)
unset(ENV{SHARDPLAN_TEST_KILL_RANK})
if(rc STREQUAL "0")
  message(FATAL_ERROR "SHARDPLAN_TEST_KILL_RANK=4 on 4 ranks: exit 0")
endif()
expect_match("kill rank 4 of 4" "SHARDPLAN_TEST_KILL_RANK='4', expected a rank of this job, 0 to 3"
             "${err}")
expect_whole_rank_lines("kill rank 4 of 4" "${err}")
