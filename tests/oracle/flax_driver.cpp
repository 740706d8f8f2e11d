// The C++ half of the flax oracle (tests/oracle/flax_oracle.py): grove::nn's initialisers, layer
// norm, dropout and the gradients of a model, as records that the script compares with
// jax.nn.initializers, flax's LayerNorm / Dropout / nnx.Linear and jax.value_and_grad.
//
//   flax_driver CASE f32|f64     CASE: init, layer_norm, dropout, model
//
// Layout: grove's batches are (features, batch) column-major, which is numpy's (batch, features)
// in row-major order, so the script reads a batch record (emitted as a (features, batch) matrix)
// and transposes it into flax's layout. Dense weights are (out, in); flax's kernel is (in, out).
// Every key the script needs is emitted as its two words (jax.random.wrap_key_data).
#include <grove/nn.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include "oracle_io.hpp"

namespace {

namespace nn = grove::nn;
namespace rnd = grove::random;

void emit_key(const std::string& name, const rnd::Key& k) {
  oracle::emit(name, std::vector<std::uint32_t>{k.words[0], k.words[1]});
}

template <class T>
void emit_scalar(const std::string& name, T v) {
  oracle::emit(name, std::vector<T>{v});
}

// Every leaf of a parameter tree as PREFIX + its key path ("p[2][0].scale").
template <class P>
void emit_tree(const std::string& prefix, const P& tree) {
  for (const auto& [path, leaf] : grove::tree_leaves_with_path(tree))
    std::visit([&, &path = path](const auto* p) { oracle::emit(prefix + grove::keystr(path), *p); },
               leaf);
}

// --- init: every variance-scaling variant, and the dense layer's init --------------------------

template <class T>
void run_init() {
  struct variant {
    std::string name;
    nn::VarianceScaling<T> init;
  };
  std::vector<variant> variants{
      {"glorot_normal", nn::glorot_normal<T>}, {"glorot_uniform", nn::glorot_uniform<T>},
      {"he_normal", nn::he_normal<T>},         {"he_uniform", nn::he_uniform<T>},
      {"lecun_normal", nn::lecun_normal<T>},   {"lecun_uniform", nn::lecun_uniform<T>}};
  // variance_scaling through its string arguments, every mode with every distribution, at scales
  // other than the named initializers' 1 and 2.
  for (const char* mode : {"fan_in", "fan_out", "fan_avg"})
    for (const char* dist : {"truncated_normal", "normal", "uniform"})
      for (const double scale : {0.37, 3.5})
        variants.push_back({"vs:" + std::to_string(scale).substr(0, 4) + ":" + mode + ":" + dist,
                            nn::variance_scaling<T>(scale, mode, dist)});
  // (rows, cols) shapes, neither square, so that a fan_in / fan_out swap shows; two only, since
  // each shape costs JAX a compilation per distribution.
  const std::vector<std::pair<nn::Index, nn::Index>> shapes{{7, 2}, {33, 65}};
  const rnd::Key base = rnd::key(20261204);
  std::uint32_t counter = 0;
  for (const auto& v : variants)
    for (const auto& [rows, cols] : shapes) {
      const std::string id = v.name + "|" + std::to_string(rows) + "x" + std::to_string(cols);
      const rnd::Key k = rnd::fold_in(base, counter++);
      emit_key("key|" + id, k);
      oracle::emit("w|" + id, v.init.sample(k, rows, cols));
    }
  // nn::dense(in, out[, init]).init<T>(key): the layer flax calls Dense / nnx.Linear.
  std::vector<variant> layer_inits{{"default", nn::lecun_normal<T>}};
  layer_inits.insert(layer_inits.end(), variants.begin(), variants.begin() + 6);
  // nnx.Linear's kernel is (in, out): the same shapes as above, so JAX compiles nothing new.
  for (const auto& v : layer_inits)
    for (const auto& [in, out] : shapes) {
      const std::string id = v.name + "|" + std::to_string(out) + "x" + std::to_string(in);
      const rnd::Key k = rnd::fold_in(base, counter++);
      const nn::DenseLayer layer =
          v.name == "default" ? nn::dense(in, out) : nn::dense(in, out, v.init);
      const nn::Dense<T> p = layer.template init<T>(k);
      emit_key("layer_key|" + id, k);
      oracle::emit("layer_w|" + id, p.w);
      oracle::emit("layer_b|" + id, p.b);
    }
}

// --- layer norm --------------------------------------------------------------------------------

template <class T>
void run_layer_norm() {
  struct ln_case {
    nn::Index features, batch;
    double eps, offset, spread;
    bool init_params;  // grove's own init (ones, zeros) instead of random scale and bias
  };
  // A single feature (variance 0: the output is the bias), the default and other eps, a wide
  // layer, and inputs with a large mean over a small spread (where the two variance formulas
  // part). Few shapes and eps values: JAX compiles each pair once.
  const std::vector<ln_case> cases{{1, 6, 1e-6, 0, 1, false},       {33, 6, 1e-6, 0, 1, false},
                                   {33, 6, 1e-5, 0.5, 2, false},    {300, 6, 0.1, -1, 0.3, false},
                                   {33, 6, 1e-6, 100, 0.01, false}, {33, 6, 1e-6, 0, 1, true},
                                   {33, 6, 1e-2, 3, 1e-3, false}};
  const rnd::Key base = rnd::key(7);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const auto& lc = cases[c];
    const std::string id = std::to_string(c);
    const rnd::Key k = rnd::fold_in(base, static_cast<std::uint32_t>(c));
    const auto model = nn::sequential(nn::layer_norm(lc.features, lc.eps));
    auto params = nn::init<T>(model, k);
    if (!lc.init_params) {
      std::get<0>(params).scale = rnd::normal<T>(rnd::fold_in(k, 1), lc.features);
      std::get<0>(params).bias = rnd::normal<T>(rnd::fold_in(k, 2), lc.features);
    }
    const nn::Matrix<T> x =
        (rnd::normal<T>(rnd::fold_in(k, 3), lc.features, lc.batch).array() * T(lc.spread) +
         T(lc.offset))
            .matrix();
    const nn::Matrix<T> y = nn::apply(model, params, x);
    emit_scalar<double>("eps|" + id, lc.eps);
    oracle::emit_text("init|" + id, lc.init_params ? "grove" : "random");
    oracle::emit("x|" + id, x);
    oracle::emit("scale|" + id, std::get<0>(params).scale);
    oracle::emit("bias|" + id, std::get<0>(params).bias);
    oracle::emit("y|" + id, y);
  }
}

