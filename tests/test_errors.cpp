// grove's one error story (docs/CONVENTIONS.md, "Errors"): each layer's errors derive from
// grove::error and from the standard exception that names their kind, and their messages start
// with the qualified name of the public function that was called.
#include <catch2/catch.hpp>

#include <grove/error.hpp>
#include <grove/parallel.hpp>
#include <grove/random.hpp>
#include <grove/tree.hpp>

#include <map>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

namespace {

// Runs f, which must throw E; returns the message, after checking that the same exception is
// also a grove::error with the same what().
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    const auto* root = dynamic_cast<const grove::error*>(&e);
    REQUIRE(root != nullptr);
    CHECK(std::string(root->what()) == e.what());
    return e.what();
  }
  FAIL("no exception of the expected type");
  return {};
}

}  // namespace

TEST_CASE("errors: each type is a grove::error and the standard type of its kind", "[errors]") {
  STATIC_REQUIRE(std::is_base_of_v<std::invalid_argument, grove::argument_error>);
  STATIC_REQUIRE(std::is_base_of_v<grove::error, grove::argument_error>);
  STATIC_REQUIRE(std::is_base_of_v<grove::argument_error, grove::tree_error>);
  STATIC_REQUIRE(std::is_base_of_v<grove::argument_error, grove::shape_error>);
  STATIC_REQUIRE(std::is_base_of_v<std::logic_error, grove::usage_error>);
  STATIC_REQUIRE(std::is_base_of_v<grove::error, grove::usage_error>);
  STATIC_REQUIRE(std::is_base_of_v<std::runtime_error, grove::parallel::aborted_error>);
  STATIC_REQUIRE(std::is_base_of_v<grove::error, grove::parallel::aborted_error>);
  // grove::error is a root to catch by, not a type to throw.
  STATIC_REQUIRE(std::is_abstract_v<grove::error>);
}

TEST_CASE("errors: the tree core throws tree_error naming the function and key path", "[errors]") {
  const std::map<std::string, std::vector<int>> a{{"x", {1, 2}}}, b{{"x", {1}}};
  const std::string what = message_of<grove::tree_error>(
      [&] { (void)grove::tree_map([](int u, int v) { return u + v; }, a, b); });
  CHECK_THAT(what, Catch::StartsWith("grove::tree_map: "));
  CHECK_THAT(what, Catch::Contains("['x']"));
  // Caught as the standard type too.
  CHECK_THROWS_AS(grove::tree_map([](int u, int v) { return u + v; }, a, b), std::invalid_argument);
}

TEST_CASE("errors: random throws argument_error naming the function and value", "[errors]") {
  const auto k = grove::random::key(0);
  CHECK(message_of<grove::argument_error>([&] { (void)grove::random::normal(k, -2); }) ==
        "grove::random::normal: n (-2) is negative");
  CHECK(message_of<grove::argument_error>([&] { (void)grove::random::bernoulli(k, 1.5f, 3); }) ==
        "grove::random::bernoulli: p (1.5) is outside [0, 1]");
}

TEST_CASE("errors: parallel throws argument_error and usage_error", "[errors]") {
  CHECK_THAT(message_of<grove::argument_error>([] { grove::parallel::LocalDevices devices(0); }),
             Catch::StartsWith("grove::parallel::LocalDevices: "));
  grove::parallel::LocalDevices devices(2);
  CHECK_THAT(message_of<grove::usage_error>([&] {
               devices.run([&](grove::parallel::LocalDevice&) {
                 devices.run([](grove::parallel::LocalDevice&) {});
               });
             }),
             Catch::StartsWith("grove::parallel::LocalDevices::run: "));
}
