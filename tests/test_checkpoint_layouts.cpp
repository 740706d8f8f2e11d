// grove::io checkpoints from PyTorch and Flax layouts: torch_sequential_names, flax_dense_names,
// flax_kernels and load_options::transpose; and the C++ blocks of docs/checkpoint.md after its
// program (checkpoint_doc_snippets.cmake checks that each appears here, so each is compiled).
// The files are assembled by hand from the safetensors specification, with values given
// element by element, so that (i, j) of grove's leaf is checked against the file's own layout.
#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "checkpoint_fixture.hpp"
#include "grove/io/checkpoint.hpp"
#include "grove/nn.hpp"
#include "grove/tree/tensor.hpp"

using namespace ckpt_test;
namespace io = grove::io;

namespace {

// The value of element (i, j) of a test array `tag`: distinct everywhere, exact in float.
float value(int tag, std::uint64_t i, std::uint64_t j) {
  return static_cast<float>(tag * 100 + static_cast<int>(i) * 10 + static_cast<int>(j)) + 0.5f;
}

// An F32 tensor of `shape` (1-D or 2-D) whose row-major element (i, j) is value(tag, i, j).
Entry f32(std::string name, std::vector<std::uint64_t> shape, int tag) {
  const std::uint64_t rows = shape[0], cols = shape.size() == 2 ? shape[1] : 1;
  std::string bytes;
  for (std::uint64_t i = 0; i < rows; ++i)
    for (std::uint64_t j = 0; j < cols; ++j) {
      const float v = shape.size() == 2 ? value(tag, i, j) : value(tag, 0, i);
      bytes.append(reinterpret_cast<const char*>(&v), 4);
    }
  return {std::move(name), "F32", std::move(shape), std::move(bytes)};
}

// torch.nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)).state_dict(): weight (out, in).
void write_torch(const std::filesystem::path& path, const std::string& prefix = "") {
  write_safetensors(path, {f32(prefix + "0.weight", {3, 4}, 1), f32(prefix + "0.bias", {3}, 2),
                           f32(prefix + "2.weight", {2, 3}, 3), f32(prefix + "2.bias", {2}, 4)});
}

// The same network in Flax: kernel (in, out), the transpose of torch's weight.
void write_flax(const std::filesystem::path& path) {
  write_safetensors(path,
                    {f32("params/Dense_0/kernel", {4, 3}, 1), f32("params/Dense_0/bias", {3}, 2),
                     f32("params/Dense_1/kernel", {3, 2}, 3), f32("params/Dense_1/bias", {2}, 4)});
}

// grove's w (out, in) against the file's array `tag`: (i, j) = file[i, j], or file[j, i] when the
// file held the transpose.
template <class M>
void check_matrix(const M& w, int tag, bool transposed) {
  for (Eigen::Index i = 0; i < w.rows(); ++i)
    for (Eigen::Index j = 0; j < w.cols(); ++j) {
      INFO("tag " << tag << " (" << i << ", " << j << ")");
      const auto u = static_cast<std::uint64_t>(i), v = static_cast<std::uint64_t>(j);
      CHECK(w(i, j) == (transposed ? value(tag, v, u) : value(tag, u, v)));
    }
}
template <class V>
void check_vector(const V& b, int tag) {
  for (Eigen::Index i = 0; i < b.size(); ++i)
    CHECK(b(i) == value(tag, 0, static_cast<std::uint64_t>(i)));
}

template <class P>
void check_sequential(const P& params, bool transposed) {
  REQUIRE(std::get<0>(params).w.rows() == 3);
  REQUIRE(std::get<0>(params).w.cols() == 4);
  check_matrix(std::get<0>(params).w, 1, transposed);
  check_vector(std::get<0>(params).b, 2);
  check_matrix(std::get<2>(params).w, 3, transposed);
  check_vector(std::get<2>(params).b, 4);
}

}  // namespace

TEST_CASE("torch_sequential_names maps a state_dict's names to grove's key paths",
          "[io][checkpoint][layouts]") {
  const auto plain = io::torch_sequential_names();
  CHECK(plain("0.weight") == "0/w");
  CHECK(plain("0.bias") == "0/b");
  CHECK(plain("12.weight") == "12/w");
  CHECK(plain("1.running_mean") == "1/running_mean");
  CHECK(plain("weight") == "w");
  CHECK(plain("layers.0.weightx") == "layers/0/weightx");
  const auto prefixed = io::torch_sequential_names("model.net.");
  CHECK(prefixed("model.net.2.bias") == "2/b");
  CHECK(prefixed("model.head.weight") == "model.head.weight");  // kept, so a strict load lists it
}

