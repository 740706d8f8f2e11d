// grove::data::read_safetensors: datasets from tensors that PyTorch-style files hold (examples
// along the first axis, any numeric dtype), and the refusals.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <grove/data/batches.hpp>
#include <grove/data/safetensors.hpp>
#include <grove/tree/tensor.hpp>

namespace data = grove::data;
namespace io = grove::io;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

struct Images {
  Eigen::Tensor<std::uint8_t, 3, Eigen::RowMajor> images;  // (n, 2, 3)
  Eigen::Tensor<std::int64_t, 1, Eigen::RowMajor> labels;  // (n,)
  Eigen::Tensor<double, 2, Eigen::RowMajor> values;        // (n, 2)
  Eigen::Tensor<float, 1, Eigen::RowMajor> fractions;      // (n,)
  Eigen::Tensor<std::int64_t, 1, Eigen::RowMajor> big;     // (n,), beyond int32
  Eigen::Tensor<std::int64_t, 1, Eigen::RowMajor> three;   // (3,)
};
GROVE_NODE(Images, images, labels, values, fractions, big, three);

fs::path saved(const Images& tree) {
  const auto path = fs::temp_directory_path() /
                    ("grove_data_safetensors_" + std::to_string(::getpid()) + ".safetensors");
  io::save(path, tree);
  return path;
}

Images sample() {
  Images s;
  s.images.resize(4, 2, 3);
  for (int i = 0; i < 24; ++i) s.images.data()[i] = static_cast<std::uint8_t>(10 * i);
  s.labels.resize(4);
  s.values.resize(4, 2);
  s.fractions.resize(4);
  s.big.resize(4);
  for (int i = 0; i < 4; ++i) {
    s.labels(i) = 3 - i;
    s.values(i, 0) = i + 0.5;
    s.values(i, 1) = -i;
    s.fractions(i) = 0.25f * static_cast<float>(i);
    s.big(i) = i == 2 ? std::int64_t{1} << 40 : i;
  }
  s.three.resize(3);
  s.three.setZero();
  return s;
}

}  // namespace

TEST_CASE("safetensors: examples along the first axis become columns", "[data][safetensors]") {
  const auto path = saved(sample());
  // U8 images (4, 2, 3): each example's 6 values in row-major order, as numpy's reshape(4, -1).
  const auto d = data::read_safetensors<float>(path, "images", "labels");
  REQUIRE(d.features() == 6);
  REQUIRE(d.size() == 4);
  for (int j = 0; j < 4; ++j)
    for (int f = 0; f < 6; ++f) CHECK(d.inputs(f, j) == static_cast<float>(10 * (6 * j + f)));
  CHECK(d.targets == Eigen::Vector4i(3, 2, 1, 0));

  // F64 (n, 2) inputs as double, float (n,) targets as a 1 x n matrix.
  const auto r = data::read_safetensors<double, Eigen::MatrixXd>(path, "values", "fractions");
  CHECK(r.inputs(0, 3) == 3.5);
  CHECK(r.inputs(1, 3) == -3.0);
  CHECK(r.targets.rows() == 1);
  CHECK(r.targets(0, 2) == 0.5);
  fs::remove(path);
}

TEST_CASE("safetensors: what a dataset cannot be made of", "[data][safetensors][errors]") {
  const auto path = saved(sample());
  CHECK_THROWS_WITH(data::read_safetensors<float>(path, "pixels", "labels"),
                    Contains("has no tensor \"pixels\" (it has \"images\", \"labels\""));
  CHECK_THROWS_WITH(data::read_safetensors<float>(path, "images", "three"),
                    Contains("\"images\" holds 4 examples (its first axis) but \"three\" 3"));
  CHECK_THROWS_WITH(data::read_safetensors<float>(path, "images", "fractions"),
                    Contains("holds floats (F32), and labels must be integers"));
  CHECK_THROWS_WITH(data::read_safetensors<float>(path, "images", "values"),
                    Contains("labels \"values\" must have shape (n,)"));
  CHECK_THROWS_WITH(data::read_safetensors<float>(path, "images", "big"), Contains("big"));
  CHECK_THROWS_AS(data::read_safetensors<float>(path.string() + ".missing", "images", "labels"),
                  io::file_error);
  fs::remove(path);
}

TEST_CASE("data::position is saved and restored by a checkpoint", "[data][batches][checkpoint]") {
  const auto path = fs::temp_directory_path() /
                    ("grove_data_position_" + std::to_string(::getpid()) + ".safetensors");
  const data::position where{7, 123};
  io::save(path, where);
  CHECK(io::load(path, data::position{}) == where);
  const auto info = io::inspect(path);
  REQUIRE(info.tensors.size() == 2);
  CHECK(info.tensors[0].name == "epoch");
  CHECK(info.tensors[1].name == "batch");
  fs::remove(path);
}
