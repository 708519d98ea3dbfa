# Install rules. `cmake --install build --prefix P` puts:
#   P/bin/vkgpt                         the command-line tool
#   P/lib/libvkgpt.a                    the library: one static archive holding every layer
#   P/include/vkgpt/*.h                 its public headers
#   P/lib/pkgconfig/vkgpt.pc            for `pkg-config --cflags --libs vkgpt`
#   P/lib/cmake/vkgpt/vkgptConfig*.cmake  for find_package(vkgpt): the target vkgpt::vkgpt
# (lib is CMAKE_INSTALL_LIBDIR). Both descriptions find the prefix from where they lie, so the
# install may be moved. The reference CPU model (src/ref) and the tests are not installed.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The layers' objects, lowest last (what the vkgpt INTERFACE target links).
set(vkg_install_layers vkg_train vkg_parallel vkg_model vkg_optim vkg_ops vkg_vk vkg_shaders
    vkg_data vkg_io vkg_model_table vkg_transport vkg_base vkg_os)
set(vkg_install_objects)
foreach(l ${vkg_install_layers})
    list(APPEND vkg_install_objects $<TARGET_OBJECTS:${l}>)
endforeach()
add_library(vkgpt_archive STATIC ${vkg_install_objects})
set_target_properties(vkgpt_archive PROPERTIES OUTPUT_NAME vkgpt
                      ARCHIVE_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)

# From a file in DIR (relative to the prefix) back to the prefix: "../.." for lib/pkgconfig.
function(vkg_up_to_prefix dir out)
    file(RELATIVE_PATH rel /prefix/${dir} /prefix)
    string(REGEX REPLACE "/$" "" rel "${rel}")
    set(${out} ${rel} PARENT_SCOPE)
endfunction()

vkg_up_to_prefix(${CMAKE_INSTALL_LIBDIR}/pkgconfig VKG_PC_UP)
# volk opens the Vulkan loader at run time: the dynamic loader's library where it is one of its own.
set(VKG_PC_DL "")
foreach(l ${CMAKE_DL_LIBS})
    string(APPEND VKG_PC_DL " -l${l}")
endforeach()
string(STRIP "${VKG_PC_DL}" VKG_PC_DL)
configure_file(${PROJECT_SOURCE_DIR}/cmake/vkgpt.pc.in ${PROJECT_BINARY_DIR}/vkgpt.pc @ONLY)
vkg_up_to_prefix(${CMAKE_INSTALL_LIBDIR}/cmake/vkgpt VKG_CONFIG_UP)
configure_file(${PROJECT_SOURCE_DIR}/cmake/vkgptConfig.cmake.in
               ${PROJECT_BINARY_DIR}/vkgptConfig.cmake @ONLY)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vkgptConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)

# The installed tool keeps the run path of libraries outside the system directories (Debian's
# OpenBLAS lives in openblas-pthread/).
set_target_properties(vkgpt_cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS vkgpt_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS vkgpt_archive ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/vkgpt DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/vkgpt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(FILES ${PROJECT_BINARY_DIR}/vkgptConfig.cmake ${PROJECT_BINARY_DIR}/vkgptConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkgpt)