TEST_CASE("flax_dense_names maps Dense_k to grove's k-th dense layer",
          "[io][checkpoint][layouts]") {
  const auto plain = io::flax_dense_names();
  CHECK(plain("params/Dense_0/kernel") == "0/w");
  CHECK(plain("params/Dense_0/bias") == "0/b");
  CHECK(plain("params/Dense_17/kernel") == "17/w");
  const std::vector<std::string> kept = {
      "params/Dense_0/scale",     "params/Dense_/kernel",
      "params/Dense_01/kernel",   "params/Dense_x/kernel",
      "params/Dense_0",           "batch_stats/Dense_0/kernel",
      "params/LayerNorm_0/scale", "params/Dense_1234567890/kernel"};
  for (const auto& name : kept) CHECK(plain(name) == name);
  const auto mapped = io::flax_dense_names({0, 2});
  CHECK(mapped("params/Dense_1/kernel") == "2/w");
  CHECK(mapped("params/Dense_2/kernel") == "params/Dense_2/kernel");  // beyond the list: kept
  const auto nested = io::flax_dense_names({}, "params/MLP_0/");
  CHECK(nested("params/MLP_0/Dense_3/bias") == "3/b");
  const auto kernels = io::flax_kernels();
  CHECK(kernels("params/Dense_0/kernel"));
  CHECK(kernels("kernel"));
  CHECK_FALSE(kernels("params/Dense_0/bias"));
  CHECK_FALSE(kernels("params/Dense_0/kernels"));
  CHECK_FALSE(kernels("params/mykernel"));
}

TEST_CASE("the name maps built from a tree tell a LayerNorm's parameters from a Linear's",
          "[io][checkpoint][layouts]") {
  namespace nn = grove::nn;
  const auto model =
      nn::sequential(nn::dense(4, 3), nn::layer_norm(3, 1e-5), nn::relu, nn::dense(3, 2));
  const auto params = nn::init<float>(model, grove::random::key(0));

  const auto torch = io::torch_sequential_names(params);
  CHECK(torch("0.weight") == "0/w");
  CHECK(torch("0.bias") == "0/b");
  CHECK(torch("1.weight") == "1/scale");
  CHECK(torch("1.bias") == "1/bias");
  CHECK(torch("3.weight") == "3/w");
  CHECK(torch("3.bias") == "3/b");
  CHECK(torch("2.weight") == "2/w");  // no leaf there: Linear's name, so a strict load lists it
  CHECK(torch("1.running_mean") == "1/running_mean");
  const auto prefixed = io::torch_sequential_names(params, "net.");
  CHECK(prefixed("net.1.weight") == "1/scale");
  CHECK(prefixed("head.1.weight") == "head.1.weight");
  // Without the tree, every weight is a Linear's.
  CHECK(io::torch_sequential_names()("1.weight") == "1/w");

  const auto flax = io::flax_dense_names(params);
  CHECK(flax("params/Dense_0/kernel") == "0/w");
  CHECK(flax("params/Dense_0/bias") == "0/b");
  CHECK(flax("params/LayerNorm_0/scale") == "1/scale");
  CHECK(flax("params/LayerNorm_0/bias") == "1/bias");
  CHECK(flax("params/Dense_1/kernel") == "3/w");
  CHECK(flax("params/Dense_1/bias") == "3/b");
  // flax.linen.Sequential's names: layers_K is grove's layer K.
  CHECK(flax("params/layers_0/kernel") == "0/w");
  CHECK(flax("params/layers_0/bias") == "0/b");
  CHECK(flax("params/layers_1/scale") == "1/scale");
  CHECK(flax("params/layers_1/bias") == "1/bias");
  CHECK(flax("params/layers_3/bias") == "3/b");
  const std::vector<std::string> kept = {"params/Dense_2/kernel",      "params/LayerNorm_1/scale",
                                         "params/LayerNorm_0/kernel",  "params/Dense_0/scale",
                                         "params/LayerNorm_/scale",    "params/layers_01/kernel",
                                         "batch_stats/Dense_0/kernel", "params/LayerNormx_0/scale"};
  for (const auto& name : kept) CHECK(flax(name) == name);
  const auto nested = io::flax_dense_names(params, "params/MLP_0/");
  CHECK(nested("params/MLP_0/LayerNorm_0/bias") == "1/bias");
  CHECK(nested("params/LayerNorm_0/bias") == "params/LayerNorm_0/bias");
  // Into nn::init_network_params' std::vector<nn::Dense>: the k-th dense layer is k.
  const auto mlp =
      io::flax_dense_names(nn::init_network_params<float>({4, 3, 2}, grove::random::key(0)));
  CHECK(mlp("params/Dense_1/kernel") == "1/w");
  CHECK(mlp("params/LayerNorm_0/scale") == "params/LayerNorm_0/scale");
}

