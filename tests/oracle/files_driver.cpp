// grove's checkpoints for tests/oracle/files_oracle.py, which writes and reads the same files with
// the real `safetensors` package (its numpy and flax APIs).
//
//   files_driver load NUMPY_FILE FLAX_FILE
//       loads a file of every dtype (safetensors.numpy) into `Mixed` and one of flax's dtypes
//       (safetensors.flax) into `FlaxMixed`, strictly; then the numpy file's F32 and F64 tensors
//       narrowed (load_options::convert) into BF16, F16 and F32 leaves. Prints every leaf's bits
//       in C order, and the files' metadata.
//   files_driver save DIR
//       saves a `Mixed` of grove's own values to DIR/mixed.safetensors, and a float tree stored
//       as BF16 and as F16 (save_options::floats) to DIR/{bf16,f16}.safetensors; prints the
//       values it saved.
//   files_driver flax_model COMPACT_FILE SEQUENTIAL_FILE X_RECORDS
//       loads a flax MLP with LayerNorms (its compact module's names, then flax.linen.Sequential's)
//       into grove's nn::sequential with flax_dense_names(params) and flax_kernels(), and prints
//       the parameters it loaded and nn::apply's output for the batch X (rows are examples).
#include <unsupported/Eigen/CXX11/Tensor>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iterator>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "grove/io/checkpoint.hpp"
#include "grove/nn.hpp"
#include "grove/tree/tensor.hpp"
#include "oracle_io.hpp"

