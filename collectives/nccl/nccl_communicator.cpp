#include "collectives/nccl/nccl_communicator.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <string>
#include <thread>
#include <vector>

#include "base/error.h"

namespace shardplan::collectives {
namespace {

[[noreturn]] void fail(const std::string& who, const char* call, const std::string& why) {
  throw RuntimeFailure(who + ": " + call + ": " + why);
}

void check_cuda(cudaError_t rc, const std::string& who, const char* call) {
  if (rc != cudaSuccess) fail(who, call, cudaGetErrorString(rc));
}

void check_nccl(ncclResult_t rc, const std::string& who, const char* call, ncclComm_t comm) {
  if (rc == ncclSuccess) return;
  std::string why = ncclGetErrorString(rc);
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') why += std::string(" (") + last + ")";
  }
  fail(who, call, why);
}

ncclDataType_t nccl_type(ReduceElement e) {
  switch (e) {
    case ReduceElement::kUInt64:
      return ncclUint64;
    case ReduceElement::kInt64:
      return ncclInt64;
    case ReduceElement::kFloat32:
      return ncclFloat32;
    case ReduceElement::kFloat64:
      return ncclFloat64;
    case ReduceElement::kBFloat16:
      return ncclBfloat16;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  return op == ReduceOp::kSum ? ncclSum : op == ReduceOp::kMin ? ncclMin : ncclMax;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, std::string who) : comm_(comm), who_(std::move(who)) {
    int r = 0;
    int n = 0;
    check_nccl(ncclCommUserRank(comm_, &r), who_, "ncclCommUserRank", comm_);
    check_nccl(ncclCommCount(comm_, &n), who_, "ncclCommCount", comm_);
    rank_ = r;
    size_ = n;
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), who_,
               "cudaStreamCreateWithFlags");
  }
  ~NcclCommunicator() override {
    cudaStreamDestroy(stream_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }
  std::string who() const override { return who_; }

  void all_gather(const void* in, void* out, size_t bytes) override {
    check_nccl(ncclAllGather(in, out, bytes, ncclUint8, comm_, stream_), who_, "ncclAllGather",
               comm_);
    sync("ncclAllGather");
  }

  // Counts first (one all_gather of sizes), then each rank's bytes broadcast from it into a
  // device buffer: NCCL has no all_gather of varying sizes.
  void all_gather_varying(const void* in, size_t bytes, std::vector<std::byte>& out,
                          std::vector<size_t>& counts) override {
    uint64_t* d_counts = nullptr;
    check_cuda(cudaMalloc(&d_counts, sizeof(uint64_t) * static_cast<size_t>(size_ + 1)), who_,
               "cudaMalloc");
    const uint64_t mine = bytes;
    // On the collectives' stream: a cudaMemcpy from pageable memory may return before the copy
    // lands, and the non-blocking stream_ would not wait for the legacy stream's.
    check_cuda(
        cudaMemcpyAsync(d_counts + size_, &mine, sizeof mine, cudaMemcpyHostToDevice, stream_),
        who_, "cudaMemcpyAsync");
    all_gather(d_counts + size_, d_counts, sizeof(uint64_t));
    std::vector<uint64_t> sizes(static_cast<size_t>(size_));
    check_cuda(
        cudaMemcpy(sizes.data(), d_counts, sizeof(uint64_t) * sizes.size(), cudaMemcpyDeviceToHost),
        who_, "cudaMemcpy");
    cudaFree(d_counts);
    size_t total = 0;
    for (uint64_t s : sizes) total += s;
    std::byte* d_out = nullptr;
    check_cuda(cudaMalloc(&d_out, std::max<size_t>(total, 1)), who_, "cudaMalloc");
    size_t at = 0;
    check_nccl(ncclGroupStart(), who_, "ncclGroupStart", comm_);
    for (size_t r = 0; r < sizes.size(); ++r) {
      const void* src = static_cast<int64_t>(r) == rank_ ? in : d_out + at;
      check_nccl(
          ncclBroadcast(src, d_out + at, sizes[r], ncclUint8, static_cast<int>(r), comm_, stream_),
          who_, "ncclBroadcast", comm_);
      at += sizes[r];
    }
    check_nccl(ncclGroupEnd(), who_, "ncclGroupEnd", comm_);
    sync("ncclBroadcast");
    out.resize(total);
    check_cuda(cudaMemcpy(out.data(), d_out, total, cudaMemcpyDeviceToHost), who_, "cudaMemcpy");
    cudaFree(d_out);
    counts.assign(sizes.begin(), sizes.end());
  }

  void reduce_scatter(const void* in, void* out, size_t count, ReduceElement e,
                      ReduceOp op) override {
    check_nccl(ncclReduceScatter(in, out, count, nccl_type(e), nccl_op(op), comm_, stream_), who_,
               "ncclReduceScatter", comm_);
    sync("ncclReduceScatter");
  }

  void all_reduce(void* data, size_t count, ReduceElement e, ReduceOp op) override {
    check_nccl(ncclAllReduce(data, data, count, nccl_type(e), nccl_op(op), comm_, stream_), who_,
               "ncclAllReduce", comm_);
    sync("ncclAllReduce");
  }

  // Pairwise sends and receives in one group: NCCL's all-to-all.
  void all_to_all(const void* in, void* out, size_t bytes) override {
    check_nccl(ncclGroupStart(), who_, "ncclGroupStart", comm_);
    for (int64_t r = 0; r < size_; ++r) {
      check_nccl(ncclSend(static_cast<const std::byte*>(in) + r * bytes, bytes, ncclUint8,
                          static_cast<int>(r), comm_, stream_),
                 who_, "ncclSend", comm_);
      check_nccl(ncclRecv(static_cast<std::byte*>(out) + r * bytes, bytes, ncclUint8,
                          static_cast<int>(r), comm_, stream_),
                 who_, "ncclRecv", comm_);
    }
    check_nccl(ncclGroupEnd(), who_, "ncclGroupEnd", comm_);
    sync("all_to_all");
  }

  void broadcast(void* data, size_t bytes, int64_t root) override {
    check_nccl(ncclBroadcast(data, data, bytes, ncclUint8, static_cast<int>(root), comm_, stream_),
               who_, "ncclBroadcast", comm_);
    sync("ncclBroadcast");
  }

  // NCCL matches point-to-point by order between a pair, not by tag.
  void send(const void* data, size_t bytes, int64_t peer, int /*tag*/) override {
    check_nccl(ncclSend(data, bytes, ncclUint8, static_cast<int>(peer), comm_, stream_), who_,
               "ncclSend", comm_);
    sync("ncclSend");
  }

  void recv(void* data, size_t bytes, int64_t peer, int /*tag*/) override {
    check_nccl(ncclRecv(data, bytes, ncclUint8, static_cast<int>(peer), comm_, stream_), who_,
               "ncclRecv", comm_);
    sync("ncclRecv");
  }

  // A one-element all-reduce: every rank must enqueue it before any finishes.
  void barrier() override {
    float* d = nullptr;
    check_cuda(cudaMalloc(&d, sizeof(float)), who_, "cudaMalloc");
    check_cuda(cudaMemsetAsync(d, 0, sizeof(float), stream_), who_, "cudaMemsetAsync");
    all_reduce(d, 1, ReduceElement::kFloat32, ReduceOp::kSum);
    cudaFree(d);
  }

 private:
  // Waits for the stream, polling NCCL's asynchronous error meanwhile: a peer that died or a
  // network that failed leaves the kernel waiting forever, so a plain cudaStreamSynchronize
  // would hang every rank; NCCL's documented remedy is ncclCommGetAsyncError, then
  // ncclCommAbort, which makes the kernel return.
  void sync(const char* after) {
    for (;;) {
      const cudaError_t rc = cudaStreamQuery(stream_);
      if (rc == cudaSuccess) return;
      if (rc != cudaErrorNotReady) fail(who_, after, cudaGetErrorString(rc));
      ncclResult_t async = ncclSuccess;
      check_nccl(ncclCommGetAsyncError(comm_, &async), who_, "ncclCommGetAsyncError", comm_);
      if (async != ncclSuccess && async != ncclInProgress) {
        std::string why = ncclGetErrorString(async);
        const char* last = ncclGetLastError(comm_);
        if (last != nullptr && *last != '\0') why += std::string(" (") + last + ")";
        ncclCommAbort(comm_);
        comm_ = nullptr;
        fail(who_, after, why + "; the communicator was aborted");
      }
      std::this_thread::yield();
    }
  }

  ncclComm_t comm_;
  std::string who_;
  cudaStream_t stream_ = nullptr;
  int64_t rank_ = 0;
  int64_t size_ = 1;
};

}  // namespace

