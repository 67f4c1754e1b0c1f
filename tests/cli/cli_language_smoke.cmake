# ctest `cli_language_smoke`: one CLI language across the verbs (docs/user-guide.md "Ranks on
# nodes" and "JSON conventions"). Run as
#   cmake -DSHARDPLAN=<path to shardplan> -P cli_language_smoke.cmake
include("${CMAKE_CURRENT_LIST_DIR}/smoke_helpers.cmake")

# --nodes 16 puts a 16-rank group one rank per node: a ring over the network, where one rank per
# node drives one 48 GB/s NIC (configs/clusters/dgx-h100.json). nccl-tests' all_gather busbw is
# algbw x (n-1)/n, so algbw is at most 48 x 16/15 = 51.2 GB/s.
run(0 collective --cluster dgx-h100 --nodes 16 --kind all_gather --group-size 16 --bytes 64MiB
    --json)
json_get(link "${OUT}" link_class)
json_get(per_node "${OUT}" placement ranks_per_node)
json_get(algbw "${OUT}" algbw_gbps)
if(NOT link STREQUAL "network" OR NOT per_node EQUAL 1 OR algbw GREATER 51.2 OR NOT algbw GREATER 0)
  message(FATAL_ERROR "collective --nodes 16 --group-size 16: expected one rank per node on the "
                      "network, algbw <= 51.2 GB/s\n${OUT}")
endif()
# --ranks-per-node says the same explicitly; --gpus is the job: 16 of 128 ranks, 8 per node.
run(0 collective --cluster dgx-h100 --gpus 128 --ranks-per-node 8 --kind all_reduce
    --group-size 16 --bytes 1GiB --json)
json_get(nodes "${OUT}" placement nodes)
json_get(group_nodes "${OUT}" nodes)
json_get(link "${OUT}" link_class)
if(NOT nodes EQUAL 16 OR NOT group_nodes EQUAL 2 OR NOT link STREQUAL "mixed")
  message(FATAL_ERROR "collective --gpus 128 --ranks-per-node 8: expected 16 nodes, the group on "
                      "2 of them\n${OUT}")
endif()

# redistribute --mesh 2x4 --nodes 2: ranks 0-3 on node 0, 4-7 on node 1, so dim 0 crosses nodes.
# S0 -> R of 8192 x 4096 bf16 is an all_gather of 64 MiB over 2 ranks: each sends 32 MiB. The 4
# dp groups keep 4 GPUs per node busy, which reach 4 NICs: 48 GB/s per group, so at least
# 33554432 B / 48e9 B/s = 0.699 ms.
run(0 redistribute --shape 8192,4096 --dtype bf16 --mesh 2x4 --mesh-names dp,tp --from S0,R
    --to R,R --cluster dgx-h100 --nodes 2 --json)
json_get(crosses0 "${OUT}" mesh_dims 0 crosses_nodes)
json_get(crosses1 "${OUT}" mesh_dims 1 crosses_nodes)
json_get(name0 "${OUT}" mesh_dims 0 name)
json_get(total "${OUT}" total_time_s)
json_get(per_node "${OUT}" placement ranks_per_node)
if(NOT crosses0 STREQUAL "ON" OR NOT crosses1 STREQUAL "OFF" OR NOT name0 STREQUAL "dp"
   OR NOT per_node EQUAL 4 OR total LESS 0.000699)
  message(FATAL_ERROR "redistribute --mesh 2x4 --nodes 2: expected dp across nodes priced on the "
                      "network (>= 0.699 ms)\n${OUT}")
endif()
run(0 redistribute --shape 8192,4096 --dtype bf16 --mesh 2x4 --from S0,R --to R,R
    --cluster dgx-h100 --nodes 2)
expect_match("redistribute text names the crossing dim" "dim 0: groups of 2 on 2 nodes, network"
             "${OUT}")
