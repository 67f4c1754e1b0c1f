# ctest `gpu_loop_mpi_smoke` (label mpi): the CPU side of closing the loop on a cluster
# (docs/launching.md "The whole training state", "Checkpoints", "Rehearsal"), under mpirun:
# - `materialize --state model` on 4 ranks measures each rank's resident-set growth within 10 %
#   of the plan's per-stage prediction (ZeRO 1 and 3), and --check-memory passes;
# - a checkpoint is read once per replica group: over the whole job the ranks read exactly the
#   model's bytes, whether dp 4 replicates everything or tp 2 x dp 2 shards it, and the broadcast
#   rows verify against the file;
# - `rehearse` times every collective of the bill of a tp x pp x dp plan (8 ranks) and of an
#   expert-parallel one, and refuses a job of the wrong size; its link sweep calibrates a cluster
#   file (calibrate --rehearsal).
# Run as cmake -DSHARDPLAN=<bin> -DMPIRUN=<tests/mpi/mpirun.sh> -DWORK_DIR=<dir>
# -DDATA_DIR=<tests/data> -P ...
cmake_policy(SET CMP0057 NEW)  # if(... IN_LIST ...)
include("${CMAKE_CURRENT_LIST_DIR}/smoke_helpers.cmake")

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(mpirun expected np)
  execute_process(COMMAND "${MPIRUN}" -np ${np} "${SHARDPLAN}" ${ARGN} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  if((expected STREQUAL "0" AND NOT rc STREQUAL "0") OR
     (expected STREQUAL "fail" AND (rc STREQUAL "0" OR NOT rc MATCHES "^[0-9]+$")))
    message(FATAL_ERROR "mpirun -np ${np} shardplan ${ARGN}: exit '${rc}', expected ${expected}\n"
                        "stdout:\n${out}\nstderr:\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
  set(ERR "${err}" PARENT_SCOPE)
endfunction()

# 1. The whole model state of a Llama-shaped fp32 model (about 100 MB per rank, so that the
#    resident set's page-level noise is far below the 10 % asked). Under AddressSanitizer the
#    resident set also holds its shadow memory, one byte per 8 allocated (12.5 %), and the
#    allocations' redzones: 25 % there (seen: 14.3 %).
set(tolerance_pct 10)
if(SANITIZED)
  set(tolerance_pct 25)
endif()
set(model "${WORK_DIR}/llama-fp32.json")
file(WRITE "${model}" [=[{"model_type": "llama", "vocab_size": 8000, "hidden_size": 512,
 "intermediate_size": 1408, "num_hidden_layers": 4, "num_attention_heads": 8,
 "num_key_value_heads": 4, "max_position_embeddings": 512, "hidden_act": "silu",
 "initializer_range": 0.02, "torch_dtype": "float32", "tie_word_embeddings": false}]=])
foreach(zero 1 3)
  run(0 plan --model "${model}" --cluster cpu-local --gpus 4 --seq 128 --global-batch 8 --tp 2
      --dp 2 --zero ${zero} --out "${WORK_DIR}/state${zero}.json")
  mpirun(0 4 materialize --plan "${WORK_DIR}/state${zero}.json" --state model --check-memory
         --memory-tolerance 0.${tolerance_pct} --json)
  json_length(n "${OUT}" classes)
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    json_get(measured "${OUT}" classes ${i} measured_bytes)
    json_get(predicted "${OUT}" classes ${i} predicted_bytes)
    json_get(grads "${OUT}" classes ${i} allocated_bytes gradients)
    json_get(params "${OUT}" classes ${i} allocated_bytes parameters)
    # Within the tolerance, in integer arithmetic: |measured - predicted| * 100 <= pct x predicted.
    math(EXPR off "(${measured} - ${predicted}) * 100")
    math(EXPR allowed "${predicted} * ${tolerance_pct}")
    if(off LESS 0)
      math(EXPR off "-(${off})")
    endif()
    if(off GREATER allowed OR grads EQUAL 0)
      message(FATAL_ERROR "ZeRO ${zero}: class ${i} measured ${measured} bytes, predicted "
                          "${predicted}, gradients ${grads}:\n${OUT}")
    endif()
    # fp32 Adam on a CPU: gradients as large as the weights until ZeRO 2 partitions them.
    if(zero EQUAL 1 AND NOT grads EQUAL params)
      message(FATAL_ERROR "ZeRO 1: gradients ${grads} bytes, expected the weights' ${params}")
    endif()
  endforeach()
endforeach()

# 2. Checkpoint reads: every byte of the file read once over the job.
set(tiny "${DATA_DIR}/safetensors/tiny-llama")
set(total_read "")
foreach(layout "--tp;1;--dp;4" "--tp;2;--dp;2")
  run(0 plan --model "${tiny}/config.json" --cluster cpu-local --gpus 4 --seq 32 --global-batch 4
      ${layout} --zero 0 --out "${WORK_DIR}/ck.json")
  mpirun(0 4 materialize --plan "${WORK_DIR}/ck.json" --state params --checkpoint
         "${tiny}/model.safetensors" --verify --json)
  json_get(ok "${OUT}" verify ok)
  json_length(n "${OUT}" classes)
  math(EXPR last "${n} - 1")
  set(read 0)
  set(largest 0)
  foreach(i RANGE ${last})
    json_get(r "${OUT}" classes ${i} read_bytes)
    json_get(c "${OUT}" classes ${i} count)
    json_get(b "${OUT}" classes ${i} bytes)
    json_get(got "${OUT}" classes ${i} received_bytes)
    math(EXPR read "${read} + ${r} * ${c}")
    # Each byte a rank holds came from storage or from a replica, never both.
    math(EXPR held "${r} + ${got}")
    if(NOT held EQUAL b OR (got EQUAL 0))
      message(FATAL_ERROR "checkpoint ${layout}: class ${i} read ${r} and received ${got} bytes, "
                          "expected them to add up to its ${b} (and some received):\n${OUT}")
    endif()
    if(b GREATER largest)
      set(largest ${b})
    endif()
  endforeach()
  if(NOT ok STREQUAL "ON" OR read EQUAL 0)
    message(FATAL_ERROR "checkpoint ${layout}: verify ${ok}, ${read} bytes read:\n${OUT}")
  endif()
  if(total_read STREQUAL "")
    # dp 4: each rank holds the whole model, so one replica's bytes are the file's payload.
    set(total_read ${largest})
  endif()
  if(NOT read EQUAL total_read)
    message(FATAL_ERROR "checkpoint ${layout}: the job read ${read} bytes, expected the model's "
                        "${total_read} once:\n${OUT}")
  endif()
endforeach()

# 3. Rehearsal: every collective of the bill timed, all its calls run.
function(expect_rehearsed plan np)
  run(0 plan ${ARGN} --json)
  json_length(billed "${OUT}" best bill collectives)
  mpirun(0 ${np} rehearse --plan "${plan}" --json --out "${WORK_DIR}/rehearsal.json")
  json_length(n "${OUT}" collectives)
  if(NOT n EQUAL billed)
    message(FATAL_ERROR "rehearse ${plan}: ${n} collectives, the bill has ${billed}:\n${OUT}")
  endif()
  set(kinds "")
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    json_get(measured "${OUT}" collectives ${i} measured_s)
    json_get(calls "${OUT}" collectives ${i} calls_per_step)
    json_get(run "${OUT}" collectives ${i} calls_run)
    json_get(kind "${OUT}" collectives ${i} kind)
    json_get(dim "${OUT}" collectives ${i} mesh_dim)
    if(NOT measured GREATER 0 OR NOT run EQUAL calls)
      message(FATAL_ERROR "rehearse ${plan}: collective ${i} measured ${measured} s over "
                          "${run} of ${calls} calls:\n${OUT}")
    endif()
    list(APPEND kinds "${dim}:${kind}")
  endforeach()
  file(READ "${WORK_DIR}/rehearsal.json" written)
  json_get(format "${written}" format)
  if(NOT format STREQUAL "shardplan.rehearsal")
    message(FATAL_ERROR "rehearse --out wrote no rehearsal document:\n${written}")
  endif()
  set(KINDS "${kinds}" PARENT_SCOPE)
endfunction()
set(job3 --model "${tiny}/config.json" --cluster cpu-local --gpus 8 --seq 32 --global-batch 8
    --tp 2 --pp 2 --dp 2 --zero 1)
run(0 plan ${job3} --out "${WORK_DIR}/p3.json")
expect_rehearsed("${WORK_DIR}/p3.json" 8 ${job3})
foreach(want "tp:all_gather" "tp:reduce_scatter" "pp:send_recv" "dp:reduce_scatter"
             "dp:all_gather")
  if(NOT want IN_LIST KINDS)
    message(FATAL_ERROR "rehearse of tp x pp x dp: no ${want} in ${KINDS}")
  endif()
endforeach()
# Its link sweep (8 ranks on this one host: the largest group inside the node) feeds calibrate,
# whose cluster file names the sweep as its source; a cluster priced for NCCL refuses MPI times.
file(READ "${WORK_DIR}/rehearsal.json" written)
json_get(link "${written}" links 0 link)
json_length(sizes "${written}" links 0 rows)
if(NOT link STREQUAL "intra" OR sizes LESS 5)
  message(FATAL_ERROR "rehearse: no sweep inside the node (link '${link}', ${sizes} sizes):\n${written}")
endif()
run(0 calibrate --cluster cpu-local --rehearsal "${WORK_DIR}/rehearsal.json"
    --out "${WORK_DIR}/calibrated.json")
file(READ "${WORK_DIR}/calibrated.json" calibrated)
if(NOT calibrated MATCHES "rehearsal.json: intra sweep on")
  message(FATAL_ERROR "calibrate --rehearsal: the fitted links do not name the sweep:\n${calibrated}")
endif()
run(2 calibrate --cluster dgx-h100 --rehearsal "${WORK_DIR}/rehearsal.json"
    --out "${WORK_DIR}/calibrated-nccl.json")
if(EXISTS "${WORK_DIR}/calibrated-nccl.json" OR NOT ERR MATCHES "expected 'nccl'")
  message(FATAL_ERROR "calibrate --rehearsal of MPI times on an NCCL cluster:\n${ERR}")
endif()
set(moe --model "${DATA_DIR}/hf_families/configs/tiny-mixtral.json" --cluster cpu-local
    --gpus 4 --seq 32 --global-batch 8 --dp 4 --ep 2)
run(0 plan ${moe} --out "${WORK_DIR}/moe.json")
expect_rehearsed("${WORK_DIR}/moe.json" 4 ${moe})
if(NOT "ep:all_to_all" IN_LIST KINDS)
  message(FATAL_ERROR "rehearse of ep 2: no ep all_to_all in ${KINDS}")
endif()
# The wrong world size: every rank refuses, naming it.
mpirun(fail 2 rehearse --plan "${WORK_DIR}/moe.json")
expect_match("rehearse on 2 ranks" "rank [01] on [^:]+: the plan is for 4 ranks" "${ERR}")
