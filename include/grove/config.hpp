// grove/config.hpp: the compiler-dependent macros that several of grove's layers use.
#pragma once

// Tells the compiler that a pointer's target is reached through that pointer only, so that loops
// over several arrays vectorise without run-time overlap checks.
#if defined(__GNUC__) || defined(__clang__) || defined(_MSC_VER)
#define GROVE_RESTRICT __restrict
#else
#define GROVE_RESTRICT
#endif

// For the small functions called inside SIMD loops: a call that is not inlined stops the loop
// from vectorising, and compilers' inlining heuristics give up on long bodies (threefry's 20
// rounds) once they have more than one caller.
#if defined(__GNUC__) || defined(__clang__)
#define GROVE_ALWAYS_INLINE [[gnu::always_inline]] inline
#elif defined(_MSC_VER)
#define GROVE_ALWAYS_INLINE __forceinline
#else
#define GROVE_ALWAYS_INLINE inline
#endif

// The same for a lambda (written after its parameter list): a kernel body that must be compiled
// in the instruction set of the function it is inlined into.
#if defined(__GNUC__) || defined(__clang__)
#define GROVE_INLINE_LAMBDA __attribute__((always_inline))
#else
#define GROVE_INLINE_LAMBDA
#endif
