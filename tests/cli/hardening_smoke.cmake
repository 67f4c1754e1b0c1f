# ctest `hardening_smoke`: hostile and plausible input to the binary (docs/user-guide.md "Limits",
# "Exit codes"). Plans the tool writes are accepted back; an output path that is a FIFO, a device or
# a folder is refused before anything is written; sizes beyond the limits are refused in one line
# within seconds; contradictory pins are bad input and "nothing fits" is exit 3; a plan is
# self-contained and checked against what it is said to be; refusals name the flag or field.
# Run as cmake -DSHARDPLAN=<bin> -DWORK_DIR=<scratch folder> -P hardening_smoke.cmake
include("${CMAKE_CURRENT_LIST_DIR}/smoke_helpers.cmake")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(W "${WORK_DIR}")

# Exactly one line on stderr (the error contract), matching `regex`.
function(expect_one_line what regex)
  expect_match("${what}" "^shardplan: [^\n]*\n$" "${ERR}")
  expect_match("${what}" "${regex}" "${ERR}")
endfunction()

# 1. Plans the tool wrote are accepted back, fp8 and CPU included (their MFU may exceed 1).
run(0 plan --model llama3-8b --cluster dgx-h100 --gpus 8 --seq 4096 --global-batch 64
    --precision fp8 --out "${W}/fp8.json")
run(0 materialize --plan "${W}/fp8.json" --dry-run)
run(0 plan --model pythia-160m --cluster cpu-local --gpus 4 --seq 512 --global-batch 8
    --out "${W}/cpu.json")
run(0 materialize --plan "${W}/cpu.json" --dry-run --json)
json_get(ranks "${OUT}" ranks)
if(NOT ranks EQUAL 4)
  message(FATAL_ERROR "dry run of the pythia plan: expected 4 ranks\n${OUT}")
endif()

# 2. Output paths: a FIFO, a folder, an empty path, a missing folder; nothing replaced or written.
execute_process(COMMAND mkfifo "${W}/fifo" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mkfifo failed")
endif()
set(gpt2 --model gpt2 --cluster cpu-local --gpus 4 --seq 512 --global-batch 8)
run(2 plan ${gpt2} --out "${W}/fifo")
expect_one_line("--out onto a FIFO" "--out '[^']*fifo' is a FIFO \\(named pipe\\), expected a regular file")
run(2 compare ${gpt2} --svg "${W}/fifo")
expect_one_line("--svg onto a FIFO" "--svg '[^']*fifo' is a FIFO")
run(2 calibrate --cluster cpu-local --mpi --out "${W}/fifo")
expect_one_line("calibrate --out onto a FIFO" "--out '[^']*fifo' is a FIFO")
execute_process(COMMAND test -p "${W}/fifo" RESULT_VARIABLE still_fifo)
if(NOT still_fifo EQUAL 0)
  message(FATAL_ERROR "the FIFO ${W}/fifo was replaced")
endif()
run(2 plan ${gpt2} --out "${W}")
expect_one_line("--out onto a folder" "is a directory")
# An empty argument does not survive a CMake list, so this one is spelt out.
execute_process(COMMAND "${SHARDPLAN}" plan --model gpt2 --cluster cpu-local --gpus 4 --seq 512
                        --global-batch 8 --out ""
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE ERR)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "--out '': exit ${rc}, expected 2\n${ERR}")
endif()
expect_one_line("--out ''" "--out: expected a file path, got ''")
run(2 plan ${gpt2} --out "${W}/no/such/plan.json")
expect_one_line("--out in a missing folder" "directory '[^']*no/such' does not exist")
run(2 plan ${gpt2} --out /dev/null)
expect_one_line("--out /dev/null" "is a character device")

# 3. Sizes beyond the limits: one line naming the limit, quickly, whatever the number.
run(2 estimate --model llama3.1-405b --cluster dgx-h100 --gpus 2147483648 --seq 8192
    --global-batch 2147483648)
expect_one_line("--gpus 2^31" "--gpus 2147483648 is more than shardplan plans for, expected at most 1048576")
run(2 plan --model gpt2 --cluster dgx-h100 --gpus 9223372036854775807 --seq 512 --global-batch 8)
expect_one_line("--gpus 2^63-1" "--gpus 9223372036854775807 is more than")
run(2 collective --cluster dgx-h100 --kind all_reduce --group-size 2147483648 --nodes 268435456
    --bytes 1GiB)