# --gpus is the world size: it must agree with the mesh.
run(2 redistribute --shape 8,8 --mesh 2x4 --from S0,R --to R,R --cluster dgx-h100 --gpus 16)
expect_match("redistribute --gpus 16 on 8 ranks" "--gpus 16 but the job has 8 ranks" "${ERR}")
# Sizes that do not divide, and a node count of 0: one short line naming the fix.
run(2 redistribute --shape 8,8 --mesh 2x4 --from S0,R --to R,R --cluster dgx-h100 --nodes 3)
expect_match("--nodes 3 on 8 ranks" "^shardplan: error: --nodes 3 does not divide the 8 ranks" "${ERR}")
run(2 collective --cluster dgx-h100 --nodes 0 --kind all_gather --group-size 8 --bytes 1MiB)
expect_match("--nodes 0" "expected a positive number of nodes, got '0'" "${ERR}")
string(LENGTH "${ERR}" len)
if(len GREATER 160)
  message(FATAL_ERROR "--nodes 0: the message is ${len} characters:\n${ERR}")
endif()

# Without a cluster, redistribute reports the bytes one rank sends (what min-cost minimises):
# S0 -> R of 8 x 8 bf16 over 2 ranks gathers 128 B per rank, of which it sends half, 64 B.
run(0 redistribute --shape 8,8 --dtype bf16 --mesh 2 --from S0 --to R --json)
json_get(moved "${OUT}" bytes_moved_per_rank)
json_get(buffer "${OUT}" steps 0 bytes_per_rank_buffer)
if(NOT buffer STREQUAL "output")
  message(FATAL_ERROR "all_gather's bytes_per_rank is its output buffer\n${OUT}")
endif()
json_get(shape1 "${OUT}" shape 1)
json_get(dtype "${OUT}" dtype)
if(NOT moved EQUAL 64 OR NOT shape1 EQUAL 8 OR NOT dtype STREQUAL "bfloat16")
  message(FATAL_ERROR "redistribute --json: expected 64 bytes moved and the inputs echoed\n${OUT}")
endif()

# shard --json echoes its inputs beside the ranks.
run(0 shard --shape 10,5 --dtype bf16 --mesh 2x2 --mesh-names dp,tp --placements S0,S1 --json)
json_get(shape0 "${OUT}" shape 0)
json_get(mesh1 "${OUT}" mesh shape 1)
json_get(name1 "${OUT}" mesh names 1)
json_get(placements "${OUT}" placements)
json_get(rank3 "${OUT}" ranks 3 rank)
if(NOT shape0 EQUAL 10 OR NOT mesh1 EQUAL 2 OR NOT name1 STREQUAL "tp"
   OR NOT placements STREQUAL "S0,S1" OR NOT rank3 EQUAL 3)
  message(FATAL_ERROR "shard --json: inputs not echoed\n${OUT}")
endif()
# Zero-size dims are legal where PyTorch allows them: nothing is split here.
run(0 shard --shape 4,0 --dtype bf16 --mesh 2 --placements R --json)
json_get(bytes "${OUT}" ranks 1 bytes)
if(NOT bytes EQUAL 0)
  message(FATAL_ERROR "shard --shape 4,0: expected empty shards\n${OUT}")
endif()

# A checkpoint in another precision than its config: one grouped warning line, not one per tensor.
# tiny-llama holds 21 BF16 tensors; a float32 config makes every one of them differ.
set(st "${CMAKE_CURRENT_LIST_DIR}/../data/safetensors")
set(work "${CMAKE_CURRENT_BINARY_DIR}/cli_language_smoke")
file(REMOVE_RECURSE "${work}")
file(MAKE_DIRECTORY "${work}")
file(READ "${st}/tiny-llama/config.json" config)
string(JSON config SET "${config}" torch_dtype "\"float32\"")
file(WRITE "${work}/fp32-config.json" "${config}")
run(0 inspect --checkpoint "${st}/tiny-llama/model.safetensors" --config "${work}/fp32-config.json")
string(REGEX MATCHALL "dtype \\(warning\\)" warnings "${OUT}")
list(LENGTH warnings nwarnings)
expect_match("grouped dtype warning" "21 tensor\\(s\\) are bfloat16 in the checkpoint, float32 in the model"
             "${OUT}")
if(NOT nwarnings EQUAL 1)
  message(FATAL_ERROR "expected one grouped dtype warning, got ${nwarnings}:\n${OUT}")
endif()

