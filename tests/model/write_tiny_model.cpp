// Writes the tests' tiny random Llama (tiny_model.hpp) to argv[1], for the ropex-study CLI tests.
#include <cstdio>

#include "tiny_model.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_tiny_model DIR\n");
    return 2;
  }
  ropex_test::tiny_spec s;
  s.max_position = 16;  // the "pretrained" length of the studies
  (void)ropex_test::write_tiny_model(argv[1], s);
  return 0;
}
