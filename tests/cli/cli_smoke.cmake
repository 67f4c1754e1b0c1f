# ctest `cli_smoke`: the shardplan binary keeps the CLI contract of docs/architecture.md §4. Run as
#   cmake -DSHARDPLAN=<path to shardplan> -DEXPECTED_VERSION=0.1.0 -P cli_smoke.cmake

include("${CMAKE_CURRENT_LIST_DIR}/smoke_helpers.cmake")

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

# redistribute: docs/semantics.md §3.6's [S0,S1] -> [S1,S0] on mesh (2,2) is md1 all_gather, md0
# all_to_all, md1 local chunk (2 collectives); bf16 (8,8): each rank holds (4,4), gathers
# 2 x 16 x 2 B = 64 B.
run(0 redistribute --shape 8,8 --dtype bf16 --mesh 2x2 --from S0,S1 --to S1,S0 --json)
string(JSON collectives ERROR_VARIABLE json_error GET "${OUT}" collectives)
string(JSON nsteps LENGTH "${OUT}" steps)
string(JSON op0 GET "${OUT}" steps 0 op)
string(JSON bytes0 GET "${OUT}" steps 0 bytes_per_rank)
string(JSON op1 GET "${OUT}" steps 1 op)
if(json_error OR NOT collectives EQUAL 2 OR NOT nsteps EQUAL 3 OR NOT op0 STREQUAL "all_gather"
   OR NOT bytes0 EQUAL 64 OR NOT op1 STREQUAL "all_to_all")
  message(FATAL_ERROR "redistribute --json: unexpected plan ${json_error}\n${OUT}")
endif()
# On a cluster every step is priced and the plan has a total; min-cost is accepted.
run(0 redistribute --shape 4096,4096 --dtype bf16 --mesh 2x8 --from S0,S1 --to R,S0
    --planner min-cost --cluster dgx-h100 --json)
string(JSON total ERROR_VARIABLE json_error GET "${OUT}" total_time_s)
string(JSON t0 ERROR_VARIABLE json_error0 GET "${OUT}" steps 0 time_s)
if(json_error OR json_error0 OR NOT total GREATER 0)
  message(FATAL_ERROR "redistribute --cluster --json: no step times or total\n${OUT}")
endif()
run(0 redistribute --shape 8,8 --mesh 2x2 --from S0,R --to R,S1)
expect_match("redistribute text" "all_gather" "${OUT}")
# Refused transitions and bad placements: exit 2, one line naming the problem.
foreach(args IN ITEMS "S0,R;S0,P" "S0;R,R" "S0,Pmax;R,P" "S2,R;R,R")
  list(GET args 0 from)
  list(GET args 1 to)
  run(2 redistribute --shape 8,8 --mesh 2x2 --from ${from} --to ${to})
  expect_match("redistribute ${from} -> ${to} stderr" "^shardplan: error: [^\n]+\n$" "${ERR}")
endforeach()

# inspect --model: published parameter counts (Meta's model card; Radford et al. via HF GPT-2).
foreach(case IN ITEMS "llama3-70b;70553706496" "gpt2;124439808")
  list(GET case 0 model)
  list(GET case 1 expected)
  run(0 inspect --model ${model} --seq 1024 --json)
  string(JSON params GET "${OUT}" parameters)
  string(JSON fpt ERROR_VARIABLE e1 GET "${OUT}" flops_per_token)
  string(JSON act ERROR_VARIABLE e2 GET "${OUT}" activation_bytes)
  if(NOT params STREQUAL expected OR e1 OR e2 OR NOT fpt GREATER 0 OR NOT act GREATER 0)
    message(FATAL_ERROR "inspect --model ${model}: parameters ${params}, expected ${expected}\n${OUT}")
  endif()
endforeach()
# A model named by its checkpoint (config.json beside it): the tiny Llama of
# scripts/gen_safetensors_fixtures.py, 4944 parameters by hand, 21 tensors.
set(st "${CMAKE_CURRENT_LIST_DIR}/../data/safetensors")
foreach(path IN ITEMS "${st}/tiny-llama/model.safetensors" "${st}/tiny-llama")
  run(0 inspect --model "${path}" --seq 8 --json)
  string(JSON params GET "${OUT}" parameters)
  string(JSON tensors GET "${OUT}" checkpoint tensors)
  if(NOT params EQUAL 4944 OR NOT tensors EQUAL 21)
    message(FATAL_ERROR "inspect --model ${path}: ${params} parameters, ${tensors} tensors\n${OUT}")
  endif()