# A checkpoint folder named relative to the working directory, with or without "./".
file(COPY "${st}/tiny-llama" DESTINATION "${work}")
foreach(model IN ITEMS "tiny-llama" "./tiny-llama")
  execute_process(COMMAND "${SHARDPLAN}" inspect --model ${model} --seq 16 WORKING_DIRECTORY "${work}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "inspect --model ${model} in ${work}: exit ${rc}\n${err}")
  endif()
endforeach()

# Names: case-insensitive where the ecosystem treats them so, and a near miss gets a suggestion.
run(0 collective --cluster DGX-H100 --kind all_reduce --group-size 8 --bytes 1GiB --algorithm Ring
    --json)
json_get(algorithm "${OUT}" algorithm)
if(NOT algorithm STREQUAL "ring")
  message(FATAL_ERROR "--algorithm Ring: expected ring\n${OUT}")
endif()
run(0 shard --shape 4 --dtype BF16 --mesh 2 --placements S0 --json)
json_get(dtype "${OUT}" dtype)
if(NOT dtype STREQUAL "bfloat16")
  message(FATAL_ERROR "--dtype BF16: expected bfloat16\n${OUT}")
endif()
run(0 inspect --model Llama3-8B --seq 16 --json)
run(2 collective --cluster dgx-h10 --kind all_reduce --group-size 8 --bytes 1GiB)
expect_match("cluster typo" "unknown cluster 'dgx-h10' \\(did you mean 'dgx-h100'\\?\\)" "${ERR}")
run(2 collective --cluster dgx-h100 --kind all_reduce --group-size 8 --bytes 1GiB --algorithm pat)
expect_match("an NCCL algorithm the model does not price" "NCCL's but shardplan's cost model does not"
             "${ERR}")
run(2 shard --shape 4 --dtype bfloat61 --mesh 2 --placements S0)
expect_match("dtype typo" "did you mean 'bfloat16'" "${ERR}")

# A misspelt flag is named, with the nearest real one, before any "required" message; parse errors
# point at the verb's own help.
run(2 shard --shape 10,5 --mesh 2x2 --placement S0,S1)
expect_match("misspelt flag"
             "unknown option '--placement' for 'shard' \\(did you mean '--placements'\\?\\).*shardplan shard --help"
             "${ERR}")
run(2 shard --shape 10,5 --mesh 2x2)
expect_match("missing flag" "--placements is required.*'shardplan shard --help'" "${ERR}")
# One mesh syntax, with its own hint.
run(2 shard --shape 10,5 --mesh 2x --placements S0,S1)
expect_match("--mesh 2x" "expected a mesh shape like 2x4" "${ERR}")
run(2 shard --shape 10,5 --mesh 2,2 --placements S0,S1)
expect_match("--mesh 2,2" "expected a mesh shape like 2x4" "${ERR}")

# Every verb prints its --json document in one formatting: one compact line.
foreach(args IN ITEMS "env" "inspect;--model;gpt2" "shard;--shape;4;--mesh;2;--placements;S0")
  run(0 ${args} --json)
  string(REGEX MATCHALL "\n" lines "${OUT}")
  list(LENGTH lines nlines)
  if(NOT nlines EQUAL 1)
    message(FATAL_ERROR "shardplan ${args} --json: ${nlines} lines, expected one\n${OUT}")
  endif()
endforeach()
# A failed command under --json still exits non-zero with its one line on stderr, stdout empty.
run(2 shard --shape 4 --mesh 3x --placements S0 --json)
expect_match("--json error" "^shardplan: error: [^\n]+\n$" "${ERR}")
if(NOT OUT STREQUAL "")
  message(FATAL_ERROR "--json error wrote to stdout:\n${OUT}")
endif()

# Text never uses one unit letter for two things: parameters are counted in billions, bytes are
# bytes. GPT-2 has 124,439,808 parameters (its published size).
run(0 inspect --model gpt2)
expect_match("parameters in words" "parameters +124,439,808 \\(0.12 billion\\)" "${OUT}")
if(OUT MATCHES "[0-9] B\\)")
  message(FATAL_ERROR "inspect prints a count with the byte unit B:\n${OUT}")
endif()