NcclDevice::NcclDevice(const MpiSession& session) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    fail(session.who(), "cudaGetDeviceCount",
         rc != cudaSuccess ? cudaGetErrorString(rc) : "no CUDA device is visible");
  }
  device_ = static_cast<int>(session.local_rank() % count);
  check_cuda(cudaSetDevice(device_), session.who(), "cudaSetDevice");
}

MeshCommunicators nccl_group_communicators(const MpiSession& session, const NcclDevice& gpu,
                                           const mesh::DeviceMesh& mesh,
                                           const std::vector<std::vector<size_t>>& groups) {
  const std::string who = session.who() + " (GPU " + std::to_string(gpu.device()) + ")";
  ncclUniqueId id;
  if (session.world_rank() == 0) check_nccl(ncclGetUniqueId(&id), who, "ncclGetUniqueId", nullptr);
  if (MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
    fail(who, "MPI_Bcast", "broadcasting the NCCL unique id failed");
  }
  ncclComm_t world = nullptr;
  check_nccl(ncclCommInitRank(&world, static_cast<int>(session.world_size()), id,
                              static_cast<int>(session.world_rank())),
             who, "ncclCommInitRank", nullptr);
  const std::optional<mesh::MeshCoord> coord = mesh.coordinate_of(session.world_rank());
  if (!coord) fail(who, "nccl_mesh_communicators", "the plan's mesh does not hold this rank");
  MeshCommunicators out;
  const std::vector<int64_t>& shape = mesh.shape();
  for (const std::vector<size_t>& dims : groups) {
    const int64_t color = mesh_group_color(shape, *coord, dims);
    const int64_t key = mesh_group_key(shape, *coord, dims);
    ncclComm_t comm = nullptr;
    check_nccl(ncclCommSplit(world, static_cast<int>(color), static_cast<int>(key), &comm, nullptr),
               who, "ncclCommSplit", world);
    out.dims.push_back(std::make_unique<NcclCommunicator>(comm, who));
  }
  out.world = std::make_unique<NcclCommunicator>(world, who);
  return out;
}

MeshCommunicators nccl_mesh_communicators(const MpiSession& session, const NcclDevice& gpu,
                                          const mesh::DeviceMesh& mesh) {
  std::vector<std::vector<size_t>> groups;
  for (size_t d = 0; d < mesh.shape().size(); ++d) groups.push_back({d});
  return nccl_group_communicators(session, gpu, mesh, groups);
}

}  // namespace shardplan::collectives