endforeach()
# inspect --checkpoint --config: findings by name, exit 0 (1 with --strict).
set(bad "${st}/tiny-llama-bad")
run(0 inspect --checkpoint "${bad}/model.safetensors.index.json" --config "${bad}/config.json" --json)
string(JSON loadable GET "${OUT}" check loadable)
string(JSON missing GET "${OUT}" check missing 0)
string(JSON unexpected GET "${OUT}" check unexpected 0)
string(JSON misshaped GET "${OUT}" check shape_mismatches 0 name)
if(loadable OR NOT missing STREQUAL "lm_head.weight"
   OR NOT unexpected STREQUAL "model.layers.0.self_attn.rotary_emb.inv_freq"
   OR NOT misshaped STREQUAL "model.layers.1.self_attn.q_proj.weight")
  message(FATAL_ERROR "inspect --checkpoint --config: unexpected check\n${OUT}")
endif()
run(1 inspect --checkpoint "${bad}/model.safetensors.index.json" --config "${bad}/config.json" --strict)
run(0 inspect --checkpoint "${st}/tiny-llama/model.safetensors" --config "${st}/tiny-llama/config.json")
expect_match("inspect --checkpoint text" "tensors +21\n.*: loadable" "${OUT}")
# Bad input, one line naming the file and the field or tensor: a hostile header, a checkpoint that
# does not fit its config.json, a config with heads not dividing hidden, two sources at once.
file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/cli_smoke_heads.json"
     "{\"model_type\": \"llama\", \"vocab_size\": 32, \"hidden_size\": 16, \"intermediate_size\": 24, "
     "\"num_hidden_layers\": 2, \"num_attention_heads\": 3}")
foreach(case IN ITEMS
        "--checkpoint;${st}/hostile/overlap.safetensors;overlap.safetensors: tensor \"b\""
        "--model;${bad}/model.safetensors.index.json;index.json: does not fit .*lm_head.weight"
        "--model;${CMAKE_CURRENT_BINARY_DIR}/cli_smoke_heads.json;heads.json: field 'num_attention_heads'")
  list(GET case 0 flag)
  list(GET case 1 value)
  list(GET case 2 regex)
  run(2 inspect ${flag} "${value}")
  expect_match("inspect ${flag} ${value} stderr" "^shardplan: error: [^\n]*${regex}[^\n]*\n$" "${ERR}")
endforeach()
file(REMOVE "${CMAKE_CURRENT_BINARY_DIR}/cli_smoke_heads.json")
run(2 inspect --model gpt2 --checkpoint "${st}/tiny-llama")

# collective: the issue's example; JSON keys algorithm, time_s, algbw_gbps, busbw_gbps. busbw of a
# 16-rank ring over 2 DGX H100 nodes is bounded by NVLink's 370.8 GB/s (configs/clusters).
run(0 collective --cluster dgx-h100 --nodes 2 --kind all_reduce --group-size 16 --bytes 1GiB --json)
string(JSON algorithm ERROR_VARIABLE json_error GET "${OUT}" algorithm)
string(JSON busbw GET "${OUT}" busbw_gbps)
string(JSON algbw GET "${OUT}" algbw_gbps)
string(JSON time_s GET "${OUT}" time_s)
string(JSON bytes GET "${OUT}" bytes)
if(json_error OR algorithm STREQUAL "" OR NOT bytes EQUAL 1073741824 OR NOT busbw GREATER 300
   OR NOT busbw LESS 370.8 OR NOT algbw GREATER 0 OR NOT time_s GREATER 0)
  message(FATAL_ERROR "collective --json: unexpected document ${json_error}\n${OUT}")
endif()
run(0 collective --cluster dgx-h100 --kind all_gather --group-size 8 --bytes 512MB --json)
string(JSON bytes GET "${OUT}" bytes)
if(NOT bytes EQUAL 512000000)
  message(FATAL_ERROR "collective --bytes 512MB: expected 512000000 bytes\n${OUT}")
endif()
run(0 collective --cluster dgx-a100-80g --kind send_recv --group-size 2 --bytes 123)
expect_match("collective text" "algorithm +direct.*busbw" "${OUT}")
# A group beyond the cluster, an unknown unit or kind: exit 2, one line.
foreach(args IN ITEMS "--nodes;2;--kind;all_reduce;--group-size;17;--bytes;1GiB"
                      "--kind;all_reduce;--group-size;8;--bytes;1Gb"
                      "--kind;all_scatter;--group-size;8;--bytes;1GiB")
  run(2 collective --cluster dgx-h100 ${args})
  expect_match("collective ${args} stderr" "^shardplan: error: [^\n]+\n$" "${ERR}")
