// Registered structs through a checkpoint round trip, for every registration order of a 3-field
// struct and of a class template, and with static fields: each value comes back in its own field.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <string>
#include <vector>

#include "checkpoint_fixture.hpp"

namespace ckpt_perm {

#define CKPT_PERM(Name, a, b, c)                 \
  struct Name {                                  \
    Eigen::VectorXf x, y, z;                     \
  };                                             \
  GROVE_NODE(Name, a, b, c);                     \
  template <class T>                             \
  struct Name##T {                               \
    Eigen::Matrix<T, Eigen::Dynamic, 1> x, y, z; \
  };                                             \
  GROVE_NODE(Name##T, a, b, c)

CKPT_PERM(Cxyz, x, y, z);
CKPT_PERM(Cxzy, x, z, y);
CKPT_PERM(Cyxz, y, x, z);
CKPT_PERM(Cyzx, y, z, x);
CKPT_PERM(Czxy, z, x, y);
CKPT_PERM(Czyx, z, y, x);

// A layer with static fields: the checkpoint holds its leaves; the static values come from `like`.
struct Conv {
  Eigen::VectorXf w;
  std::string name;
  int stride = 1;
};
GROVE_NODE_STATIC(Conv, (w), (name, stride));

template <class S>
S filled(float x, float y, float z) {
  S s;
  s.x = decltype(s.x)::Constant(2, x);
  s.y = decltype(s.y)::Constant(3, y);  // distinct sizes: a swap would not even load
  s.z = decltype(s.z)::Constant(4, z);
  return s;
}
template <class S>
S same_sizes(float x, float y, float z) {
  S s;
  s.x = decltype(s.x)::Constant(2, x);
  s.y = decltype(s.y)::Constant(2, y);
  s.z = decltype(s.z)::Constant(2, z);
  return s;
}

}  // namespace ckpt_perm

TEMPLATE_TEST_CASE("checkpoint: every registration order round-trips field by field",
                   "[io][checkpoint][tree][fields]", ckpt_perm::Cxyz, ckpt_perm::Cxzy,
                   ckpt_perm::Cyxz, ckpt_perm::Cyzx, ckpt_perm::Czxy, ckpt_perm::Czyx,
                   ckpt_perm::CxyzT<double>, ckpt_perm::CxzyT<double>, ckpt_perm::CyxzT<double>,
                   ckpt_perm::CyzxT<double>, ckpt_perm::CzxyT<double>, ckpt_perm::CzyxT<double>) {
  using S = TestType;
  ckpt_test::temp_dir dir;
  const auto file = dir / "perm.safetensors";
  // Same sizes, so that only names keep the values apart.
  const S original = ckpt_perm::same_sizes<S>(1, 2, 3);
  grove::io::save(file, original);
  const S back = grove::io::load(file, ckpt_perm::same_sizes<S>(0, 0, 0));
  CHECK(back.x == original.x);
  CHECK(back.y == original.y);
  CHECK(back.z == original.z);
  const S sized = ckpt_perm::filled<S>(4, 5, 6);
  grove::io::save(file, sized);
  const S sized_back = grove::io::load(file, ckpt_perm::filled<S>(0, 0, 0));
  CHECK(sized_back.x == sized.x);
  CHECK(sized_back.y == sized.y);
  CHECK(sized_back.z == sized.z);
}

TEST_CASE("checkpoint: a struct with static fields keeps them", "[io][tree][static][checkpoint]") {
  ckpt_test::temp_dir dir;
  const auto file = dir / "conv.safetensors";
  const std::vector<ckpt_perm::Conv> net{{Eigen::VectorXf::Constant(3, 1.5f), "conv1", 2},
                                         {Eigen::VectorXf::Constant(2, -1.0f), "conv2", 1}};
  grove::io::save(file, net);
  const auto info = grove::io::inspect(file);
  CHECK(info.treedef == grove::tree_structure(net).str());
  auto like = net;
  for (auto& c : like) c.w.setZero();
  const auto back = grove::io::load(file, like);
  REQUIRE(back.size() == 2);
  CHECK(back[0].w == net[0].w);
  CHECK(back[1].w == net[1].w);
  CHECK(back[0].name == "conv1");
  CHECK(back[0].stride == 2);
  CHECK(back[1].name == "conv2");
  CHECK(back[1].stride == 1);
}
