// The C++ side of checkpoint_world.py (files from other tools: torch-style names, F16/BF16,
// unaligned and scattered data, extra entries):
//   checkpoint_world read FILE     loads FILE into a World with torch_rename and strict = false;
//                                  prints the loaded values (as bit patterns) and the report as
//                                  JSON
//   checkpoint_world strict FILE   loads FILE strictly; prints {"error": what(), "untouched": bool}
//   checkpoint_world inspect FILE  prints each tensor's name and dtype as JSON
//   checkpoint_world write FILE F16FILE BF16FILE
//                                  saves Half16 (Eigen::half / Eigen::bfloat16 leaves) to FILE and
//                                  inputs() (float leaves) to F16FILE and BF16FILE with
//                                  save_options::floats f16 and bf16
//   checkpoint_world torch FILE    loads a torch nn.Sequential state_dict ("net.0.weight", ...)
//                                  into the params of nn::sequential(dense(4, 3), relu,
//                                  dense(3, 2)) with io::torch_sequential_names("net."); prints
//                                  each leaf as rows of hex bit patterns, element (i, j) at [i][j]
//   checkpoint_world flax FILE     the same from a Flax tree ("params/Dense_0/kernel", (in, out))
//                                  with io::flax_dense_names({0, 2}) and io::flax_kernels()
//   checkpoint_world flax_vector FILE
//                                  the Flax file into nn::init_network_params' std::vector of
//                                  nn::Dense, with io::flax_dense_names()
#include <bit>
#include <cstdint>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "grove/io/checkpoint.hpp"
#include "grove/nn.hpp"

namespace {

struct Linear {
  Eigen::MatrixXf w;  // (out, in), as torch's nn.Linear.weight
  Eigen::VectorXf b;
};
GROVE_NODE(Linear, w, b);

struct World {
  std::vector<Linear> layers;             // F16 (layers/0) and BF16 (layers/1) in the file
  Eigen::MatrixXd wide;                   // F16 into double
  Eigen::Matrix<Eigen::half, 2, 3> half;  // F16, exact
  Eigen::Matrix<std::int32_t, Eigen::Dynamic, 1> counts;  // I16 into int32 (widening)
  Eigen::Matrix<std::uint64_t, Eigen::Dynamic, 1> ids;    // U8 into uint64 (widening)
  double scale = 0;                                       // F32 scalar into double
  Eigen::VectorXf not_in_file;                            // missing: keeps its values
};
GROVE_NODE(World, layers, wide, half, counts, ids, scale, not_in_file);

World blank() {
  World w;
  w.layers.resize(2);
  w.layers[0].w = Eigen::MatrixXf::Constant(2, 3, 7.0f);
  w.layers[0].b = Eigen::VectorXf::Constant(2, 7.0f);
  w.layers[1].w = Eigen::MatrixXf::Constant(3, 2, 7.0f);
  w.layers[1].b = Eigen::VectorXf::Constant(3, 7.0f);
  w.wide = Eigen::MatrixXd::Constant(3, 4, 7.0);
  w.half.setConstant(Eigen::half(7.0f));
  w.counts = Eigen::VectorXi::Constant(3, 7);
  w.ids = Eigen::Matrix<std::uint64_t, Eigen::Dynamic, 1>::Constant(3, 7);
  w.scale = 7.0;
  w.not_in_file = Eigen::VectorXf::Constant(2, 7.0f);
  return w;
}

// torch's state_dict names to grove's key paths: "model.layers.0.weight" -> "layers/0/w".
// Buffers grove has no leaf for ("num_batches_tracked") are skipped.
std::string torch_rename(std::string_view name) {
  if (name.ends_with("num_batches_tracked")) return "";
  std::string out(name.starts_with("model.") ? name.substr(6) : name);
  for (char& c : out)
    if (c == '.') c = '/';
  if (out.ends_with("/weight")) out.replace(out.size() - 6, 6, "w");
  if (out.ends_with("/bias")) out.replace(out.size() - 4, 4, "b");
  return out;
}

template <class T>
std::string hex(T x) {
  static constexpr char digits[] = "0123456789abcdef";
  std::uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof(T));
  std::string out(sizeof(T) * 2, '0');
  for (std::size_t i = 0; i < out.size(); ++i)
    out[out.size() - 1 - i] = digits[(bits >> (4 * i)) & 0xf];
  return out;
}

// Each leaf's elements in row-major order, as hex bit patterns (floats) or numbers (integers).
nlohmann::json dump(const World& w) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [path, leaf] : grove::tree_leaves_with_path(w)) {
    nlohmann::json values = nlohmann::json::array();
    std::visit(
        [&](const auto* p) {
          using L = std::remove_cvref_t<decltype(*p)>;
          if constexpr (std::is_arithmetic_v<L>) {
            values.push_back(hex(*p));
          } else {
            for (Eigen::Index i = 0; i < p->rows(); ++i)
              for (Eigen::Index j = 0; j < p->cols(); ++j) {
                const auto x = (*p)(i, j);
                if constexpr (std::is_integral_v<std::remove_cvref_t<decltype(x)>>)
                  values.push_back(x);
                else
                  values.push_back(hex(x));
              }
          }
        },
        leaf);
    out[grove::keystr(path, "/")] = values;
  }
  return out;
}

bool same(const World& a, const World& b) {
  return dump(a) == dump(b);
}

// What `write` saves: 16-bit leaves given by their bits.
struct Half16 {
  Eigen::Matrix<Eigen::half, 2, 3> h;
  Eigen::Matrix<Eigen::bfloat16, Eigen::Dynamic, 1> b;
  Eigen::half h_scalar;
};
GROVE_NODE(Half16, h, b, h_scalar);

