#include "collectives/mpi/mpi_communicator.h"

#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/convert.h"

namespace shardplan::collectives {
namespace {

// Note [Communicator errors]: every MPI call goes through check().
std::string describe_mpi_error(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<size_t>(length));
}

int world_rank_or_unknown() {
  int initialized = 0;
  int rank = -1;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

std::string host_name() {
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  if (MPI_Get_processor_name(name, &length) != MPI_SUCCESS) return "unknown host";
  return std::string(name, static_cast<size_t>(length));
}

std::string who_is(int64_t rank, const std::string& host) {
  return "rank " + std::to_string(rank) + " on " + host;
}

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  throw RuntimeFailure(who_is(world_rank_or_unknown(), host_name()) + ": " + call + ": " +
                       describe_mpi_error(rc));
}

// MPI counts are int: a transfer beyond 2^31 - 1 elements is refused rather than truncated.
int mpi_count(size_t n, const char* call) {
  if (n > static_cast<size_t>(std::numeric_limits<int>::max())) {
    throw RuntimeFailure(who_is(world_rank_or_unknown(), host_name()) + ": " + call + ": " +
                         std::to_string(n) + " elements exceed MPI's int count (2^31 - 1)");
  }
  return static_cast<int>(n);
}

// bf16 sums: MPI has no bfloat16, so a user op adds in float and rounds back, as NCCL does.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    b[i] = kernels::float_to_bf16_bits(kernels::bf16_bits_to_float(a[i]) +
                                       kernels::bf16_bits_to_float(b[i]));
  }
}
void bf16_min(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    if (kernels::bf16_bits_to_float(a[i]) < kernels::bf16_bits_to_float(b[i])) b[i] = a[i];
  }
}
void bf16_max(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    if (kernels::bf16_bits_to_float(a[i]) > kernels::bf16_bits_to_float(b[i])) b[i] = a[i];
  }
}

MPI_Datatype mpi_type(ReduceElement e) {
  switch (e) {
    case ReduceElement::kUInt64:
      return MPI_UINT64_T;
    case ReduceElement::kInt64:
      return MPI_INT64_T;
    case ReduceElement::kFloat32:
      return MPI_FLOAT;
    case ReduceElement::kFloat64:
      return MPI_DOUBLE;
    case ReduceElement::kBFloat16:
      return MPI_UINT16_T;
  }
  return MPI_BYTE;
}

// The MPI_Op of (element, op): built-in ones, or this file's bf16 ops, created on first use
// (between MPI_Init and MPI_Finalize; freed by MPI_Finalize).
MPI_Op mpi_op(ReduceElement e, ReduceOp op) {
  if (e != ReduceElement::kBFloat16) {
    return op == ReduceOp::kSum ? MPI_SUM : op == ReduceOp::kMin ? MPI_MIN : MPI_MAX;
  }
  static MPI_Op ops[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  MPI_User_function* fns[3] = {&bf16_sum, &bf16_min, &bf16_max};
  const int i = static_cast<int>(op);
  if (ops[i] == MPI_OP_NULL) check(MPI_Op_create(fns[i], /*commute=*/1, &ops[i]), "MPI_Op_create");
  return ops[i];
}

void rank_and_size(MPI_Comm comm, int64_t* rank, int64_t* size) {
  int r = 0;
  int n = 0;
  check(MPI_Comm_rank(comm, &r), "MPI_Comm_rank");
  check(MPI_Comm_size(comm, &n), "MPI_Comm_size");
  *rank = r;
  *size = n;
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, bool owned, std::string who)
      : comm_(comm), owned_(owned), who_(std::move(who)) {
    rank_and_size(comm_, &rank_, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }
  std::string who() const override { return who_; }

  void all_gather(const void* in, void* out, size_t bytes) override {
    const int n = mpi_count(bytes, "MPI_Allgather");
    check(MPI_Allgather(in, n, MPI_BYTE, out, n, MPI_BYTE, comm_), "MPI_Allgather");
  }

  void all_gather_varying(const void* in, size_t bytes, std::vector<std::byte>& out,
                          std::vector<size_t>& counts) override {
    const int mine = mpi_count(bytes, "MPI_Allgatherv");
    std::vector<int> sizes(static_cast<size_t>(size_));
    check(MPI_Allgather(&mine, 1, MPI_INT, sizes.data(), 1, MPI_INT, comm_), "MPI_Allgather");
    std::vector<int> displs(sizes.size());
    size_t total = 0;
    for (size_t r = 0; r < sizes.size(); ++r) {
      displs[r] = mpi_count(total, "MPI_Allgatherv");
      total += static_cast<size_t>(sizes[r]);
    }
    out.resize(total);
    check(MPI_Allgatherv(in, mine, MPI_BYTE, out.data(), sizes.data(), displs.data(), MPI_BYTE,
                         comm_),
          "MPI_Allgatherv");
    counts.assign(sizes.begin(), sizes.end());
  }

  void reduce_scatter(const void* in, void* out, size_t count, ReduceElement e,
                      ReduceOp op) override {
    const int n = mpi_count(count, "MPI_Reduce_scatter_block");
    check(MPI_Reduce_scatter_block(in, out, n, mpi_type(e), mpi_op(e, op), comm_),
          "MPI_Reduce_scatter_block");
  }

  void all_reduce(void* data, size_t count, ReduceElement e, ReduceOp op) override {
    const int n = mpi_count(count, "MPI_Allreduce");
    check(MPI_Allreduce(MPI_IN_PLACE, data, n, mpi_type(e), mpi_op(e, op), comm_), "MPI_Allreduce");
  }

  void all_to_all(const void* in, void* out, size_t bytes) override {
    const int n = mpi_count(bytes, "MPI_Alltoall");
    check(MPI_Alltoall(in, n, MPI_BYTE, out, n, MPI_BYTE, comm_), "MPI_Alltoall");
  }

  void broadcast(void* data, size_t bytes, int64_t root) override {
    check(MPI_Bcast(data, mpi_count(bytes, "MPI_Bcast"), MPI_BYTE, static_cast<int>(root), comm_),
          "MPI_Bcast");
  }

  void send(const void* data, size_t bytes, int64_t peer, int tag) override {
    check(
        MPI_Send(data, mpi_count(bytes, "MPI_Send"), MPI_BYTE, static_cast<int>(peer), tag, comm_),
        "MPI_Send");
  }

  void recv(void* data, size_t bytes, int64_t peer, int tag) override {
    check(MPI_Recv(data, mpi_count(bytes, "MPI_Recv"), MPI_BYTE, static_cast<int>(peer), tag, comm_,
                   MPI_STATUS_IGNORE),
          "MPI_Recv");
  }

  void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }

 private:
  MPI_Comm comm_;
  bool owned_;
  std::string who_;
  int64_t rank_ = 0;
  int64_t size_ = 1;
};

}  // namespace

