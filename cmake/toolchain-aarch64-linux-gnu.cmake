# Cross-compiles for aarch64 Linux with Debian's g++-aarch64-linux-gnu and runs the results under
# qemu-aarch64 (Debian's qemu-user), so CTest and catch_discover_tests work on an x86-64 host:
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake
# Executables are linked statically, so qemu needs no aarch64 sysroot at run time.
# ROPEX_AARCH64_TRIPLE / ROPEX_AARCH64_EMULATOR override the compiler prefix and the emulator.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(ROPEX_AARCH64_TRIPLE "aarch64-linux-gnu" CACHE STRING "Prefix of the aarch64 cross tools")
set(CMAKE_C_COMPILER "${ROPEX_AARCH64_TRIPLE}-gcc")
set(CMAKE_CXX_COMPILER "${ROPEX_AARCH64_TRIPLE}-g++")

# Libraries and headers of the target come from its sysroot only; programs from the host. Packages
# may come from both: Debian's catch2 2.x is header-only and installs its CMake package for the
# host under /usr/lib/cmake/Catch2, which is right for the target too.
set(CMAKE_FIND_ROOT_PATH "/usr/${ROPEX_AARCH64_TRIPLE}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

find_program(ROPEX_AARCH64_EMULATOR NAMES qemu-aarch64 qemu-aarch64-static)
if(ROPEX_AARCH64_EMULATOR)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${ROPEX_AARCH64_EMULATOR}")
endif()