namespace files {

template <class S>
using MatrixOf = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;

// Every dtype safetensors' numpy API writes that grove has a leaf for, in every kind of leaf:
// matrices of both storage orders, fixed-size ones, vectors, N-D tensors of both orders, a fixed
// tensor and rank-0 scalars. The field names are the tensor names.
struct Mixed {
  MatrixOf<float> f32;                                 // (64, 48)
  Eigen::Tensor<double, 3> f64;                        // (2, 3, 4)
  Eigen::Tensor<Eigen::half, 4, Eigen::RowMajor> f16;  // (2, 1, 3, 2)
  Eigen::Matrix<Eigen::bfloat16, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> bf16;  // (4, 3)
  Eigen::Matrix<std::int8_t, Eigen::Dynamic, 1> i8;                                      // (7,)
  Eigen::Matrix<std::int16_t, 2, 3> i16;                                                 // (2, 3)
  Eigen::Tensor<std::int32_t, 2> i32;                                                    // (3, 2)
  std::int64_t i64 = 0;                                                                  // ()
  Eigen::Array<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic> u8;                         // (2, 2)
  Eigen::Matrix<std::uint16_t, Eigen::Dynamic, 1> u16;                                   // (5,)
  Eigen::Tensor<std::uint32_t, 1> u32;                                                   // (4,)
  Eigen::Matrix<std::uint64_t, 1, Eigen::Dynamic> u64;                                   // (3,)
  MatrixOf<bool> flags;                                                                  // (2, 3)
  float scalar = 0;                                                                      // ()
  Eigen::TensorFixedSize<float, Eigen::Sizes<2, 2, 2>> cube;  // (2, 2, 2)
};
GROVE_NODE(Mixed, f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64, flags, scalar, cube);

Mixed make_mixed() {
  Mixed m;
  m.f32.resize(64, 48);
  m.f64.resize(2, 3, 4);
  m.f16.resize(2, 1, 3, 2);
  m.bf16.resize(4, 3);
  m.i8.resize(7);
  m.i32.resize(3, 2);
  m.u8.resize(2, 2);
  m.u16.resize(5);
  m.u32.resize(4);
  m.u64.resize(3);
  m.flags.resize(2, 3);
  return m;
}

// The dtypes flax's arrays have without jax_enable_x64.
struct FlaxMixed {
  MatrixOf<float> kernel;                             // (3, 4)
  Eigen::Tensor<Eigen::bfloat16, 3> bf16;             // (2, 3, 2)
  Eigen::Matrix<Eigen::half, Eigen::Dynamic, 1> f16;  // (5,)
  MatrixOf<std::int32_t> i32;                         // (2, 2)
  Eigen::Matrix<std::uint8_t, Eigen::Dynamic, 1> u8;  // (3,)
  Eigen::Matrix<bool, Eigen::Dynamic, 1> flags;       // (4,)
};
GROVE_NODE(FlaxMixed, kernel, bf16, f16, i32, u8, flags);

// The numpy file's float tensors narrowed on load.
struct NarrowedToBf16 {
  Eigen::Matrix<Eigen::bfloat16, Eigen::Dynamic, Eigen::Dynamic> f32;
  Eigen::Tensor<float, 3> f64;
};
GROVE_NODE(NarrowedToBf16, f32, f64);
struct NarrowedToF16 {
  Eigen::Matrix<Eigen::half, Eigen::Dynamic, Eigen::Dynamic> f32;
};
GROVE_NODE(NarrowedToF16, f32);

// numpy's name of a scalar type in the records; BF16 travels as its bits (numpy has no bfloat16
// without ml_dtypes).
template <class S>
constexpr const char* numpy_code() {
  if constexpr (std::is_same_v<S, float>)
    return "f4";
  else if constexpr (std::is_same_v<S, double>)
    return "f8";
  else if constexpr (std::is_same_v<S, Eigen::half>)
    return "f2";
  else if constexpr (std::is_same_v<S, Eigen::bfloat16>)
    return "u2";
  else if constexpr (std::is_same_v<S, bool>)
    return "b1";
  else if constexpr (std::is_signed_v<S>) {
    constexpr const char* codes[] = {"i1", "i2", "", "i4", "", "", "", "i8"};
    return codes[sizeof(S) - 1];
  } else {
    constexpr const char* codes[] = {"u1", "u2", "", "u4", "", "", "", "u8"};
    return codes[sizeof(S) - 1];
  }
}

template <class L>
concept tensor_leaf = requires {
  L::NumIndices;
};

// A leaf's elements in C order, copied as bytes (a signaling NaN is never loaded into a float
// register on the way), and its shape as grove::shape gives it.
struct Bytes {
  std::vector<std::size_t> shape;
  std::string bytes;
};
template <class L>
Bytes c_order(const L& leaf) {
  Bytes out;
  auto append = [&out](const auto& x) {
    out.bytes.append(reinterpret_cast<const char*>(&x), sizeof x);
  };
  if constexpr (std::is_arithmetic_v<L>) {
    append(leaf);
  } else if constexpr (tensor_leaf<L>) {
    constexpr int n = L::NumIndices;
    std::array<Eigen::Index, n> index{};
    for (int d = 0; d < n; ++d) out.shape.push_back(static_cast<std::size_t>(leaf.dimension(d)));
    for (Eigen::Index k = 0; k < leaf.size(); ++k) {
      append(leaf.coeff(index));
      for (int d = n - 1; d >= 0 && ++index[d] == leaf.dimension(d); --d) index[d] = 0;
    }
  } else {
    if (L::RowsAtCompileTime == 1 || L::ColsAtCompileTime == 1)
      out.shape = {static_cast<std::size_t>(leaf.size())};
    else
      out.shape = {static_cast<std::size_t>(leaf.rows()), static_cast<std::size_t>(leaf.cols())};
    for (Eigen::Index i = 0; i < leaf.rows(); ++i)
      for (Eigen::Index j = 0; j < leaf.cols(); ++j) append(leaf.coeff(i, j));
  }
  return out;
}

template <class L>
struct scalar_of_t {
  using type = typename L::Scalar;
};
template <class L>
requires std::is_arithmetic_v<L>
struct scalar_of_t<L> {
  using type = L;
};
template <class L>
using scalar_of = typename scalar_of_t<L>::type;

// Prints each leaf of `tree` as the record PREFIX/NAME, NAME its tensor name.
template <class Tree>
void emit_tree(const std::string& prefix, const Tree& tree) {
  for (const auto& [path, leaf] : grove::tree_leaves_with_path(tree)) {
    auto emit_one = [&, &path = path](const auto* p) {
      using L = std::remove_cvref_t<decltype(*p)>;
      const Bytes b = c_order(*p);
      oracle::emit_raw(prefix + "/" + grove::keystr(path, "/"), numpy_code<scalar_of<L>>(), b.shape,
                       b.bytes.data(), b.bytes.size());
    };
    if constexpr (requires { std::visit(emit_one, leaf); })
      std::visit(emit_one, leaf);
    else
      emit_one(leaf);
  }
}

void emit_metadata(const std::string& prefix, const grove::io::metadata& m) {
  for (const auto& [key, value] : m) oracle::emit_text(prefix + "/" + key, value);
}

// A stream of 64-bit words (splitmix64), for grove's own values.
struct Bits {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
  }
};

// Fills every leaf of `tree` with random bits (every float pattern: NaNs with payloads,
// infinities, subnormals, -0), bools with 0 or 1.
template <class Tree>
void fill_bits(Tree& tree, Bits& bits) {
  grove::tree_for_each(
      [&](auto& leaf) {
        using L = std::remove_cvref_t<decltype(leaf)>;
        using S = scalar_of<L>;
        auto draw = [&](S& x) {
          const std::uint64_t w = bits.next();
          if constexpr (std::is_same_v<S, bool>)
            x = (w & 1) != 0;
          else
            std::memcpy(static_cast<void*>(&x), &w, sizeof x);  // the low bytes
        };
        if constexpr (std::is_arithmetic_v<L>)
          draw(leaf);
        else
          for (Eigen::Index k = 0; k < leaf.size(); ++k) draw(leaf.data()[k]);
      },
      tree);
}

template <class S, class U>
S from_bits(U u) {
  S s;
  static_assert(sizeof(S) == sizeof(U));
  std::memcpy(&s, &u, sizeof s);
  return s;
}

