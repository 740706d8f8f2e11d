// grove/random.hpp: grove::random, counter-based random numbers with explicit, splittable keys that
// reproduce jax.random (threefry2x32).
//
// A key is a value. The same key gives the same numbers on every machine, build and thread count,
// and those numbers are JAX's:
//
//   auto k = grove::random::key(0);                 // jax.random.key(0)
//   auto [k1, k2] = grove::random::split(k);        // jax.random.split(k)
//   Eigen::MatrixXf w = grove::random::normal(k1, 3, 4);   // jax.random.normal(k1, (3, 4))
//
// What is bit-exact with JAX, and what is not (docs/random.md says how each was checked):
//  * keys, split, fold_in, bits, uniform<float>, bernoulli<float> and randint are bit-exact in both
//    counter layouts (checked against values JAX published); permutation is JAX's algorithm;
//  * uniform computes `f * (maxval - minval) + minval` with a fused multiply-add, as XLA's CPU and
//    GPU back ends do (it matters only when maxval - minval is not a power of two);
//  * normal<float>, truncated_normal<float> and gumbel<float> use XLA's algorithms (Giles' erf_inv,
//    XLA's erf), but grove's log1p/log may differ from XLA's in the last bit, which moves a value
//    by up to a few ulp; every published JAX value checked is identical;
//  * T = double follows JAX's 64-bit path (64-bit random words, XLA's double erf_inv); its log1p,
//    erf and log are the platform's libm, so the last bit may differ from XLA's;
//  * categorical is argmax(gumbel + logits) as in JAX; it can differ only where two categories tie
//    to within an ulp.
#pragma once

#include "grove/random/arrays.hpp"
#include "grove/random/distributions.hpp"
#include "grove/random/fill.hpp"
#include "grove/random/key.hpp"
#include "grove/random/thread_options.hpp"
