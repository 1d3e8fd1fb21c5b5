// Catch2 v2 gets its main() here; v3 links Catch2::Catch2WithMain instead (tests/CMakeLists.txt).
#define CATCH_CONFIG_MAIN
#include "catch.hpp"
