// grove/detail/preprocessor.hpp: FOR_EACH macros for GROVE_NODE's field lists.
#pragma once

// GROVE_DETAIL_FOR_EACH(M, ctx, a, b, c) expands to M(ctx, a) M(ctx, b) M(ctx, c), for up to 32
// arguments. C++20's __VA_OPT__ lets the recursion stop without compiler extensions.
#define GROVE_DETAIL_PARENS ()
#define GROVE_DETAIL_EXPAND(...) \
  GROVE_DETAIL_EXPAND4(GROVE_DETAIL_EXPAND4(GROVE_DETAIL_EXPAND4(__VA_ARGS__)))
#define GROVE_DETAIL_EXPAND4(...) GROVE_DETAIL_EXPAND3(GROVE_DETAIL_EXPAND3(__VA_ARGS__))
#define GROVE_DETAIL_EXPAND3(...) GROVE_DETAIL_EXPAND2(GROVE_DETAIL_EXPAND2(__VA_ARGS__))
#define GROVE_DETAIL_EXPAND2(...) GROVE_DETAIL_EXPAND1(GROVE_DETAIL_EXPAND1(__VA_ARGS__))
#define GROVE_DETAIL_EXPAND1(...) __VA_ARGS__

#define GROVE_DETAIL_FOR_EACH(macro, ctx, ...) \
  __VA_OPT__(GROVE_DETAIL_EXPAND(GROVE_DETAIL_FOR_EACH_STEP(macro, ctx, __VA_ARGS__)))
#define GROVE_DETAIL_FOR_EACH_STEP(macro, ctx, first, ...) \
  macro(ctx, first)                                        \
      __VA_OPT__(GROVE_DETAIL_FOR_EACH_AGAIN GROVE_DETAIL_PARENS(macro, ctx, __VA_ARGS__))
#define GROVE_DETAIL_FOR_EACH_AGAIN() GROVE_DETAIL_FOR_EACH_STEP

// GROVE_DETAIL_FOR_EACH_LIST(M, ctx, (a, b)) is GROVE_DETAIL_FOR_EACH(M, ctx, a, b); a list `()`
// expands to nothing. The extra step expands the unparenthesised list before FOR_EACH sees it, so
// that __VA_OPT__ sees an empty list as empty.
#define GROVE_DETAIL_UNPAREN(...) __VA_ARGS__
#define GROVE_DETAIL_FOR_EACH_LIST(macro, ctx, list) \
  GROVE_DETAIL_FOR_EACH_LIST_STEP(macro, ctx, GROVE_DETAIL_UNPAREN list)
#define GROVE_DETAIL_FOR_EACH_LIST_STEP(macro, ctx, ...) \
  GROVE_DETAIL_FOR_EACH(macro, ctx, __VA_ARGS__)