endforeach()

# calibrate: an nccl-tests log synthesized with 0.5 us per ring step and 350 GB/s bus bandwidth
# (scripts/gen_nccl_tests_logs.py) gives those back, and the written file prices the logged run
# (8-rank ring all_reduce of 32e6 B) at the logged 175.4 us.
set(logs "${CMAKE_CURRENT_LIST_DIR}/../data/nccl_tests")
set(calibrated "${CMAKE_CURRENT_BINARY_DIR}/cli_smoke_calibrated_h100.json")
file(REMOVE "${calibrated}")
run(0 calibrate --cluster dgx-h100 --log "${logs}/all_reduce_perf_h100_8gpu.log" --link nvlink
    --out "${calibrated}" --json)
string(JSON latency ERROR_VARIABLE json_error GET "${OUT}" links 0 latency_s)
string(JSON bandwidth GET "${OUT}" links 0 bandwidth_gbps)
if(json_error OR latency LESS 4.999e-7 OR latency GREATER 5.001e-7 OR bandwidth LESS 349.999
   OR bandwidth GREATER 350.001)
  message(FATAL_ERROR "calibrate --json: expected 0.5 us and 350 GB/s ${json_error}\n${OUT}")
endif()
run(0 collective --cluster "${calibrated}" --kind all_reduce --group-size 8 --bytes 32000000
    --algorithm ring --json)
string(JSON time_s GET "${OUT}" time_s)
expect_match("collective on the calibrated cluster" "^0\\.00017539999|^0\\.0001754" "${time_s}")
file(REMOVE "${calibrated}")
# Malformed logs, unknown links: exit 2, one line naming file and line; no output file.
run(2 calibrate --cluster dgx-h100 --log "${logs}/truncated_all_reduce_perf.log" --link nvlink
    --out "${calibrated}")
expect_match("calibrate truncated log" "^shardplan: error: [^\n]*truncated_all_reduce_perf.log:23: [^\n]+\n$" "${ERR}")
run(2 calibrate --cluster dgx-h100 --log "${logs}/all_reduce_perf_h100_8gpu.log" --link pcie
    --out "${calibrated}")
expect_match("calibrate --link pcie" "^shardplan: error: unknown link class 'pcie'[^\n]+\n$" "${ERR}")
if(EXISTS "${calibrated}")
  message(FATAL_ERROR "calibrate wrote ${calibrated} although it failed")
endif()

# calibrate --compute: the project's H100 measurement fits a cluster and a stack file that plan
# then reads; a stack fit without --compute, or one measured on another GPU, is one line and
# writes nothing.
set(measured "${CMAKE_CURRENT_LIST_DIR}/../data/gpu_measured_h100.json")
set(fitted_stack "${CMAKE_CURRENT_BINARY_DIR}/cli_smoke_fitted_pytorch.json")
file(REMOVE "${calibrated}" "${fitted_stack}")
run(0 calibrate --cluster dgx-h100 --compute "${measured}" --out "${calibrated}"
    --stack-out "${fitted_stack}" --json)
string(JSON fitted_efficiency ERROR_VARIABLE json_error GET "${OUT}" fits 4 fitted)
string(JSON fitted_what GET "${OUT}" fits 4 what)
if(json_error OR NOT fitted_what STREQUAL "compute_efficiency" OR fitted_efficiency LESS 0.9)
  message(FATAL_ERROR "calibrate --compute --json: expected the stack's efficiency last ${json_error}\n${OUT}")
endif()
run(0 plan --model llama3-8b --cluster "${calibrated}" --stack "${fitted_stack}" --gpus 8
    --seq 4096 --global-batch 64 --json)
expect_match("plan on the fitted files" "\"stack\": ?\"cli_smoke_fitted_pytorch\"" "${OUT}")
file(REMOVE "${calibrated}" "${fitted_stack}")
run(2 calibrate --cluster dgx-h100 --log "${logs}/all_reduce_perf_h100_8gpu.log" --link nvlink
    --out "${calibrated}" --stack-out "${fitted_stack}")
expect_match("--stack-out without --compute" "^shardplan: error: --stack-out [^\n]+expected --compute FILE with it\n$" "${ERR}")
run(2 calibrate --cluster dgx-a100-80g --compute "${measured}" --out "${calibrated}")
expect_match("calibrate --compute on another GPU" "^shardplan: error: [^\n]*measured on a GPU with 132 SMs[^\n]+\n$" "${ERR}")
if(EXISTS "${calibrated}" OR EXISTS "${fitted_stack}")
  message(FATAL_ERROR "calibrate --compute wrote a file although it failed")