// The float inputs of the f16/bf16 save options (checkpoint_world.py has the same list).
std::vector<std::uint32_t> input_bits() {
  return {0x00000000u,
          0x80000000u,
          0x3f800000u,
          0x3dcccccdu /* 0.1 */,
          0x477fe000u /* 65504 */,
          0x477ff000u /* 65520: ties to inf in F16 */,
          0x33800000u /* 2^-24 */,
          0x33000000u /* 2^-25: ties to 0 */,
          0x33c00000u /* 1.5 * 2^-24 */,
          0x3f808000u /* 1 + 2^-8: BF16 tie to even (down) */,
          0x3f818000u /* 1 + 3 * 2^-8: BF16 tie to even (up) */,
          0x7f800000u,
          0xff800000u,
          0x7fc00000u,
          0xffc00000u,
          0x7f7fffffu /* F32 max: inf in F16, inf in BF16 */,
          0x00000001u /* F32 denorm_min */,
          0xc2f6e979u /* -123.456 */};
}

struct Inputs {
  Eigen::MatrixXf m;  // 3 x 6, row-major order of input_bits()
  float s = 0;
};
GROVE_NODE(Inputs, m, s);

Inputs inputs() {
  const auto bits = input_bits();
  Inputs in;
  in.m.resize(3, 6);
  for (Eigen::Index k = 0; k < 18; ++k)
    in.m(k / 6, k % 6) = std::bit_cast<float>(bits[static_cast<std::size_t>(k)]);
  in.s = -1.0f / 3.0f;
  return in;
}

// Each leaf of a tree of float matrices and vectors as rows of hex bit patterns: [i][j] holds
// element (i, j) (a vector is one column).
template <class Tree>
nlohmann::json dump_rows(const Tree& tree) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [path, leaf] : grove::tree_leaves_with_path(tree)) {
    nlohmann::json rows = nlohmann::json::array();
    grove::io::detail::visit_leaf(leaf, [&](const auto& x) {
      for (Eigen::Index i = 0; i < x.rows(); ++i) {
        nlohmann::json row = nlohmann::json::array();
        for (Eigen::Index j = 0; j < x.cols(); ++j) row.push_back(hex(x(i, j)));
        rows.push_back(row);
      }
    });
    out[grove::keystr(path, "/")] = rows;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: checkpoint_world read|strict|inspect|write FILE...\n";
    return 2;
  }
  const std::string_view mode = argv[1];
  const std::filesystem::path file = argv[2];
  try {
    if (mode == "read") {
      World w = blank();
      const auto report = grove::io::load_into(file, w, {.strict = false, .rename = torch_rename});
      std::cout << nlohmann::json{{"values", dump(w)},
                                  {"missing", report.missing},
                                  {"unexpected", report.unexpected},
                                  {"metadata", report.metadata}}
                       .dump()
                << '\n';
      return 0;
    }
    if (mode == "strict") {
      World w = blank();
      try {
        (void)grove::io::load_into(file, w, {.rename = torch_rename});
        std::cout << nlohmann::json{{"error", ""}}.dump() << '\n';
      } catch (const grove::io::format_error& e) {
        std::cout << nlohmann::json{{"error", e.what()}, {"untouched", same(w, blank())}}.dump()
                  << '\n';
      }
      return 0;
    }
    if (mode == "inspect") {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& t : grove::io::inspect(file).tensors) out[t.name] = t.dtype;
      std::cout << out.dump() << '\n';
      return 0;
    }
    if (mode == "torch" || mode == "flax") {
      namespace nn = grove::nn;
      const auto model = nn::sequential(nn::dense(4, 3), nn::relu, nn::dense(3, 2));
      auto params = nn::init<float>(model, grove::random::key(0));
      if (mode == "torch")
        grove::io::load_into(file, params, {.rename = grove::io::torch_sequential_names("net.")});
      else
        grove::io::load_into(file, params,
                             {.rename = grove::io::flax_dense_names({0, 2}),
                              .transpose = grove::io::flax_kernels()});
      std::cout << dump_rows(params).dump() << '\n';
      return 0;
    }
    if (mode == "flax_vector") {
      auto params = grove::nn::init_network_params<float>({4, 3, 2}, grove::random::key(0));
      grove::io::load_into(
          file, params,
          {.rename = grove::io::flax_dense_names(), .transpose = grove::io::flax_kernels()});
      std::cout << dump_rows(params).dump() << '\n';
      return 0;
    }
    if (mode == "write" && argc == 5) {
      Half16 t;
      const std::uint16_t h[] = {0x0000, 0x8000, 0x3c00, 0x7c00, 0x0001, 0x7e01};
      for (int k = 0; k < 6; ++k) t.h(k / 3, k % 3) = std::bit_cast<Eigen::half>(h[k]);
      t.b.resize(4);
      const std::uint16_t b[] = {0x3f80, 0xff80, 0x0001, 0x7fc1};
      for (int k = 0; k < 4; ++k) t.b(k) = std::bit_cast<Eigen::bfloat16>(b[k]);
      t.h_scalar = std::bit_cast<Eigen::half>(std::uint16_t{0xc500});  // -5
      grove::io::save(file, t);
      grove::io::save(argv[3], inputs(), {}, {.floats = grove::io::float_storage::f16});
      grove::io::save(argv[4], inputs(), {}, {.floats = grove::io::float_storage::bf16});
      return 0;
    }
    std::cerr << "unknown mode " << mode << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
}
