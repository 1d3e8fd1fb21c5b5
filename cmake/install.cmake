# Install rules: headers, exported targets, package config + version file, pkg-config file.
# Included by the top-level CMakeLists.txt when ROPEX_INSTALL is ON (by default only when ropex is
# the top-level project, fmt's rule).
#
# Layout (header-only, so everything arch-independent lives under share/):
#   <prefix>/include/ropex/...                 headers
#   <prefix>/share/cmake/ropex/                ropexConfig.cmake, ropexConfigVersion.cmake, targets
#   <prefix>/share/pkgconfig/ropex.pc          pkg-config file
#
# Every rule belongs to the component `ropex_development` so the consumer tests can install just
# the library (`cmake --install <build> --component ropex_development`) without building tools.
include(CMakePackageConfigHelpers)

set(ROPEX_INSTALL_CMAKEDIR "${CMAKE_INSTALL_DATADIR}/cmake/ropex" CACHE STRING
    "Where ropexConfig.cmake is installed, relative to the prefix")
set(ROPEX_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_DATADIR}/pkgconfig" CACHE STRING
    "Where ropex.pc is installed, relative to the prefix")
set(_ropex_component COMPONENT ropex_development)

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/ropex" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        ${_ropex_component} FILES_MATCHING PATTERN "*.hpp" PATTERN "*.inl" PATTERN "*.h")

# One export set per target: a consumer that lacks Eigen or nlohmann/json must still get
# ropex::ropex, so the optional targets are loaded by ropexConfig.cmake only when their
# dependency is found (an imported target naming a missing Eigen3::Eigen would be an error).
install(TARGETS ropex EXPORT ropexTargets ${_ropex_component})
install(EXPORT ropexTargets NAMESPACE ropex:: DESTINATION "${ROPEX_INSTALL_CMAKEDIR}" ${_ropex_component})

# The optional targets keep the spellings of their build-tree aliases: ropex::attention and
# ropex::import_hf (not ropex::ropex_attention).
set(ROPEX_EXPORTED_OPTIONAL_TARGETS "")
if(TARGET ropex_attention)
  set_target_properties(ropex_attention PROPERTIES EXPORT_NAME attention)
  install(TARGETS ropex_attention EXPORT ropexAttentionTargets ${_ropex_component})
  install(EXPORT ropexAttentionTargets NAMESPACE ropex:: DESTINATION "${ROPEX_INSTALL_CMAKEDIR}"
          ${_ropex_component})
  list(APPEND ROPEX_EXPORTED_OPTIONAL_TARGETS attention)
endif()
if(TARGET ropex_import_hf)
  set_target_properties(ropex_import_hf PROPERTIES EXPORT_NAME import_hf)
  install(TARGETS ropex_import_hf EXPORT ropexImportHfTargets ${_ropex_component})
  install(EXPORT ropexImportHfTargets NAMESPACE ropex:: DESTINATION "${ROPEX_INSTALL_CMAKEDIR}"
          ${_ropex_component})
  list(APPEND ROPEX_EXPORTED_OPTIONAL_TARGETS import_hf)
endif()
if(TARGET ropex_model)  # both of the above plus include/ropex/model/
  set_target_properties(ropex_model PROPERTIES EXPORT_NAME model)
  install(TARGETS ropex_model EXPORT ropexModelTargets ${_ropex_component})
  install(EXPORT ropexModelTargets NAMESPACE ropex:: DESTINATION "${ROPEX_INSTALL_CMAKEDIR}"
          ${_ropex_component})
  list(APPEND ROPEX_EXPORTED_OPTIONAL_TARGETS model)
endif()

configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/ropexConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/ropexConfig.cmake"
                              INSTALL_DESTINATION "${ROPEX_INSTALL_CMAKEDIR}")
# 0.x releases may break the API between minor versions, but SameMajorVersion is the usual
# contract once 1.0 ships; ARCH_INDEPENDENT because nothing here depends on the target's pointer size.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/ropexConfigVersion.cmake"
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/ropexConfig.cmake" "${PROJECT_BINARY_DIR}/ropexConfigVersion.cmake"
        DESTINATION "${ROPEX_INSTALL_CMAKEDIR}" ${_ropex_component})

# pkg-config: paths relative to ${pcfiledir} so `cmake --install --prefix <anywhere>` still yields
# a correct file. An absolute CMAKE_INSTALL_INCLUDEDIR is used as given.
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(ROPEX_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(ROPEX_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
file(RELATIVE_PATH _ropex_pc_to_prefix "/prefix/${ROPEX_INSTALL_PKGCONFIGDIR}" "/prefix")
string(REGEX REPLACE "/$" "" _ropex_pc_to_prefix "${_ropex_pc_to_prefix}")
set(ROPEX_PC_PREFIX "\${pcfiledir}/${_ropex_pc_to_prefix}")
configure_file("${CMAKE_CURRENT_LIST_DIR}/ropex.pc.in" "${PROJECT_BINARY_DIR}/ropex.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/ropex.pc" DESTINATION "${ROPEX_INSTALL_PKGCONFIGDIR}" ${_ropex_component})

unset(_ropex_component)
unset(_ropex_pc_to_prefix)