TEST_CASE("PyTorch and Flax files with a LayerNorm load into grove's sequential params",
          "[io][checkpoint][layouts]") {
  temp_dir dir;
  // torch.nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3), nn.ReLU(), nn.Linear(3, 2)).state_dict()
  write_safetensors(dir / "torch_norm.safetensors",
                    {f32("0.weight", {3, 4}, 1), f32("0.bias", {3}, 2), f32("1.weight", {3}, 5),
                     f32("1.bias", {3}, 6), f32("3.weight", {2, 3}, 3), f32("3.bias", {2}, 4)});
  // The same network as a compact Flax module, in the file's own order.
  write_safetensors(
      dir / "flax_norm.safetensors",
      {f32("params/LayerNorm_0/bias", {3}, 6), f32("params/Dense_1/kernel", {3, 2}, 3),
       f32("params/Dense_0/bias", {3}, 2), f32("params/LayerNorm_0/scale", {3}, 5),
       f32("params/Dense_0/kernel", {4, 3}, 1), f32("params/Dense_1/bias", {2}, 4)});
  // docs/checkpoint.md, "Norm layers":
  namespace nn = grove::nn;
  // PyTorch: nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3), nn.ReLU(), nn.Linear(3, 2)) names
  // the norm's parameters "1.weight" and "1.bias"; a compact Flax module of Dense, LayerNorm, relu
  // and Dense names them "params/LayerNorm_0/scale" and "params/LayerNorm_0/bias".
  const auto normed =
      nn::sequential(nn::dense(4, 3), nn::layer_norm(3, 1e-5), nn::relu, nn::dense(3, 2));
  auto p = nn::init<float>(normed, grove::random::key(0));
  grove::io::load_into(dir / "torch_norm.safetensors", p,
                       {.rename = grove::io::torch_sequential_names(p)});
  // "1.weight" -> "1/scale" (p has a leaf 1/scale and no 1/w), "3.weight" -> "3/w"
  auto q = nn::init<float>(normed, grove::random::key(1));
  grove::io::load_into(
      dir / "flax_norm.safetensors", q,
      {.rename = grove::io::flax_dense_names(q), .transpose = grove::io::flax_kernels()});
  // "params/LayerNorm_0/scale" -> "1/scale", "params/Dense_1/kernel" -> "3/w", transposed
  for (const bool transposed : {false, true}) {
    const auto& loaded = transposed ? q : p;
    check_matrix(std::get<0>(loaded).w, 1, transposed);
    check_vector(std::get<0>(loaded).b, 2);
    check_vector(std::get<1>(loaded).scale, 5);
    check_vector(std::get<1>(loaded).bias, 6);
    check_matrix(std::get<3>(loaded).w, 3, transposed);
    check_vector(std::get<3>(loaded).b, 4);
  }

  // Without the tree, torch's "1.weight" is taken for a Linear's: a strict load names it.
  auto r = nn::init<float>(normed, grove::random::key(2));
  CHECK_THROWS_WITH(
      io::load_into(dir / "torch_norm.safetensors", r, {.rename = io::torch_sequential_names()}),
      Catch::Matchers::Contains("1.weight"));
}

