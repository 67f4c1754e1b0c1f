#include "collectives/communicator.h"

#include <cstring>

#include "base/error.h"

namespace shardplan::collectives {

size_t reduce_element_size(ReduceElement e) {
  switch (e) {
    case ReduceElement::kUInt64:
    case ReduceElement::kInt64:
    case ReduceElement::kFloat64:
      return 8;
    case ReduceElement::kFloat32:
      return 4;
    case ReduceElement::kBFloat16:
      return 2;
  }
  return 1;
}

int64_t mesh_split_color(std::span<const int64_t> shape, std::span<const int64_t> coord,
                         size_t dim) {
  int64_t color = 0;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (k != dim) color = color * shape[k] + coord[k];
  }
  return color;
}

namespace {

bool in_dims(std::span<const size_t> dims, size_t k) {
  for (const size_t d : dims) {
    if (d == k) return true;
  }
  return false;
}

}  // namespace

int64_t mesh_group_color(std::span<const int64_t> shape, std::span<const int64_t> coord,
                         std::span<const size_t> dims) {
  int64_t color = 0;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (!in_dims(dims, k)) color = color * shape[k] + coord[k];
  }
  return color;
}

int64_t mesh_group_key(std::span<const int64_t> shape, std::span<const int64_t> coord,
                       std::span<const size_t> dims) {
  int64_t key = 0;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (in_dims(dims, k)) key = key * shape[k] + coord[k];
  }
  return key;
}

namespace {

void copy_bytes(const void* in, void* out, size_t bytes) {
  if (bytes > 0 && in != out) std::memmove(out, in, bytes);
}

void check_self_peer(int64_t peer, const char* call) {
  SP_CHECK(peer == 0, "SelfCommunicator::", call, ": peer ", peer,
           " is not a rank of a one-rank group (expected 0)");
}

}  // namespace

std::string SelfCommunicator::who() const { return "rank 0 (single process)"; }

void SelfCommunicator::all_gather(const void* in, void* out, size_t bytes) {
  copy_bytes(in, out, bytes);
}

void SelfCommunicator::all_gather_varying(const void* in, size_t bytes, std::vector<std::byte>& out,
                                          std::vector<size_t>& counts) {
  out.resize(bytes);
  copy_bytes(in, out.data(), bytes);
  counts.assign(1, bytes);
}

void SelfCommunicator::reduce_scatter(const void* in, void* out, size_t count, ReduceElement e,
                                      ReduceOp /*op*/) {
  copy_bytes(in, out, count * reduce_element_size(e));
}

void SelfCommunicator::all_reduce(void* /*data*/, size_t /*count*/, ReduceElement /*e*/,
                                  ReduceOp /*op*/) {}

void SelfCommunicator::all_to_all(const void* in, void* out, size_t bytes) {
  copy_bytes(in, out, bytes);
}

void SelfCommunicator::broadcast(void* /*data*/, size_t /*bytes*/, int64_t root) {
  check_self_peer(root, "broadcast");
}

// A process cannot wait for a message from itself without deadlocking a blocking recv, so
// point-to-point on one rank is a bug in the caller.
void SelfCommunicator::send(const void* /*data*/, size_t /*bytes*/, int64_t peer, int /*tag*/) {
  check_self_peer(peer, "send");
  SP_FAIL("SelfCommunicator::send: a one-rank group has no peer to send to");
}

void SelfCommunicator::recv(void* /*data*/, size_t /*bytes*/, int64_t peer, int /*tag*/) {
  check_self_peer(peer, "recv");
  SP_FAIL("SelfCommunicator::recv: a one-rank group has no peer to receive from");
}

}  // namespace shardplan::collectives
