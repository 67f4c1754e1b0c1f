# ctest `materialize_mpi_smoke` (label mpi): `materialize` under mpirun end to end
# (docs/launching.md). A Llama-shaped model planned on 4 CPU ranks (tp 2 x dp 2, ZeRO-3: strided
# shards, uneven vocabulary rows) materializes and verifies, and its per-tensor checksums equal
# those of the same model on 1 rank; a world size that is not the plan's, a device that does not
# exist, and a rank that fails or is killed at run time end the job non-zero within 30 s, naming
# the rank. Run as cmake -DSHARDPLAN=<bin> -DMPIRUN=<tests/mpi/mpirun.sh> -DWORK_DIR=<dir> -P ...
include("${CMAKE_CURRENT_LIST_DIR}/smoke_helpers.cmake")

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(model "${WORK_DIR}/tiny-llama.json")
file(WRITE "${model}" [=[{"model_type": "llama", "vocab_size": 1001, "hidden_size": 64,
 "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "max_position_embeddings": 256, "hidden_act": "silu",
 "initializer_range": 0.02, "torch_dtype": "bfloat16", "tie_word_embeddings": false}]=])

set(job --model "${model}" --cluster cpu-local --seq 64 --global-batch 8)
run(0 plan ${job} --gpus 4 --tp 2 --dp 2 --zero 3 --out "${WORK_DIR}/plan4.json")
run(0 plan ${job} --gpus 1 --out "${WORK_DIR}/plan1.json")