// --- dropout -------------------------------------------------------------------------------------

template <class T>
void run_dropout() {
  struct drop_case {
    nn::Index features, batch;
    double rate;
  };
  // Rates on one shape (JAX compiles once per shape), a single feature, and rate 0.
  const std::vector<drop_case> cases{{37, 19, 0.1},  {37, 19, 0.5},  {37, 19, 0.9},
                                     {37, 19, 0.25}, {1, 1000, 0.3}, {37, 19, 0.0}};
  const rnd::Key base = rnd::key(99);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const auto& dc = cases[c];
    const std::string id = std::to_string(c);
    const rnd::Key k = rnd::fold_in(base, static_cast<std::uint32_t>(c));
    const nn::Dropout layer = nn::dropout(dc.rate);
    const nn::Matrix<T> x = rnd::normal<T>(rnd::fold_in(k, 1), dc.features, dc.batch);
    const nn::Matrix<T> dy = rnd::normal<T>(rnd::fold_in(k, 2), dc.features, dc.batch);
    nn::Matrix<T> y(dc.features, dc.batch), dx(dc.features, dc.batch);
    // The layer itself, called as a training pass calls it: the layer's key in ctx.key, its
    // saved memory (the mask) kept from forward to backward.
    std::vector<T> saved(static_cast<std::size_t>(layer.saved_size(dc.features, dc.batch)));
    const nn::layer_context ctx{.training = true, .key = &k};
    std::monostate p, g;
    layer.forward<T>(p, nn::ConstMatrixMap<T>(x.data(), x.rows(), x.cols()),
                     nn::MatrixMap<T>(y.data(), y.rows(), y.cols()), saved, ctx);
    layer.backward<T>(p, nn::ConstMatrixMap<T>(x.data(), x.rows(), x.cols()),
                      nn::ConstMatrixMap<T>(y.data(), y.rows(), y.cols()),
                      nn::ConstMatrixMap<T>(dy.data(), dy.rows(), dy.cols()), g,
                      nn::MatrixMap<T>(dx.data(), dx.rows(), dx.cols()), saved, ctx);
    emit_key("key|" + id, k);
    emit_scalar<double>("rate|" + id, dc.rate);
    oracle::emit("x|" + id, x);
    oracle::emit("y|" + id, y);
    oracle::emit("dy|" + id, dy);
    oracle::emit("dx|" + id, dx);
  }
}

// --- a model's loss and gradients ----------------------------------------------------------------

// Adds noise to every leaf, so that biases and layer-norm parameters are not their init's zeros
// and ones (gradients through ones and zeros would hide a transposed or misplaced term).
template <class P>
void perturb(P& params, const rnd::Key& k) {
  std::uint32_t i = 0;
  grove::tree_for_each(
      [&](auto& leaf) {
        using L = std::remove_cvref_t<decltype(leaf)>;
        using T = typename L::Scalar;
        const auto noise = rnd::normal<T>(rnd::fold_in(k, i++), leaf.size());
        leaf.reshaped() += T(0.3) * noise;
      },
      params);
}

