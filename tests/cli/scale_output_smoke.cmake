# ctest `scale_output_smoke`: `shard` at cluster scale (docs/user-guide.md "shard"): classes
# instead of rows above 1,024 ranks, --ranks all streamed, one rank by --rank / --coord, and the
# 10^15-rank limit. Run as cmake -DSHARDPLAN=<path to shardplan> -P scale_output_smoke.cmake
include("${CMAKE_CURRENT_LIST_DIR}/smoke_helpers.cmake")

# 10^10 ranks: 4 columns over 100,000 ranks of dim 1 leave 4 x 100,000 ranks with a column each.
run(0 shard --shape 4,4 --dtype bf16 --mesh 100000x100000 --placements R,S1 --json)
string(JSON has_ranks ERROR_VARIABLE none GET "${OUT}" ranks)
if(NOT none)
  message(FATAL_ERROR "shard on 10^10 ranks listed every rank without --ranks all")
endif()
json_get(c0 "${OUT}" classes 0 count)
json_get(c1 "${OUT}" classes 1 count)
json_get(s1 "${OUT}" classes 1 local_shape 1)
math(EXPR total "${c0} + ${c1}")
if(NOT c0 EQUAL 400000 OR NOT total EQUAL 10000000000 OR NOT s1 EQUAL 0)
  message(FATAL_ERROR "shard 10^10 ranks: expected classes of 400,000 and the empty rest\n${OUT}")
endif()

# Small meshes keep their rows (and gain classes).
run(0 shard --shape 10,5 --dtype bf16 --mesh 2x2 --placements S0,S1 --json)
json_get(r1 "${OUT}" ranks 1 local_shape 1)
json_get(k "${OUT}" classes 0 count)
if(NOT r1 EQUAL 2 OR NOT k EQUAL 2)
  message(FATAL_ERROR "shard 2x2: expected rank 1 with 2 columns and classes of 2\n${OUT}")
endif()

# One rank: --rank is the row-major position of --coord.
run(0 shard --shape 8191,4096 --dtype bf16 --mesh 16x8x128 --placements S0,S1,S0 --rank 16383
    --json)
json_get(rows "${OUT}" rank local_shape 0)
json_get(off "${OUT}" rank global_offset 0)
run(0 shard --shape 8191,4096 --dtype bf16 --mesh 16x8x128 --placements S0,S1,S0 --coord 15,7,127
    --json)
json_get(rank "${OUT}" rank rank)
if(NOT rows EQUAL 3 OR NOT off EQUAL 8188 OR NOT rank EQUAL 16383)
  message(FATAL_ERROR "shard --rank 16383 / --coord 15,7,127: expected 3 rows at 8188\n${OUT}")
endif()

# --ranks all lists every rank of a large mesh.
run(0 shard --shape 5000 --mesh 2048 --placements S0 --ranks all --json)
json_length(n "${OUT}" ranks)
if(NOT n EQUAL 2048)
  message(FATAL_ERROR "shard --ranks all on 2048 ranks: ${n} rows")
endif()

# Past 10^15 ranks, or past int64: one line, exit 2.
run(2 shard --shape 8 --mesh 1000000x1000000000x2 --placements S0,R,R)
expect_match("10^15" "^shardplan: error: [^\n]*expected at most 10\\^15\n$" "${ERR}")
run(2 shard --shape 8 --mesh 4294967296x4294967296 --placements S0,R)
expect_match("overflow" "^shardplan: error: [^\n]*10\\^15\n$" "${ERR}")
run(2 shard --shape 8 --mesh 4x4 --placements S0,R --coord 4,0)
expect_match("--coord" "--coord entry 0 is 4, expected 0 to 3" "${ERR}")

# --ranks all is streamed: 131,072 rows in no more memory than a small mesh (GNU time's %M, the
# peak resident set in KB, where it is installed). Not under ASan, whose quarantine keeps every
# freed row's memory by design.
find_program(GNU_TIME NAMES time PATHS /usr/bin NO_DEFAULT_PATH)
if(GNU_TIME AND NOT SANITIZED)
  foreach(n 64 131072)
    execute_process(COMMAND "${GNU_TIME}" -f "%M" "${SHARDPLAN}" shard --shape 500000 --mesh ${n}
                            --placements S0 --ranks all --json
                    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE peak_kb)
    string(STRIP "${peak_kb}" peak_kb)
    set(peak_${n} "${peak_kb}")
  endforeach()
  math(EXPR limit "${peak_64} + 8192")
  if(peak_131072 GREATER limit)
    message(FATAL_ERROR "shard --ranks all: ${peak_131072} KB for 131,072 ranks against "
                        "${peak_64} KB for 64: not streamed")
  endif()
endif()

# redistribute reports the classes of both layouts, also on 10^10 ranks: S1 -> R gathers the 4
# columns onto every rank.
run(0 redistribute --shape 4,4 --dtype bf16 --mesh 100000x100000 --from R,S1 --to R,R --json)
json_get(from0 "${OUT}" classes from 0 count)
json_get(to0 "${OUT}" classes to 0 count)
json_get(to_shape "${OUT}" classes to 0 local_shape 1)
if(NOT from0 EQUAL 400000 OR NOT to0 EQUAL 10000000000 OR NOT to_shape EQUAL 4)
  message(FATAL_ERROR "redistribute on 10^10 ranks: expected classes of 400,000 then all\n${OUT}")
endif()
