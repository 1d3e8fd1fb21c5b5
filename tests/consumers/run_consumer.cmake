# Runs one consumer check in CMake script mode (see CMakeLists.txt beside this file).
#   cmake -DMODE=install|find_package|pkg_config|add_subdirectory -DSOURCE_DIR=... -P run_consumer.cmake
cmake_minimum_required(VERSION 3.20)

foreach(var MODE SOURCE_DIR BINARY_DIR CONSUMERS_DIR WORK_DIR PREFIX VERSION GENERATOR CXX)
  if("${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer.cmake: -D${var}= is required")
  endif()
endforeach()

# Runs a command, echoing it, and stops the script (non-zero exit) when it fails.
function(run)
  string(REPLACE ";" " " shown "${ARGN}")
  message(STATUS "+ ${shown}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "command failed (${result}): ${shown}")
  endif()
endfunction()

function(require_file path)
  if(NOT EXISTS "${path}")
    message(FATAL_ERROR "missing after install: ${path}")
  endif()
endfunction()

# Configures, builds and runs the consumer project in ${CONSUMERS_DIR}/<name> with the compiler
# and flags of the ropex build under test.
function(build_and_run name)
  set(build "${WORK_DIR}/${name}")
  file(REMOVE_RECURSE "${build}")
  run("${CMAKE_COMMAND}" -S "${CONSUMERS_DIR}/${name}" -B "${build}" -G "${GENERATOR}"
      -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
      "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON ${ARGN})
  run("${CMAKE_COMMAND}" --build "${build}" --config Release)
  # consumer, plus consumer_<target> for each optional target the project links.
  file(GLOB_RECURSE programs LIST_DIRECTORIES false "${build}/consumer*")
  list(FILTER programs EXCLUDE REGEX "/CMakeFiles/")
  list(FILTER programs INCLUDE REGEX "/consumer(_[a-z_]+)?(\\.exe)?$")
  if(NOT programs)
    message(FATAL_ERROR "consumer executable not found under ${build}")
  endif()
  foreach(exe ${programs})
    run("${exe}")
  endforeach()
  set(consumer_build "${build}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE "${PREFIX}")
  run("${CMAKE_COMMAND}" --install "${BINARY_DIR}" --prefix "${PREFIX}" --component ropex_development)
  require_file("${PREFIX}/include/ropex/ropex.hpp")
  require_file("${PREFIX}/share/cmake/ropex/ropexConfig.cmake")
  require_file("${PREFIX}/share/cmake/ropex/ropexConfigVersion.cmake")
  require_file("${PREFIX}/share/cmake/ropex/ropexTargets.cmake")
  require_file("${PREFIX}/share/pkgconfig/ropex.pc")

elseif(MODE STREQUAL "find_package")
  # COMPONENTS: the optional targets this build exported (attention, import_hf), which the installed
  # package must provide again when their dependencies are present.
  build_and_run(find_package "-DCMAKE_PREFIX_PATH=${PREFIX}" "-DROPEX_COMPONENTS=${COMPONENTS}")
  # The package must come from the temporary prefix, not from a ropex installed on the machine.
  file(STRINGS "${consumer_build}/CMakeCache.txt" found_dir REGEX "^ropex_DIR:")
  file(REAL_PATH "${PREFIX}/share/cmake/ropex" expected_dir)
  string(REGEX REPLACE "^ropex_DIR:[A-Z]+=" "" found_dir "${found_dir}")
  file(REAL_PATH "${found_dir}" found_dir)
  if(NOT found_dir STREQUAL expected_dir)
    message(FATAL_ERROR "find_package(ropex) used ${found_dir}, expected ${expected_dir}")
  endif()

elseif(MODE STREQUAL "pkg_config")
  set(ENV{PKG_CONFIG_PATH} "${PREFIX}/share/pkgconfig")
  execute_process(COMMAND "${PKG_CONFIG}" --modversion ropex OUTPUT_VARIABLE pc_version
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE result)
  if(NOT result EQUAL 0 OR NOT pc_version STREQUAL VERSION)
    message(FATAL_ERROR "pkg-config --modversion ropex gave '${pc_version}' (exit ${result}), expected ${VERSION}")
  endif()
  execute_process(COMMAND "${PKG_CONFIG}" --cflags ropex OUTPUT_VARIABLE pc_cflags
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "pkg-config --cflags ropex failed (${result})")
  endif()
  message(STATUS "pkg-config --cflags ropex: ${pc_cflags}")
  separate_arguments(pc_cflags UNIX_COMMAND "${pc_cflags}")
  separate_arguments(cxx_flags UNIX_COMMAND "${CXX_FLAGS}")
  separate_arguments(linker_flags UNIX_COMMAND "${LINKER_FLAGS}")
  file(MAKE_DIRECTORY "${WORK_DIR}/pkg_config")
  # -std=c++17 comes from the user, as the .pc file deliberately does not impose a standard.
  run("${CXX}" -std=c++17 -O2 ${cxx_flags} ${pc_cflags} "${CONSUMERS_DIR}/main.cpp" ${linker_flags}
      -o "${WORK_DIR}/pkg_config/consumer")
  run("${WORK_DIR}/pkg_config/consumer")

elseif(MODE STREQUAL "add_subdirectory")
  build_and_run(add_subdirectory "-DROPEX_SOURCE_DIR=${SOURCE_DIR}")

else()
  message(FATAL_ERROR "unknown MODE '${MODE}'")
endif()
