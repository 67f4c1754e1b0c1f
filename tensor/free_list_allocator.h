// A per-thread free list for the two objects every meta op allocates (TensorImpl and, for
// non-views, StorageImpl, each with its shared_ptr control block), used through
// std::allocate_shared:
//   auto impl = std::allocate_shared<TensorImpl>(FreeListAllocator<TensorImpl>{});
//
// Why: on meta, an op is pure bookkeeping, and glibc's malloc + free of those two blocks was about
// 250 of the ~1,800 instructions of a pointwise op (callgrind, tests/bench/meta_ops_bench.cpp).
// Popping and pushing a thread-local singly linked list costs a handful.
//
// Blocks come from ::operator new and go back to it when the thread that freed them last exits, so
// a block freed on another thread than the one that allocated it is simply adopted by that thread's
// list (no cross-thread state, no locks). The lists keep at most kMaxCached blocks per size, so the
// memory held is bounded by the size times kMaxCached per thread.
#pragma once

#include <cstddef>
#include <new>

namespace shardplan::tensor {

namespace detail {

// One thread's cache of free blocks of `Size` bytes (all blocks of one list have the same size and
// the default new alignment). The state is a trivially destructible thread_local, so it stays
// usable while the thread's other thread_locals and, on the main thread, static objects are
// destroyed (a static Tensor freed at exit); a drainer registered on first use returns the cached
// blocks at thread exit and marks the list dead, after which blocks go straight back to delete.
// Under AddressSanitizer every block goes straight to new/delete, so that a use after free of a
// TensorImpl or StorageImpl is still caught instead of landing in a cached block.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kBypass = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kBypass = true;
#else
inline constexpr bool kBypass = false;
#endif
#else
inline constexpr bool kBypass = false;
#endif

template <std::size_t Size>
class FreeList {
 public:
  static constexpr int kMaxCached = 4096;

  static void* pop() {
    if constexpr (kBypass) return ::operator new(Size);
    State& s = state();
    if (s.head == nullptr) return ::operator new(Size);
    Node* n = s.head;
    s.head = n->next;
    --s.cached;
    return n;
  }

  static void push(void* p) {
    State& s = state();
    if (kBypass || s.dead || s.cached == kMaxCached) {
      ::operator delete(p);
      return;
    }
    if (!s.registered) {
      thread_local Drainer drainer;  // constructed once per thread; its destructor runs at exit
      s.registered = true;
    }
    Node* n = static_cast<Node*>(p);
    n->next = s.head;
    s.head = n;
    ++s.cached;
  }

 private:
  struct Node {
    Node* next;
  };
  static_assert(Size >= sizeof(Node));
  struct State {
    Node* head = nullptr;
    int cached = 0;
    bool registered = false;
    bool dead = false;
  };
  struct Drainer {
    Drainer() = default;
    Drainer(const Drainer&) = delete;
    Drainer& operator=(const Drainer&) = delete;
    ~Drainer() {
      State& s = state();
      while (s.head != nullptr) {
        Node* next = s.head->next;
        ::operator delete(s.head);
        s.head = next;
      }
      s.cached = 0;
      s.dead = true;
    }
  };
  static State& state() {
    thread_local constinit State s;
    return s;
  }
};

}  // namespace detail

// A stateless allocator for std::allocate_shared: single objects come from the thread's free list
// for their size; arrays (never asked for by allocate_shared) go to ::operator new.
template <typename T>
struct FreeListAllocator {
  using value_type = T;

  FreeListAllocator() = default;
  template <typename U>
  explicit FreeListAllocator(const FreeListAllocator<U>& /*other*/) noexcept {}

  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    if (n != 1) return static_cast<T*>(::operator new(n * sizeof(T)));
    return static_cast<T*>(detail::FreeList<sizeof(T)>::pop());
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n != 1) {
      ::operator delete(p);
      return;
    }
    detail::FreeList<sizeof(T)>::push(p);
  }

  template <typename U>
  friend bool operator==(const FreeListAllocator& /*a*/, const FreeListAllocator<U>& /*b*/) {
    return true;
  }
};

}  // namespace shardplan::tensor