int load(const std::string& numpy_file, const std::string& flax_file) {
  Mixed mixed = make_mixed();
  emit_metadata("numpy/metadata", grove::io::load_into(numpy_file, mixed));
  emit_tree("numpy", mixed);

  FlaxMixed flax;
  flax.kernel.resize(3, 4);
  flax.bf16.resize(2, 3, 2);
  flax.f16.resize(5);
  flax.i32.resize(2, 2);
  flax.u8.resize(3);
  flax.flags.resize(4);
  emit_metadata("flax/metadata", grove::io::load_into(flax_file, flax));
  emit_tree("flax", flax);

  // Narrowing: only these tensors are loaded (strict = false leaves the others unread).
  NarrowedToBf16 to_bf16{MatrixOf<Eigen::bfloat16>(64, 48), Eigen::Tensor<float, 3>(2, 3, 4)};
  const auto report = grove::io::load_into(numpy_file, to_bf16, {.strict = false, .convert = true});
  oracle::emit("narrowed/unexpected_count", std::vector<std::uint64_t>{report.unexpected.size()});
  emit_tree("narrowed", to_bf16);
  NarrowedToF16 to_f16{MatrixOf<Eigen::half>(64, 48)};
  grove::io::load_into(numpy_file, to_f16, {.strict = false, .convert = true});
  emit_tree("narrowed_f16", to_f16);
  return 0;
}

int save(const std::filesystem::path& dir) {
  Mixed mixed = make_mixed();
  Bits bits{33};
  fill_bits(mixed, bits);
  grove::io::save(dir / "mixed.safetensors", mixed, {{"origin", "grove"}, {"epoch", "7"}});
  emit_tree("mixed", mixed);

  // Floats stored as 16-bit floats: values around 1 and ties (a ninth of the elements each), random
  // bit patterns (wide range: overflow and underflow), and the special values.
  MatrixOf<float> floats(96, 40);
  for (Eigen::Index k = 0; k < floats.size(); ++k) {
    const std::uint64_t w = bits.next();
    float& x = floats.data()[k];
    switch (k % 9) {
      case 0:  // a tie for BF16 (the 16 bits below its mantissa are 0x8000)
        x = from_bits<float>(static_cast<std::uint32_t>((w & 0xffff0000u) | 0x8000u));
        break;
      case 1:  // a tie for F16 (13 dropped bits 0x1000), in F16's normal range
        x = from_bits<float>(static_cast<std::uint32_t>(0x38000000u + (w & 0x0fffe000u)) | 0x1000u);
        break;
      case 2:
      case 3:
      case 4:
        x = static_cast<float>(static_cast<double>(w >> 11) * 0x1p-53 * 8 - 4);
        break;
      default:
        x = from_bits<float>(static_cast<std::uint32_t>(w));
    }
  }
  const std::uint32_t special[] = {0x7f800000u, 0xff800000u, 0x80000000u, 0x00000000u,
                                   0x7fc00000u, 0xffc01234u, 0x7f800001u, 0x00000001u,
                                   0x807fffffu, 0x477fe000u, 0x477ff000u, 0x7f7fffffu,
                                   0x33800000u, 0x33000000u, 0x387fc000u, 0x3f808000u};
  for (std::size_t k = 0; k < std::size(special); ++k)
    floats.data()[k * 7] = from_bits<float>(special[k]);
  const std::map<std::string, MatrixOf<float>> tree{{"floats", floats}};
  grove::io::save(dir / "bf16.safetensors", tree, {}, {.floats = grove::io::float_storage::bf16});
  grove::io::save(dir / "f16.safetensors", tree, {}, {.floats = grove::io::float_storage::f16});
  emit_tree("source", tree);
  return 0;
}

namespace nn = grove::nn;

// flax: Dense(16), LayerNorm, relu, Dense(8), LayerNorm, Dense(4) on 6 features.
auto flax_mlp() {
  return nn::sequential(nn::dense(6, 16), nn::layer_norm(16), nn::relu, nn::dense(16, 8),
                        nn::layer_norm(8), nn::dense(8, 4));
}

int flax_model(const std::string& compact, const std::string& sequential,
               const std::string& x_records) {
  const auto records = oracle::read_records(x_records);
  const Eigen::MatrixXf X = records.at("x").matrix<float>().transpose();  // columns: examples
  const auto model = flax_mlp();
  for (const auto& [name, file] :
       {std::pair{"compact", compact}, std::pair{"sequential", sequential}}) {
    auto params = nn::init<float>(model, grove::random::key(1));
    grove::io::load_into(
        file, params,
        {.rename = grove::io::flax_dense_names(params), .transpose = grove::io::flax_kernels()});
    emit_tree(std::string(name) + "/params", params);
    const Eigen::MatrixXf y = nn::apply(model, params, X);
    oracle::emit(std::string(name) + "/y", Eigen::MatrixXf(y.transpose()));
  }
  return 0;
}

}  // namespace files

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 3 && args[0] == "load") return files::load(args[1], args[2]);
    if (args.size() == 2 && args[0] == "save") return files::save(args[1]);
    if (args.size() == 4 && args[0] == "flax_model")
      return files::flax_model(args[1], args[2], args[3]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "files_driver: %s\n", e.what());
    return 1;
  }
  std::fprintf(
      stderr, "usage: files_driver load NUMPY FLAX | save DIR | flax_model COMPACT SEQUENTIAL X\n");
  return 2;
}
