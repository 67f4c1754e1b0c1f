# ctest `sweep_smoke`: compare across clusters and GPU counts (planner/cli/compare_sweep.h) and
# the small CLI rules of the same issue, end to end:
# - --clusters A,B --gpus N1,N2 gives a row per pair, each with tokens/s per GPU, scaling and,
#   with --price-per-gpu-hour, a cost per million tokens equal to price x GPUs / 3600 / tokens/s
#   x 10^6; --tokens 15T adds days to train = 15e12 / tokens/s / 86400;
# - a cluster file's price_per_gpu_hour_usd is used when no price is given;
# - --seq 4k is --seq 4096; --global-batch-tokens is global batch x seq; --model DIR reads
#   DIR/config.json; --cluster h100 suggests dgx-h100.
# Run as cmake -DSHARDPLAN=<bin> -DWORK_DIR=<dir> -DCONFIGS=<configs> -P ...
include("${CMAKE_CURRENT_LIST_DIR}/smoke_helpers.cmake")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

set(job --model llama3-8b --seq 4k --global-batch 64)
run(0 compare ${job} --clusters dgx-h100,hgx-h200 --gpus 8,16 --price-per-gpu-hour 3.6
    --tokens 15T --json)
json_length(n "${OUT}" rows)
if(NOT n EQUAL 4)
  message(FATAL_ERROR "sweep of 2 clusters x 2 counts: ${n} rows\n${OUT}")
endif()
foreach(i RANGE 3)
  json_get(tps "${OUT}" rows ${i} tokens_per_s)
  json_get(gpus "${OUT}" rows ${i} gpus)
  json_get(cost "${OUT}" rows ${i} cost_per_million_tokens)
  json_get(days "${OUT}" rows ${i} days_to_train)
  json_get(seq "${OUT}" setup seq)
  # cost x tokens/s = 3.6 x GPUs / 3600 x 10^6 = 1000 x GPUs, to rounding.
  math(EXPR want "1000 * ${gpus}")
  execute_process(COMMAND python3 -c "import sys; c, t, d, w = map(float, sys.argv[1:]); \
sys.exit(0 if abs(c * t / w - 1) < 1e-9 and abs(d * t * 86400 / 15e12 - 1) < 1e-9 else 1)"
                  "${cost}" "${tps}" "${days}" "${want}" RESULT_VARIABLE bad)
  if(bad OR NOT seq EQUAL 4096)
    message(FATAL_ERROR "row ${i}: cost ${cost} x ${tps} tokens/s is not ${want}, or ${days} days "
                        "is not 15T tokens, or seq ${seq} is not 4096\n${OUT}")
  endif()
endforeach()

# A cluster file with a price: used, with its source, when no price is given.
file(READ "${CONFIGS}/clusters/dgx-h100.json" h100)
string(JSON priced SET "${h100}" price_per_gpu_hour_usd
       [=[{"value": 2.0, "source": "a test price, 2026-11-27"}]=])
string(JSON priced SET "${priced}" name "\"priced-h100\"")
file(WRITE "${WORK_DIR}/priced-h100.json" "${priced}")
run(0 compare ${job} --clusters "${WORK_DIR}/priced-h100.json" --gpus 8 --json)
json_get(price "${OUT}" rows 0 price_per_gpu_hour_usd)
json_get(source "${OUT}" rows 0 price_source)
if(NOT price EQUAL 2 OR NOT source STREQUAL "a test price, 2026-11-27")
  message(FATAL_ERROR "the cluster file's price was not used:\n${OUT}")
endif()

# --global-batch-tokens 256k at seq 4k is 64 sequences; --model DIR; --cluster h100.
run(0 estimate --model llama3-8b --cluster dgx-h100 --gpus 8 --seq 4096 --global-batch 64 --json)
json_get(a "${OUT}" plan step_time_s)
run(0 estimate --model llama3-8b --cluster dgx-h100 --gpus 8 --seq 4k --global-batch-tokens 256k
    --json)
json_get(b "${OUT}" plan step_time_s)
if(NOT a STREQUAL b)
  message(FATAL_ERROR "--seq 4k --global-batch-tokens 256k priced ${b} s, --seq 4096 "
                      "--global-batch 64 ${a} s")
endif()
run(2 estimate --model llama3-8b --cluster dgx-h100 --gpus 8 --seq 4000 --global-batch-tokens 256k)
expect_match("tokens not a multiple of seq" "not a multiple of --seq 4000" "${ERR}")
file(MAKE_DIRECTORY "${WORK_DIR}/model")
file(COPY_FILE "${CONFIGS}/models/llama3-8b.json" "${WORK_DIR}/model/config.json")
run(0 inspect --model "${WORK_DIR}/model" --json)
json_get(params "${OUT}" parameters)
if(NOT params EQUAL 8030261248)
  message(FATAL_ERROR "--model DIR: ${params} parameters, expected Llama 3 8B's 8030261248")
endif()
run(2 plan --model llama3-8b --cluster h100 --gpus 8 --seq 4096 --global-batch 64)
expect_match("--cluster h100" "did you mean one of 'dgx-h100'" "${ERR}")

# --seq beyond the positions: refused without RoPE scaling, planned with it (a note on stderr).
run(2 plan --model llama3-8b --cluster dgx-h100 --gpus 64 --seq 128k --global-batch 8)
expect_match("--seq 128k on llama3-8b" "8192 positions .*--rope-scaling" "${ERR}")
run(0 plan --model llama3-8b --cluster dgx-h100 --gpus 64 --seq 128k --global-batch 8
    --rope-scaling --json)
expect_match("--rope-scaling note" "note: --seq 131072 is beyond llama3-8b's 8192 positions" "${ERR}")
json_get(seq "${OUT}" setup seq)
if(NOT seq EQUAL 131072)
  message(FATAL_ERROR "--seq 128k --rope-scaling planned seq ${seq}")
endif()
# A learned position table has no row past its last: refused even with --rope-scaling.
run(2 plan --model gpt2 --cluster dgx-h100 --gpus 8 --seq 2048 --global-batch 8 --rope-scaling)
expect_match("--seq 2048 on gpt2" "1024 learned positions .*expected at most 1024" "${ERR}")

# --explain --against fsdp: the best plan against the best FSDP plan, never faster than it.
run(0 plan --model llama3-8b --cluster dgx-h100 --gpus 64 --seq 8k --global-batch 512 --explain
    --against fsdp --json)
json_get(strategy "${OUT}" explain_against strategy)
json_get(slower "${OUT}" explain_against slower_by_s)
if(NOT strategy STREQUAL "fsdp" OR slower LESS 0)
  message(FATAL_ERROR "--against fsdp: ${strategy}, slower by ${slower} s\n${OUT}")
endif()
run(2 plan --model llama3-8b --cluster dgx-h100 --gpus 8 --seq 4k --global-batch 64 --against fsdp)
expect_match("--against without --explain" "expected it with --explain" "${ERR}")

# Text outputs name the job and the throughput per GPU.
run(0 estimate --model llama3-8b --cluster dgx-h100 --gpus 8 --seq 4k --global-batch 64 --zero 3)
expect_match("estimate's header" "^llama3-8b on 8 x H100[^\n]*seq 4096, global batch 64: one configuration priced" "${OUT}")
expect_match("throughput per GPU" "[0-9,]+ tokens/s/GPU, [0-9]+ TFLOP/s/GPU" "${OUT}")