endif()

# More shards than elements is a valid layout, as in PyTorch's distribute_tensor: 3 elements over 4
# ranks are chunks of ceil(3/4) = 1, so ranks 0-2 hold one element each and rank 3 an empty shard
# whose global offset is the dim size, 3 (compute_local_shape_and_global_offset).
run(0 shard --shape 3 --dtype bf16 --mesh 4 --placements S0 --json)
foreach(r 0 1 2 3)
  string(JSON n${r} GET "${OUT}" ranks ${r} local_shape 0)
  string(JSON o${r} GET "${OUT}" ranks ${r} global_offset 0)
endforeach()
if(NOT "${n0}${n1}${n2}${n3}" STREQUAL "1110" OR NOT "${o0}${o1}${o2}${o3}" STREQUAL "0123")
  message(FATAL_ERROR "shard 3 over 4 ranks: shapes ${n0},${n1},${n2},${n3} offsets "
                      "${o0},${o1},${o2},${o3}, expected 1,1,1,0 and 0,1,2,3\n${OUT}")
endif()
# ... and it redistributes: all_gather of one padded element per rank (bf16: 2 B per rank x 4).
run(0 redistribute --shape 3 --dtype bf16 --mesh 4 --from S0 --to R --json)
string(JSON op0 GET "${OUT}" steps 0 op)
string(JSON bytes0 GET "${OUT}" steps 0 bytes_per_rank)
if(NOT op0 STREQUAL "all_gather" OR NOT bytes0 EQUAL 8)
  message(FATAL_ERROR "redistribute S0 -> R of 3 elements over 4 ranks: ${op0} ${bytes0} B, "
                      "expected all_gather of 8 B\n${OUT}")
endif()

# inspect without --seq: the model's own positions capped at 4096 (GPT-2: 1024), said in the output.
run(0 inspect --model gpt2 --json)
string(JSON seq GET "${OUT}" seq)
string(JSON seq_default GET "${OUT}" seq_is_default)
if(NOT seq EQUAL 1024 OR NOT seq_default STREQUAL "ON")
  message(FATAL_ERROR "inspect --model gpt2: seq ${seq} (default ${seq_default}), expected 1024\n${OUT}")
endif()
run(0 inspect --model llama3-8b --json)
string(JSON seq GET "${OUT}" seq)
if(NOT seq EQUAL 4096)
  message(FATAL_ERROR "inspect --model llama3-8b: seq ${seq}, expected 4096 (8192 capped)\n${OUT}")
endif()

# A multimodal config.json (Note [Multimodal configs]): its language model is inspected and
# planned, with a note on stderr saying the vision encoder is not modelled. Gemma 3 4B's text
# model: 3,880,263,168 parameters (the hand formula of ModelParams.Gemma3_4BLanguageModelOfIts...).
set(mm "${CMAKE_CURRENT_BINARY_DIR}/cli_smoke_gemma3.json")
file(WRITE "${mm}" [=[{"model_type": "gemma3", "torch_dtype": "bfloat16",
  "vision_config": {"model_type": "siglip_vision_model"},
  "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                  "num_hidden_layers": 34, "sliding_window": 1024}}]=])
run(0 inspect --model "${mm}" --seq 1024 --json)
json_get(params "${OUT}" parameters)
json_get(outer "${OUT}" multimodal_model_type)
if(NOT params EQUAL 3880263168 OR NOT outer STREQUAL "gemma3")
  message(FATAL_ERROR "inspect --model gemma3 config: ${params} parameters, ${outer}\n${OUT}")
endif()
run(0 estimate --model "${mm}" --cluster dgx-h100 --gpus 8 --seq 4096 --global-batch 64 --dp 8)
expect_match("estimate of a multimodal config, stderr"
             "^note: [^\n]*'gemma3' is a multimodal model: its language model \\(gemma3_text, its text_config\\) is what is planned; the vision encoder and projector are not modelled\n$"
             "${ERR}")

# quantization_config (DeepSeek-V3's published checkpoint is fp8): counts unchanged, said in a note.
run(0 inspect --model deepseek-v3 --seq 128 --json)
json_get(quant "${OUT}" quantization_method)
if(NOT quant STREQUAL "fp8")
  message(FATAL_ERROR "inspect --model deepseek-v3: quantization_method '${quant}', expected fp8")
endif()
run(0 inspect --model deepseek-v3 --seq 128)
expect_match("inspect deepseek-v3 quantization note"
             "note: the config's checkpoint stores weights quantized \\(quantization_config fp8\\); bytes here are in torch_dtype, bfloat16"
             "${OUT}")
