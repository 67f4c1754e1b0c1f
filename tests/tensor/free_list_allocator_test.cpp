// The per-thread free list behind TensorImpl/StorageImpl allocation (tensor/free_list_allocator.h).
#include "tensor/free_list_allocator.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace shardplan::tensor {
namespace {

struct Block {
  int64_t a[5];
};

TEST(FreeListAllocator, ReusesTheLastFreedBlockOfItsSize) {
  if (detail::kBypass) {
    GTEST_SKIP() << "pooling bypassed under AddressSanitizer";
  }
  FreeListAllocator<Block> alloc;
  Block* p = alloc.allocate(1);
  alloc.deallocate(p, 1);
  Block* q = alloc.allocate(1);  // last in, first out
  EXPECT_EQ(p, q);
  Block* r = alloc.allocate(1);  // the list is empty again: a fresh block
  EXPECT_NE(r, q);
  alloc.deallocate(q, 1);
  alloc.deallocate(r, 1);
}

TEST(FreeListAllocator, ArraysBypassTheList) {
  FreeListAllocator<Block> alloc;
  Block* p = alloc.allocate(3);
  p[2].a[4] = 7;  // all three elements are usable
  EXPECT_EQ(p[2].a[4], 7);
  alloc.deallocate(p, 3);
}

// Tensors made on one thread and released on another: the releasing thread adopts the blocks,
// both threads exit cleanly, and the shared storage of a view stays alive while the view does.
TEST(FreeListAllocator, TensorsCrossThreads) {
  std::vector<Tensor> made;
  std::thread maker([&] {
    for (int i = 0; i < 2000; ++i) made.push_back(transpose(empty({4, i + 1}), 0, 1));
  });
  maker.join();
  std::thread releaser([&] {
    for (size_t i = 0; i < made.size(); i += 2) made[i] = Tensor();
  });
  releaser.join();
  for (size_t i = 1; i < made.size(); i += 2) {
    ASSERT_EQ(made[i].sizes(), (DimVector{static_cast<int64_t>(i) + 1, 4}));
    EXPECT_EQ(made[i].storage()->nbytes(), 4 * (static_cast<int64_t>(i) + 1) * 4);
  }
  made.clear();  // released on this thread now
}

}  // namespace
}  // namespace shardplan::tensor