template <class T>
void run_model(const char* dtype) {
  const bool with_dropout = std::string(dtype) == "f32";
  const nn::Index batch = 11;
  const rnd::Key base = rnd::key(2024);
  // Model A: dense, layer norm, residual blocks, dropout and activations, mse; layer by layer.
  const auto a = nn::sequential(
      nn::dense(6, 16), nn::swish,
      nn::residual(nn::sequential(nn::layer_norm(16, 1e-5), nn::dense(16, 16), nn::gelu)),
      nn::dropout(0.25),
      nn::residual(nn::sequential(nn::dense(16, 16), nn::tanh, nn::dense(16, 16, nn::he_uniform<T>),
                                  nn::Gelu{.approximate = false})),
      nn::layer_norm(16), nn::dense(16, 12), nn::elu, nn::dense(12, 4));
  auto pa = nn::init<T>(a, rnd::fold_in(base, 0));
  perturb(pa, rnd::fold_in(base, 1));
  const nn::Matrix<T> xa = rnd::normal<T>(rnd::fold_in(base, 2), 6, batch);
  const nn::Matrix<T> ya = rnd::normal<T>(rnd::fold_in(base, 3), 4, batch);
  const rnd::Key dropout_key = rnd::fold_in(base, 4);
  emit_tree("A:p", pa);
  oracle::emit("A:x", xa);
  oracle::emit("A:y", ya);
  emit_key("A:key", dropout_key);
  oracle::emit_text("A:dropout", with_dropout ? "on" : "off");

  // Model B: a chain of dense layers and activations (the fused engine's kind of model) with the
  // softmax cross-entropy of integer labels.
  const auto b = nn::sequential(nn::dense(5, 10), nn::relu, nn::dense(10, 10), nn::leaky_relu,
                                nn::dense(10, 9), nn::sigmoid, nn::dense(9, 8), nn::softplus,
                                nn::dense(8, 8), nn::identity, nn::dense(8, 3));
  auto pb = nn::init<T>(b, rnd::fold_in(base, 5));
  perturb(pb, rnd::fold_in(base, 6));
  const nn::Matrix<T> xb = rnd::normal<T>(rnd::fold_in(base, 7), 5, batch);
  const Eigen::VectorXi yb = rnd::randint(rnd::fold_in(base, 8), batch, 0, 3);
  emit_tree("B:p", pb);
  oracle::emit("B:x", xb);
  oracle::emit("B:labels", std::vector<std::int32_t>(yb.data(), yb.data() + yb.size()));

  // One thread, and two (a team per pass) where OpenMP is there.
  std::vector<int> thread_counts{1};
#ifdef _OPENMP
  thread_counts.push_back(2);
#endif
  for (const int threads : thread_counts) {
    Eigen::setNbThreads(threads);
    const std::string t = "t" + std::to_string(threads) + ":";
    const auto ra = nn::value_and_grad_with_input(a, pa, xa, ya, nn::mse,
                                                  with_dropout ? &dropout_key : nullptr);
    emit_scalar<T>(t + "A:loss", ra.loss);
    emit_tree(t + "A:g", ra.grads);
    oracle::emit(t + "A:dx", ra.input_grad);

    const auto rb = nn::value_and_grad_with_input(b, pb, xb, yb, nn::softmax_cross_entropy);
    emit_scalar<T>(t + "B:loss", rb.loss);
    emit_tree(t + "B:g", rb.grads);
    oracle::emit(t + "B:dx", rb.input_grad);
    // Without the input gradient, a dense/activation chain runs on the fused engine.
    const auto fb = nn::value_and_grad(b, pb, xb, yb, nn::softmax_cross_entropy);
    emit_scalar<T>(t + "B:fused_loss", fb.loss);
    emit_tree(t + "B:fused_g", fb.grads);
  }
  oracle::emit("threads", std::vector<std::int32_t>(thread_counts.begin(), thread_counts.end()));
}

template <class T>
int run(const std::string& what, const char* dtype) {
  if (what == "init")
    run_init<T>();
  else if (what == "layer_norm")
    run_layer_norm<T>();
  else if (what == "dropout")
    run_dropout<T>();
  else if (what == "model")
    run_model<T>(dtype);
  else {
    std::fprintf(stderr, "flax_driver: unknown case '%s'\n", what.c_str());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: flax_driver init|layer_norm|dropout|model f32|f64\n");
    return 2;
  }
  const std::string dtype = argv[2];
  try {
    if (dtype == "f32") return run<float>(argv[1], argv[2]);
    if (dtype == "f64") return run<double>(argv[1], argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flax_driver: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "flax_driver: unknown dtype '%s'\n", dtype.c_str());
  return 2;
}