expect_one_line("--group-size 2^31" "2147483648 ranks is more than shardplan plans for")
file(READ "${CMAKE_CURRENT_LIST_DIR}/../../configs/models/llama3-8b.json" llama)
string(JSON deep SET "${llama}" num_hidden_layers 100000)
file(WRITE "${W}/deep.json" "${deep}")
run(2 inspect --model "${W}/deep.json")
expect_one_line("100,000 layers" "field 'num_hidden_layers': 100000 layers, expected at most 1024")
run(2 estimate --model gpt2 --cluster cpu-local --gpus 1 --seq 512 --global-batch 36028797018963969)
expect_one_line("tokens overflow" "--global-batch 36028797018963969 x --seq 512 tokens per step overflow")
run(2 inspect --model llama3-8b --seq 8192 --batch 2147483648)
expect_one_line("inspect batch x seq" "--batch 2147483648 x --seq 8192 tokens: activations")

# 4. Contradictory pins are bad input naming the pins; nothing fitting is exit 3, --out unwritten.
set(llama --model llama3-8b --cluster dgx-h100 --gpus 8 --seq 4096)
foreach(pins "--virtual-stages;4;--pp;1" "--sequence-parallel;on;--tp;1" "--zero;3;--dp;1"
             "--virtual-stages;2147483648" "--pp;64")
  run(2 plan ${llama} --global-batch 64 ${pins} --out "${W}/pins.json")
  list(GET pins 0 first)
  expect_one_line("pins ${pins}" "${first}")
endforeach()
run(2 plan ${llama} --micro-batch 16 --global-batch 8)
expect_one_line("--micro-batch 16 --global-batch 8" "--micro-batch 16 does not divide --global-batch 8")
if(EXISTS "${W}/pins.json")
  message(FATAL_ERROR "contradictory pins wrote ${W}/pins.json")
endif()
run(3 plan --model llama3.1-405b --cluster dgx-h100 --gpus 8 --seq 4096 --global-batch 64
    --out "${W}/none.json")
expect_one_line("nothing fits" "nothing fits in memory: the candidate needing the least memory .* needs [0-9.]+ GiB per GPU, [0-9.]+ GiB more than")
if(EXISTS "${W}/none.json")
  message(FATAL_ERROR "a plan that does not fit was written to ${W}/none.json")
endif()
run(3 plan --model llama3.1-405b --cluster dgx-h100 --gpus 8 --seq 4096 --global-batch 64 --json)
json_get(short_by "${OUT}" nothing_fits short_by_bytes)
json_query(best TYPE "${OUT}" best)
if(NOT short_by GREATER 0 OR NOT best STREQUAL "NULL")
  message(FATAL_ERROR "nothing fits --json: expected best null and short_by_bytes > 0\n${OUT}")
endif()
# estimate answers a configuration that does not fit, and says so (exit 0).
run(0 estimate --model llama3.1-405b --cluster dgx-h100 --gpus 8 --seq 4096 --global-batch 64)
expect_match("estimate that does not fit" "does not fit: [0-9.]+ [GT]iB more than the 79.2 GiB of a H100 SXM5 80 GB per GPU" "${OUT}")

# 5. A plan is self-contained and must be what it says: relabelled, redirected or on another
#    cluster, it is refused naming both; a custom cluster file may move after planning.
run(0 plan ${gpt2} --out "${W}/gpt2.json")
file(READ "${W}/gpt2.json" plan)
string(JSON relabelled SET "${plan}" model name "\"llama3-8b\"")
file(WRITE "${W}/relabelled.json" "${relabelled}")
run(2 materialize --plan "${W}/relabelled.json" --dry-run)
expect_one_line("relabelled plan" "field 'model.sha256': does not match model.name 'llama3-8b' and model.config \\(gpt2: 12 layers")
string(JSON redirected SET "${plan}" cluster name "\"../../../../etc/passwd\"")
file(WRITE "${W}/redirected.json" "${redirected}")
run(2 materialize --plan "${W}/redirected.json" --dry-run)
expect_one_line("cluster name as a path" "field 'cluster.name': '../../../../etc/passwd' differs")
run(2 materialize --plan "${W}/gpt2.json" --dry-run --cluster dgx-h100)
expect_one_line("another cluster" "--cluster dgx-h100 .* is not the plan's cluster 'cpu-local'")
run(2 materialize --plan "${W}/gpt2.json" --dry-run --model pythia-160m)
expect_one_line("another model" "--model pythia-160m .* is not the plan's model 'gpt2'")
run(0 materialize --plan "${W}/gpt2.json" --dry-run --model gpt2 --cluster cpu-local)
file(READ "${CMAKE_CURRENT_LIST_DIR}/../../configs/clusters/dgx-h100.json" h100)
file(WRITE "${W}/my-cluster.json" "${h100}")
run(0 plan --model llama3-8b --cluster "${W}/my-cluster.json" --gpus 8 --seq 4096
    --global-batch 64 --out "${W}/custom.json")
