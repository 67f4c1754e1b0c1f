// SHA-256 (FIPS 180-4) of a byte string, as 64 lowercase hex digits: the content hash a plan file
// records for the model and the cluster it was made for, so that an edited or swapped one is
// recognised wherever the plan is read (docs/user-guide.md "plan.json").
//   sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#pragma once

#include <string>
#include <string_view>

namespace shardplan {

std::string sha256_hex(std::string_view bytes);

}  // namespace shardplan