TEST_CASE("load_options::transpose loads named 2-D tensors transposed, checked before any change",
          "[io][checkpoint][layouts]") {
  temp_dir dir;
  using Tree = std::tuple<Eigen::MatrixXd,  // (2, 3), from a (3, 2) tensor of F16
                          Eigen::Matrix<std::int32_t, Eigen::Dynamic, Eigen::Dynamic,
                                        Eigen::RowMajor>,  // (1, 3), from (3, 1) I16
                          Eigen::VectorXf>;
  std::string half;
  for (const std::uint16_t h : {0x3C00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600})  // 1 ... 6
    half.append(reinterpret_cast<const char*>(&h), 2);
  std::string ints;
  for (const std::int16_t k : {-1, 7, 300}) ints.append(reinterpret_cast<const char*>(&k), 2);
  write_safetensors(dir / "t.safetensors",
                    {{"w", "F16", {3, 2}, half}, {"n", "I16", {3, 1}, ints}, f32("v", {2}, 5)});
  const Tree before{Eigen::MatrixXd::Constant(2, 3, -1.0),
                    std::tuple_element_t<1, Tree>::Constant(1, 3, -1),
                    Eigen::VectorXf::Constant(2, -1.0f)};
  Tree tree = before;
  auto load_tree = [&](std::function<bool(std::string_view)> which) {
    return io::load_into(dir / "t.safetensors", tree,
                         {.rename =
                              [](std::string_view n) {
                                return std::string(n == "w" ? "0" : n == "n" ? "1" : "2");
                              },
                          .transpose = std::move(which)});
  };

  load_tree([](std::string_view n) { return n != "v"; });
  Eigen::MatrixXd w(2, 3);
  w << 1, 3, 5, 2, 4, 6;  // the file's (3, 2) [[1, 2], [3, 4], [5, 6]], transposed
  CHECK(std::get<0>(tree) == w);
  CHECK(std::get<1>(tree)(0, 0) == -1);
  CHECK(std::get<1>(tree)(0, 1) == 7);
  CHECK(std::get<1>(tree)(0, 2) == 300);
  check_vector(std::get<2>(tree), 5);

  auto refused = [&](std::function<bool(std::string_view)> which, const std::string& needle) {
    tree = before;
    try {
      load_tree(std::move(which));
      FAIL("loaded; expected " << needle);
    } catch (const io::format_error& e) {
      CHECK_THAT(e.what(), Catch::Matchers::StartsWith("grove::io::load_into: ") &&
                               Catch::Matchers::Contains(needle));
    }
    CHECK(std::get<0>(tree) == std::get<0>(before));
    CHECK(std::get<1>(tree) == std::get<1>(before));
    CHECK(std::get<2>(tree) == std::get<2>(before));
  };
  // Not transposed, (3, 2) does not fill (2, 3).
  refused([](std::string_view n) { return n == "n"; },
          "tensor \"w\" (renamed \"0\") (key path [0]): shape [3, 2] in the file, [2, 3] in the "
          "tree");
  // Transposing a vector is refused by name.
  refused([](std::string_view) { return true; },
          "tensor \"v\" (renamed \"2\") (key path [2]): load_options::transpose asks to transpose "
          "it, but its shape [2] is not 2-D");
  // Transposed, but still not the leaf's shape.
  write_safetensors(dir / "t.safetensors",
                    {{"w", "F16", {2, 3}, half}, {"n", "I16", {3, 1}, ints}, f32("v", {2}, 5)});
  refused([](std::string_view n) { return n != "v"; },
          "tensor \"w\" (renamed \"0\") (key path [0]): shape [2, 3] in the file, transposed "
          "[3, 2], [2, 3] in the tree");
}

TEST_CASE("a torch nn.Sequential state_dict loads into grove's nn params",
          "[io][checkpoint][layouts]") {
  temp_dir dir;
  write_torch(dir / "torch.safetensors");
  // docs/checkpoint.md, "PyTorch":
  namespace nn = grove::nn;
  // PyTorch: net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
  //          safetensors.torch.save_file(net.state_dict(), "torch.safetensors")
  // holds "0.weight" (3, 4), "0.bias" (3,), "2.weight" (2, 3) and "2.bias" (2,).
  const auto model = nn::sequential(nn::dense(4, 3), nn::relu, nn::dense(3, 2));
  auto params = nn::init<float>(model, grove::random::key(0));
  grove::io::load_into(dir / "torch.safetensors", params,
                       {.rename = grove::io::torch_sequential_names()});
  // std::get<0>(params).w(i, j) == net[0].weight[i, j]: (out, in) in both.
  check_sequential(params, false);

  // A prefix, and a strict load that names what the rename did not map.
  write_torch(dir / "prefixed.safetensors", "net.");
  auto again = nn::init<float>(model, grove::random::key(1));
  const auto report = io::load_into(dir / "prefixed.safetensors", again,
                                    {.strict = false, .rename = io::torch_sequential_names()});
  CHECK(report.missing.size() == 4);
  CHECK(report.unexpected.size() == 4);
  io::load_into(dir / "prefixed.safetensors", again,
                {.rename = io::torch_sequential_names("net.")});
  check_sequential(again, false);
}

