// Counts heap allocations, for the tests that show a code path allocates nothing: include this
// header in exactly one source file of a test executable. It replaces the global operator new
// and delete and, outside AddressSanitizer builds (ASan owns malloc), malloc, calloc, realloc and
// the aligned allocators, which is where Eigen, libgomp and the C++ runtime get their memory.
// Every thread counts while g_counting is true (allocations_during(f) counts what f does), each
// allocation once; GROVE_COUNTS_MALLOC says whether malloc counts.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <new>

namespace {
std::atomic<long> g_allocations{0};
std::atomic<bool> g_counting{false};
inline void note_allocation() {
  if (g_counting.load(std::memory_order_relaxed))
    g_allocations.fetch_add(1, std::memory_order_relaxed);
}

// The allocations that f() makes, on any thread: what a test compares with 0 once the code path
// has been warmed up.
template <class F>
long allocations_during(F&& f) {
  g_allocations = 0;
  g_counting = true;
  f();
  g_counting = false;
  return g_allocations.load();
}
}  // namespace

// This file replaces operator new and delete together (new calls malloc, delete calls free):
// GCC's check that sees an inlined `new` reach `free` does not know that.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#if defined(__SANITIZE_ADDRESS__)
#define GROVE_COUNTS_MALLOC 0
#else
#define GROVE_COUNTS_MALLOC 1
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void* malloc(std::size_t n) {
  note_allocation();
  return __libc_malloc(n);
}
void* calloc(std::size_t count, std::size_t n) {
  note_allocation();
  return __libc_calloc(count, n);
}
void* realloc(void* p, std::size_t n) {
  note_allocation();
  return __libc_realloc(p, n);
}
void* aligned_alloc(std::size_t alignment, std::size_t n) {
  note_allocation();
  return __libc_memalign(alignment, n);
}
void* memalign(std::size_t alignment, std::size_t n) {
  note_allocation();
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
  note_allocation();
  *out = __libc_memalign(alignment, n);
  return *out ? 0 : ENOMEM;
}
}
#endif

namespace {
// The memory behind operator new, taken without counting the allocation a second time.
inline void* uncounted_malloc(std::size_t n) {
#if GROVE_COUNTS_MALLOC
  return __libc_malloc(n ? n : 1);
#else
  return std::malloc(n ? n : 1);
#endif
}
inline void* uncounted_aligned(std::size_t alignment, std::size_t n) {
#if GROVE_COUNTS_MALLOC
  return __libc_memalign(alignment, n ? n : 1);
#else
  void* p = nullptr;
  return posix_memalign(&p, alignment, n ? n : 1) == 0 ? p : nullptr;
#endif
}
}  // namespace

void* operator new(std::size_t n) {
  note_allocation();
  if (void* p = uncounted_malloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  note_allocation();
  if (void* p = uncounted_malloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
  note_allocation();
  if (void* p = uncounted_aligned(static_cast<std::size_t>(a), n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return operator new(n, a);
}
// Catch2 allocates its test registry with the nothrow forms: they must pair with the frees
// below too (AddressSanitizer reports the mismatch otherwise).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  note_allocation();
  return uncounted_malloc(n);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  note_allocation();
  return uncounted_malloc(n);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