file(RENAME "${W}/my-cluster.json" "${W}/moved.json")
run(0 materialize --plan "${W}/custom.json" --dry-run)

# 6. Input files: folders, devices, FIFOs and /proc files are named for what they are; a FIFO is
#    refused at once, not waited on.
run(2 plan --model llama3-8b --cluster "${W}" --gpus 8 --seq 4096 --global-batch 64)
expect_one_line("--cluster a folder" "cluster file '[^']*' is a directory, expected a .json file")
run(2 plan --model gpt2 --cluster /dev/zero --gpus 4 --seq 512 --global-batch 8)
expect_one_line("--cluster /dev/zero" "cluster file '/dev/zero' is a character device")
execute_process(COMMAND "${SHARDPLAN}" materialize --plan "${W}/fifo" --dry-run
                RESULT_VARIABLE rc ERROR_VARIABLE ERR TIMEOUT 20)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "--plan on a FIFO: exit '${rc}', expected 2 at once\n${ERR}")
endif()
expect_one_line("--plan on a FIFO" "plan file '[^']*fifo' is a FIFO")
run(2 materialize --plan /proc/self/status --dry-run)
if(ERR MATCHES "unexpected end of input")
  message(FATAL_ERROR "/proc/self/status was read as empty:\n${ERR}")
endif()

# 7. Implausible hardware: refused naming the field.
string(JSON huge SET "${h100}" accelerator memory_gb value 9.3e9)
file(WRITE "${W}/huge.json" "${huge}")
run(2 plan --model llama3-8b --cluster "${W}/huge.json" --gpus 8 --seq 4096 --global-batch 64)
expect_one_line("9.3e9 GB" "field 'accelerator.memory_gb.value': expected a number from 0.001 to 100000 GB")
string(JSON slow SET "${h100}" network latency_us value 1e308)
file(WRITE "${W}/slow.json" "${slow}")
run(2 collective --cluster "${W}/slow.json" --nodes 2 --kind all_reduce --group-size 16 --bytes 1GiB)
expect_one_line("latency 1e308" "field 'network.latency_us.value'")

# 8. A fault-injection variable that is not a rank of the job is refused, not ignored.
run(0 plan --model gpt2 --cluster cpu-local --gpus 1 --seq 512 --global-batch 8 --out "${W}/one.json")
set(ENV{SHARDPLAN_TEST_FAIL_RANK} "one")
run(2 materialize --plan "${W}/one.json")
expect_one_line("SHARDPLAN_TEST_FAIL_RANK=one" "SHARDPLAN_TEST_FAIL_RANK='one', expected a rank of this job, 0 to 0")
unset(ENV{SHARDPLAN_TEST_FAIL_RANK})

# 9. NaN is not a number in range: CLI11's Range compares, and every comparison with NaN is false.
run(2 plan --model mixtral-8x7b --cluster dgx-h100 --gpus 64 --seq 4096 --global-batch 256
    --moe-imbalance nan)
expect_one_line("--moe-imbalance nan" "--moe-imbalance: expected a number from 1 to 1000 .*got 'nan'")
run(2 compare ${gpt2} --price-per-gpu-hour NaN)
expect_one_line("--price-per-gpu-hour NaN" "--price-per-gpu-hour: expected a number from 1e-06 to 10000")
run(2 materialize --plan "${W}/cpu.json" --dry-run --memory-tolerance nan)
expect_one_line("--memory-tolerance nan" "--memory-tolerance: expected a number from 0 to 10")

# 10. An empty value is refused, not taken for "not given"; a dry run checks a checkpoint as the
#     job would (files, headers, every parameter with its shape and dtype).
execute_process(COMMAND "${SHARDPLAN}" materialize --plan "${W}/cpu.json" --dry-run --checkpoint ""
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE ERR)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "--checkpoint '': exit ${rc}, expected 2\n${ERR}")
endif()
expect_one_line("--checkpoint ''" "--checkpoint: expected a safetensors file, index or folder, got ''")
execute_process(COMMAND "${SHARDPLAN}" plan ${gpt2} --memory-headroom ""
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE ERR)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "--memory-headroom '': exit ${rc}, expected 2\n${ERR}")
endif()
expect_one_line("--memory-headroom ''" "--memory-headroom: expected a size")
set(tiny "${DATA_DIR}/safetensors/tiny-llama")
run(0 plan --model "${tiny}/config.json" --cluster cpu-local --gpus 2 --seq 32 --global-batch 4
    --tp 2 --out "${W}/tiny.json")