TEST_CASE("a Flax tree of Dense modules loads into grove's nn params, kernels transposed",
          "[io][checkpoint][layouts]") {
  temp_dir dir;
  write_flax(dir / "flax.safetensors");
  namespace nn = grove::nn;
  const auto model = nn::sequential(nn::dense(4, 3), nn::relu, nn::dense(3, 2));
  // docs/checkpoint.md, "Flax":
  // Flax: {"params": {"Dense_0": {"kernel": (4, 3), "bias": (3,)}, "Dense_1": {...}}}, saved
  // with flattened names "params/Dense_0/kernel", ... Flax counts only the Dense modules and
  // grove every layer, so Dense_1 is grove's layer 2.
  auto from_flax = nn::init<float>(model, grove::random::key(0));
  grove::io::load_into(
      dir / "flax.safetensors", from_flax,
      {.rename = grove::io::flax_dense_names({0, 2}), .transpose = grove::io::flax_kernels()});
  // std::get<2>(from_flax).w(i, j) == params["Dense_1"]["kernel"][j, i]
  check_sequential(from_flax, true);

  // Without the transpose, the shapes are refused (the tree untouched).
  auto other = nn::init<float>(model, grove::random::key(1));
  const auto copy = other;
  CHECK_THROWS_WITH(
      io::load_into(dir / "flax.safetensors", other, {.rename = io::flax_dense_names({0, 2})}),
      Catch::Matchers::Contains("shape [4, 3] in the file, [3, 4] in the tree"));
  CHECK(std::get<0>(other) == std::get<0>(copy));

  // Into nn::init_network_params' std::vector<nn::Dense>: Dense_k is layer k.
  auto mlp = nn::init_network_params<float>({4, 3, 2}, grove::random::key(0));
  io::load_into(dir / "flax.safetensors", mlp,
                {.rename = io::flax_dense_names(), .transpose = io::flax_kernels()});
  check_matrix(mlp[0].w, 1, true);
  check_vector(mlp[0].b, 2);
  check_matrix(mlp[1].w, 3, true);
  check_vector(mlp[1].b, 4);
}

TEST_CASE("an N-D numpy array into an Eigen::Tensor as docs/checkpoint.md shows it",
          "[io][checkpoint][layouts]") {
  temp_dir dir;
  std::string bytes;  // np.arange(24, dtype=np.float32).reshape(2, 3, 4), C order
  for (int k = 0; k < 24; ++k) {
    const auto x = static_cast<float>(k);
    bytes.append(reinterpret_cast<const char*>(&x), 4);
  }
  write_safetensors(dir / "images.safetensors", {{"images", "F32", {2, 3, 4}, bytes}});
  // docs/checkpoint.md, "N-D tensors":
  // numpy: a = np.arange(24, dtype=np.float32).reshape(2, 3, 4), saved as "images"
  std::map<std::string, Eigen::Tensor<float, 3>> tree{{"images", Eigen::Tensor<float, 3>(2, 3, 4)}};
  grove::io::load_into(dir / "images.safetensors", tree);
  // tree["images"](i, j, k) == a[i, j, k]
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        CHECK(tree["images"](i, j, k) == static_cast<float>(i * 12 + j * 4 + k));
}

TEST_CASE("a sharded checkpoint as docs/checkpoint.md shows it", "[io][checkpoint][layouts]") {
  temp_dir dir;
  write_safetensors(dir / "model-00001-of-00002.safetensors",
                    {f32("0/w", {3, 4}, 1), f32("0/b", {3}, 2)});
  write_safetensors(dir / "model-00002-of-00002.safetensors",
                    {f32("2/w", {2, 3}, 3), f32("2/b", {2}, 4)});
  write_bytes(dir / "model.safetensors.index.json",
              R"({"metadata": {"total_size": 104}, "weight_map": {
                    "0/w": "model-00001-of-00002.safetensors",
                    "0/b": "model-00001-of-00002.safetensors",
                    "2/w": "model-00002-of-00002.safetensors",
                    "2/b": "model-00002-of-00002.safetensors"}})");
  namespace nn = grove::nn;
  const auto model = nn::sequential(nn::dense(4, 3), nn::relu, nn::dense(3, 2));
  const auto like = nn::init<float>(model, grove::random::key(0));
  std::ostringstream out;
  auto* old = std::cout.rdbuf(out.rdbuf());
  // docs/checkpoint.md, "Sharded checkpoints":
  const auto index = dir / "model.safetensors.index.json";
  auto [params, report] = grove::io::load(index, like, {});
  std::cout << "total_size " << report.metadata.at("total_size") << '\n';
  for (const auto& t : grove::io::inspect(index).tensors)
    std::cout << t.name << " in " << t.file << '\n';
  std::cout.rdbuf(old);
  check_sequential(params, false);
  CHECK(out.str() ==
        "total_size 104\n"
        "0/w in model-00001-of-00002.safetensors\n0/b in model-00001-of-00002.safetensors\n"
        "2/w in model-00002-of-00002.safetensors\n2/b in model-00002-of-00002.safetensors\n");
}