bool launched_by_mpi_launcher() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS",
                          "SLURM_STEP_NUM_TASKS"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

MpiSession::MpiSession() {
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  rank_and_size(MPI_COMM_WORLD, &rank_, &size_);
  host_ = host_name();
  MPI_Comm node = MPI_COMM_NULL;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, static_cast<int>(rank_),
                            MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  int64_t local = 0;
  rank_and_size(node, &local, &local_size_);
  // The launcher's own local rank when it exports one (it may order a host's ranks differently
  // from MPI's shared-memory split), else the split's.
  const int64_t split_rank = local;
  for (const char* var :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "LOCAL_RANK"}) {
    if (const char* v = std::getenv(var)) {
      char* end = nullptr;
      const long parsed = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && parsed >= 0) {
        local = parsed;
        break;
      }
    }
  }
  local_rank_ = local;
  MPI_Comm_free(&node);
  int leaders = split_rank == 0 ? 1 : 0;  // one rank per host counts it
  check(MPI_Allreduce(MPI_IN_PLACE, &leaders, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
        "MPI_Allreduce");
  nodes_ = leaders;
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string MpiSession::who() const { return who_is(rank_, host_); }

void MpiSession::abort(int exit_code) const {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this is for the type system
}

std::unique_ptr<Communicator> mpi_world(const MpiSession& session) {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, /*owned=*/false, session.who());
}

std::unique_ptr<Communicator> mpi_node_communicator(const MpiSession& session) {
  MPI_Comm node = MPI_COMM_NULL;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED,
                            static_cast<int>(session.world_rank()), MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  check(MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  return std::make_unique<MpiCommunicator>(node, /*owned=*/true, session.who());
}

std::vector<std::unique_ptr<Communicator>> mpi_group_communicators(
    const MpiSession& session, const mesh::DeviceMesh& mesh,
    const std::vector<std::vector<size_t>>& groups) {
  const std::optional<mesh::MeshCoord> coord = mesh.coordinate_of(session.world_rank());
  if (!coord) {
    throw RuntimeFailure(session.who() + ": the plan's mesh of " + std::to_string(mesh.size()) +
                         " ranks does not hold this rank");
  }
  const std::vector<int64_t>& shape = mesh.shape();
  std::vector<std::unique_ptr<Communicator>> out;
  for (const std::vector<size_t>& dims : groups) {
    const int64_t color = mesh_group_color(shape, *coord, dims);
    const int64_t key = mesh_group_key(shape, *coord, dims);
    MPI_Comm comm = MPI_COMM_NULL;
    check(MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(color), static_cast<int>(key), &comm),
          "MPI_Comm_split");
    check(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    out.push_back(std::make_unique<MpiCommunicator>(comm, /*owned=*/true, session.who()));
  }
  return out;
}

MeshCommunicators mpi_mesh_communicators(const MpiSession& session, const mesh::DeviceMesh& mesh) {
  MeshCommunicators out;
  out.world = mpi_world(session);
  std::vector<std::vector<size_t>> groups;
  for (size_t d = 0; d < mesh.shape().size(); ++d) groups.push_back({d});
  out.dims = mpi_group_communicators(session, mesh, groups);
  return out;
}

}  // namespace shardplan::collectives