run(0 materialize --plan "${W}/tiny.json" --dry-run --checkpoint "${tiny}/model.safetensors")
run(2 materialize --plan "${W}/tiny.json" --dry-run --checkpoint "${W}")
expect_one_line("--checkpoint a folder without one" "holds neither model.safetensors.index.json")
run(2 materialize --plan "${W}/cpu.json" --dry-run --checkpoint "${tiny}/model.safetensors")
expect_one_line("--checkpoint of another model" "checkpoint [^ ]* has no tensor")

# 11. A plan's prediction beyond its own device's memory is an edited plan: refused on reading,
#     before materialize --state peak or rehearse would allocate it.
file(READ "${W}/cpu.json" cpu_plan)
string(JSON edited SET "${cpu_plan}" prediction memory_per_gpu_bytes 9223372036854775807)
file(WRITE "${W}/edited.json" "${edited}")
run(2 materialize --plan "${W}/edited.json" --dry-run)
expect_one_line("memory_per_gpu_bytes 2^63-1" "field 'prediction.memory_per_gpu_bytes': is 9223372036854775807, expected at most the device memory")
string(JSON edited SET "${cpu_plan}" prediction collectives 0 bytes 4611686018427387904)
file(WRITE "${W}/edited.json" "${edited}")
run(2 materialize --plan "${W}/edited.json" --dry-run)
expect_one_line("collective bytes 2^62" "field 'prediction.collectives\\[0\\].bytes': is 4611686018427387904, expected at most the device memory")

# 12. Outputs: a symbolic link is refused, not replaced by the rename (a link to /dev/stdout became
#     a regular file); export never overwrites its own plan; a compare that exits 3 writes no chart.
file(WRITE "${W}/target.txt" "keep")
file(CREATE_LINK "${W}/target.txt" "${W}/link.json" SYMBOLIC)
run(2 plan ${gpt2} --out "${W}/link.json")
expect_one_line("--out onto a symbolic link" "--out '[^']*link.json' is a symbolic link to '[^']*target.txt'")
file(READ "${W}/target.txt" kept)
if(NOT IS_SYMLINK "${W}/link.json" OR NOT kept STREQUAL "keep")
  message(FATAL_ERROR "the link or its target was replaced")
endif()
file(COPY_FILE "${W}/cpu.json" "${W}/self.json")
run(2 export --plan "${W}/self.json" --to megatron --out "${W}/self.json")
expect_one_line("export onto its plan" "--out [^ ]*self.json is the plan being exported")
run(0 plan --model llama3-8b --cluster dgx-h100 --gpus 16 --seq 4096 --global-batch 64 --top 1
    --out "${W}/llama.json")
run(0 --json export --plan "${W}/llama.json" --to torchtitan)
json_get(launch "${OUT}" launch)
if(NOT launch MATCHES "^torchrun")
  message(FATAL_ERROR "export --json: expected one document with the launch line\n${OUT}")
endif()
run(3 compare --model llama3-8b --cluster dgx-h100 --gpus 16 --seq 4096 --global-batch 64
    --strategies ddp --svg "${W}/none.svg")
if(EXISTS "${W}/none.svg")
  message(FATAL_ERROR "compare exited 3 (nothing fits) but wrote its chart")
endif()

# 13. A name with a control character (a newline in a cluster's GPU model or a plan's stack) would
#     start a line of its own in an exported config: refused where it is read.
file(READ "${W}/llama.json" llama_plan)
string(JSON edited SET "${llama_plan}" setup stack "\"megatron\\n--load /tmp/evil\\n#\"")
file(WRITE "${W}/edited.json" "${edited}")
run(2 export --plan "${W}/edited.json" --to megatron)
expect_one_line("a stack with newlines" "field 'setup.stack': 'megatron\\\\x0a--load /tmp/evil\\\\x0a#' holds a control character")
if(NOT OUT STREQUAL "")
  message(FATAL_ERROR "export of a refused plan printed:\n${OUT}")
endif()

# 14. Empty values of any option are refused; a model folder's config.json that is no file is named.
execute_process(COMMAND "${SHARDPLAN}" collective --cluster dgx-h100 --kind all_reduce
                        --group-size 8 --bytes 1GiB --algorithm ""
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE ERR)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "--algorithm '': exit ${rc}, expected 2\n${ERR}")
endif()
expect_one_line("--algorithm ''" "--algorithm: expected a name, got ''")
file(MAKE_DIRECTORY "${W}/fifo_model")
execute_process(COMMAND mkfifo "${W}/fifo_model/config.json" RESULT_VARIABLE rc)
run(2 inspect --model "${W}/fifo_model")
expect_one_line("config.json a FIFO" "model config '[^']*fifo_model/config.json' is a FIFO")
