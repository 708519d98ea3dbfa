# CMake toolchain for 64-bit Windows with Debian's mingw-w64 (x86_64-w64-mingw32), for
# `make windows` and scripts/windows-deps.sh. The libraries vkgpt links (ZeroMQ, libsodium, cmocka,
# utf8proc, PCRE2) and Vulkan's and volk's headers are looked for only in the dependency prefix that
# scripts/windows-deps.sh fills: VKG_WIN_PREFIX (cache variable, else the environment variable,
# else build-win/deps beside the source tree), and in mingw's own folder. Programs (glslang,
# spirv-val) are the host's. Test programs run through scripts/wine-run.sh (Wine, with the
# prefix's DLL folder on WINEPATH and the X display the test driver started).
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_SYSTEM_VERSION 10.0) # Vista and later APIs (condition variables) for libzmq
set(VKG_MINGW_TRIPLE x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${VKG_MINGW_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${VKG_MINGW_TRIPLE}-g++)
set(CMAKE_RC_COMPILER ${VKG_MINGW_TRIPLE}-windres)

if(NOT VKG_WIN_PREFIX)
    if(DEFINED ENV{VKG_WIN_PREFIX} AND NOT "$ENV{VKG_WIN_PREFIX}" STREQUAL "")
        set(VKG_WIN_PREFIX "$ENV{VKG_WIN_PREFIX}")
    else()
        set(VKG_WIN_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../build-win/deps")
    endif()
endif()
get_filename_component(VKG_WIN_PREFIX "${VKG_WIN_PREFIX}" ABSOLUTE)
set(VKG_WIN_PREFIX "${VKG_WIN_PREFIX}" CACHE PATH "Prefix of the cross-built Windows dependencies")
# try_compile projects see the same prefix.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES VKG_WIN_PREFIX)
set(ENV{VKG_WIN_PREFIX} "${VKG_WIN_PREFIX}")

set(CMAKE_FIND_ROOT_PATH /usr/${VKG_MINGW_TRIPLE} ${VKG_WIN_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config reads the prefix's .pc files only, never the host's.
set(ENV{PKG_CONFIG_LIBDIR} "${VKG_WIN_PREFIX}/lib/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")

get_filename_component(vkg_wine_run "${CMAKE_CURRENT_LIST_DIR}/../scripts/wine-run.sh" ABSOLUTE)
set(CMAKE_CROSSCOMPILING_EMULATOR sh;${vkg_wine_run};--deps;${VKG_WIN_PREFIX})