# mpirun(<expected: 0 or "fail"> <max seconds> <np> <args...>): leaves OUT, ERR and SECONDS_TAKEN.
function(mpirun expected max_s np)
  string(TIMESTAMP t0 "%s")
  execute_process(COMMAND "${MPIRUN}" -np ${np} "${SHARDPLAN}" ${ARGN} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  string(TIMESTAMP t1 "%s")
  math(EXPR took "${t1} - ${t0}")
  if((expected STREQUAL "0" AND NOT rc STREQUAL "0") OR (expected STREQUAL "fail" AND
     (rc STREQUAL "0" OR NOT rc MATCHES "^[0-9]+$")) OR took GREATER max_s)
    message(FATAL_ERROR "mpirun -np ${np} shardplan ${ARGN}: exit '${rc}' after ${took} s, "
                        "expected ${expected} within ${max_s} s\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
  set(ERR "${err}" PARENT_SCOPE)
endfunction()

# 4 ranks: every check passes and every tensor is covered.
mpirun(0 60 4 materialize --plan "${WORK_DIR}/plan4.json" --device cpu --verify --json)
json_get(ok "${OUT}" verify ok)
json_get(covered "${OUT}" verify covered)
json_get(gathered "${OUT}" verify gathered)
json_get(replicas "${OUT}" verify replica_checks)
json_get(ranks "${OUT}" ranks)
if(NOT ok STREQUAL "ON" OR NOT covered EQUAL 21 OR NOT gathered EQUAL 21 OR NOT ranks EQUAL 4
   OR replicas EQUAL 0)
  message(FATAL_ERROR "materialize on 4 ranks: expected 21 tensors verified, replicas checked\n"
                      "${OUT}")
endif()
json_get(sums4 "${OUT}" verify tensor_checksums)

# The same model on 1 rank, without a launcher: the same tensors, checksum for checksum.
run(0 materialize --plan "${WORK_DIR}/plan1.json" --verify --json)
json_get(sums1 "${OUT}" verify tensor_checksums)
string(JSON equal EQUAL "${sums1}" "${sums4}")
if(NOT equal)
  message(FATAL_ERROR "4-rank and 1-rank materializations differ:\n${sums4}\n${sums1}")
endif()

# A 4-rank plan without a launcher, and on 3 ranks: every rank refuses it, exit 2.
run(2 materialize --plan "${WORK_DIR}/plan4.json")
expect_match("1 process, 4-rank plan" "plan is for 4 ranks .* this job has 1" "${ERR}")
mpirun(fail 30 3 materialize --plan "${WORK_DIR}/plan4.json")
# Every rank prints its line, but once one rank exits non-zero the launcher stops the job and
# may drop output it has not forwarded yet: any rank's line is asserted, not each.
expect_match("3 ranks, 4-rank plan" "rank [0-2] on [^:]+: the plan is for 4 ranks" "${ERR}")
# --device cuda: with a GPU per rank, the same tensors as on the CPU, checksum for checksum (CUDA
# fills and checksums); without one (or without CUDA in the build), bad input on every rank.
execute_process(COMMAND "${MPIRUN}" -np 4 "${SHARDPLAN}" materialize --plan "${WORK_DIR}/plan4.json"
                        --device cuda --verify --json
                RESULT_VARIABLE cuda_rc OUTPUT_VARIABLE cuda_out ERROR_VARIABLE cuda_err)
if(cuda_rc STREQUAL "0")
  json_get(sums_cuda "${cuda_out}" verify tensor_checksums)
  string(JSON equal EQUAL "${sums_cuda}" "${sums4}")
  if(NOT equal)
    message(FATAL_ERROR "--device cuda and cpu materializations differ:\n${cuda_out}")
  endif()
else()
  expect_match("--device cuda without a GPU"
               "rank [0-3] on [^:]+: --device cuda: (no CUDA device is visible|this shardplan was built without CUDA)"
               "${cuda_err}")
endif()
# A device this build or machine cannot use: bad input on every rank.
mpirun(fail 30 2 materialize --plan "${WORK_DIR}/plan1.json" --device tpu)
expect_match("--device tpu" "--device 'tpu', expected cpu or cuda" "${ERR}")

# Run-time failures: rank 1 fails, or is killed; the job ends non-zero and names it.
set(ENV{SHARDPLAN_TEST_FAIL_RANK} 1)
mpirun(fail 30 4 materialize --plan "${WORK_DIR}/plan4.json")
expect_match("failing rank" "rank 1 on [^:]+: injected failure" "${ERR}")
unset(ENV{SHARDPLAN_TEST_FAIL_RANK})
set(ENV{SHARDPLAN_TEST_KILL_RANK} 2)
mpirun(fail 30 4 materialize --plan "${WORK_DIR}/plan4.json")
expect_match("killed rank" "rank 2|signal 9|Killed" "${OUT}${ERR}")
unset(ENV{SHARDPLAN_TEST_KILL_RANK})

# From a checkpoint (tests/data/safetensors/tiny-llama, written by
# scripts/gen_safetensors_fixtures.py, an independent writer): every rank reads at most the bytes
# of its shards (the norms, replicated over tp, are split between the replicas: Note [Each byte
# read once per replica group]; gpu_loop_mpi_smoke checks the job's total), and --verify's
# gather equals the file's tensors.
set(tiny "${DATA_DIR}/safetensors/tiny-llama")
run(0 plan --model "${tiny}/config.json" --cluster cpu-local --gpus 4 --tp 2 --dp 2 --zero 3
    --seq 32 --global-batch 8 --out "${WORK_DIR}/tiny4.json")
mpirun(0 60 4 materialize --plan "${WORK_DIR}/tiny4.json" --checkpoint "${tiny}/model.safetensors"
       --verify --json)
json_get(ok "${OUT}" verify ok)
json_get(gathered "${OUT}" verify gathered)
json_get(source "${OUT}" source)
json_length(nclasses "${OUT}" classes)
math(EXPR last "${nclasses} - 1")
foreach(c RANGE ${last})
  json_get(bytes "${OUT}" classes ${c} bytes)
  json_get(read "${OUT}" classes ${c} read_bytes)
  if(read GREATER bytes OR NOT read GREATER 0)
    message(FATAL_ERROR "checkpoint: a rank read ${read} bytes for ${bytes} of shards\n${OUT}")
  endif()
endforeach()
if(NOT ok STREQUAL "ON" OR NOT gathered EQUAL 21 OR NOT source STREQUAL "checkpoint")
  message(FATAL_ERROR "checkpoint on 4 ranks: expected 21 tensors equal to the file's\n${OUT}")
endif()
# A checkpoint that does not fit the model, or is not there: every rank refuses, exit 2.
mpirun(fail 30 4 materialize --plan "${WORK_DIR}/tiny4.json"
       --checkpoint "${DATA_DIR}/safetensors/tiny-llama-bad")
expect_match("mismatched checkpoint" "rank [0-3] on [^:]+: checkpoint .*q_proj.weight' has shape"
             "${ERR}")
mpirun(fail 30 2 materialize --plan "${WORK_DIR}/plan1.json" --checkpoint "${WORK_DIR}/none")
expect_match("missing checkpoint" "rank [01] on [^:]+: .*none" "${ERR}")

# Experts are split over "ep" (Shard(0) of the fused experts): a Mixtral-shaped model with 4 experts
# on dp 4 x ep 2 verifies, every tensor covered once. By hand, per rank: the dense parameters
# (embedding and lm_head 2 x 1000 x 64, per layer q and o 64 x 64, k and v 32 x 64, router 4 x 64,
# two norms of 64; the final norm 64: 153,408) sharded by ZeRO-3 over the whole data-parallel
# group (the dp and ep dims, 4 ranks), the experts (per layer 4 x 192 x 64 + 4 x 64 x 96 = 73,728)
# over ep 2 x dp 2: 38,352 + 36,864 = 75,216 bf16 values, 150,432 bytes.
file(WRITE "${WORK_DIR}/tiny-mixtral.json" [=[{"model_type": "mixtral", "vocab_size": 1000,
 "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "max_position_embeddings": 256, "hidden_act": "silu",
 "num_local_experts": 4, "num_experts_per_tok": 2, "torch_dtype": "bfloat16",
 "tie_word_embeddings": false}]=])
run(0 plan --model "${WORK_DIR}/tiny-mixtral.json" --cluster cpu-local --gpus 4 --dp 4 --ep 2
    --zero 3 --seq 64 --global-batch 8 --out "${WORK_DIR}/moe4.json")
mpirun(0 60 4 materialize --plan "${WORK_DIR}/moe4.json" --verify --json)
json_get(ok "${OUT}" verify ok)
json_get(covered "${OUT}" verify covered)
json_get(tensors "${OUT}" classes 0 tensors)
json_get(bytes "${OUT}" classes 0 bytes)
if(NOT ok STREQUAL "ON" OR NOT covered EQUAL 21 OR NOT tensors EQUAL 21 OR NOT bytes EQUAL 150432)
  message(FATAL_ERROR "MoE on ep 2: expected 21 tensors covered, 21 per rank, 150432 bytes\n${OUT}")
endif()

# calibrate --mpi: the node's fabric measured through the MPI communicator and fitted; the file
# it writes plans. Without a launcher, or with one rank, it says what it needs.
mpirun(0 60 2 calibrate --cluster cpu-local --mpi --out "${WORK_DIR}/measured.json" --json)
json_get(link "${OUT}" links 0 link)
json_get(bw "${OUT}" links 0 bandwidth_gbps)
if(NOT link STREQUAL "shared_memory" OR NOT bw GREATER 0)
  message(FATAL_ERROR "calibrate --mpi: expected a fitted shared-memory bandwidth\n${OUT}")
endif()
run(0 plan --model "${model}" --cluster "${WORK_DIR}/measured.json" --gpus 2 --seq 64
    --global-batch 8)
run(2 calibrate --cluster cpu-local --mpi --out "${WORK_DIR}/x.json")
expect_match("calibrate --mpi without a launcher" "run under a launcher" "${ERR}")
mpirun(fail 30 1 calibrate --cluster cpu-local --mpi --out "${WORK_DIR}/x.json")
expect_match("calibrate --mpi on one rank" "one rank measures no link" "${ERR}")

# --dry-run needs no launcher and takes any world size.
run(0 materialize --plan "${WORK_DIR}/plan4.json" --dry-run --json)
json_get(dry_ranks "${OUT}" ranks)
if(NOT dry_ranks EQUAL 4)
  message(FATAL_ERROR "dry run: expected 4 ranks\n${OUT}")
endif()

# Parameters a plain split would pair wrongly or miss, on tp 2 x dp 2 with ZeRO-3, each equal
# checksum for checksum to the model on 1 rank: GLM-4's fused gate_up_proj and GraniteMoeShared's
# shared input_linear ([gate; up], split half by half), Cohere's per-head q_norm [heads, head_dim]
# (replicated beside the split heads).
set(tiny_sizes [=["vocab_size": 1000, "hidden_size": 64, "intermediate_size": 96,
 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
 "max_position_embeddings": 256, "pad_token_id": 0, "torch_dtype": "bfloat16"]=])
file(WRITE "${WORK_DIR}/tiny-glm4.json" "{\"model_type\": \"glm4\", ${tiny_sizes}}")
file(WRITE "${WORK_DIR}/tiny-cohere.json"
     "{\"model_type\": \"cohere\", \"use_qk_norm\": true, ${tiny_sizes}}")
file(WRITE "${WORK_DIR}/tiny-granitemoeshared.json"
     "{\"model_type\": \"granitemoeshared\", \"num_local_experts\": 4, \"num_experts_per_tok\": 2,
 \"shared_intermediate_size\": 80, ${tiny_sizes}}")
foreach(family glm4 cohere granitemoeshared)
  set(fam_job --model "${WORK_DIR}/tiny-${family}.json" --cluster cpu-local --seq 64
      --global-batch 8)
  run(0 plan ${fam_job} --gpus 4 --tp 2 --dp 2 --zero 3 --out "${WORK_DIR}/${family}4.json")
  run(0 plan ${fam_job} --gpus 1 --out "${WORK_DIR}/${family}1.json")
  mpirun(0 60 4 materialize --plan "${WORK_DIR}/${family}4.json" --verify --json)
  json_get(ok "${OUT}" verify ok)
  json_get(sums4 "${OUT}" verify tensor_checksums)
  run(0 materialize --plan "${WORK_DIR}/${family}1.json" --verify --json)
  json_get(sums1 "${OUT}" verify tensor_checksums)
  string(JSON equal EQUAL "${sums1}" "${sums4}")
  if(NOT ok STREQUAL "ON" OR NOT equal)
    message(FATAL_ERROR "${family} on tp 2 x dp 2: verify '${ok}', checksums\n${sums4}\n"
                        "against 1 rank's\n${sums1}")
  endif()
endforeach()
