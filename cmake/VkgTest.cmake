# Test helpers shared by every area's CMakeLists.txt.
add_library(vkg_testutil STATIC ${PROJECT_SOURCE_DIR}/tests/testutil.c)
target_link_libraries(vkg_testutil PUBLIC vkg_os m)
target_include_directories(vkg_testutil PUBLIC ${PROJECT_SOURCE_DIR}/tests)
vkg_whole_tree(vkg_testutil)

# The tests a Windows build (cmake/mingw-w64.cmake) leaves out, "name|reason": what they need is
# not built for Windows yet. vkg_add_test skips them there; the tests/CMakeLists.txt blocks that
# register one with add_test, or add to its target, check VKG_LEFT_OUT_TESTS themselves.
set(VKG_LEFT_OUT_TESTS "")
if(WIN32)
    set(vkg_why_cli "runs the vkgpt executable through tests/testproc.c (fork, pipes; a Windows spawn is still to come)")
    set(vkg_why_procs "runs ranks as forked processes (tests/test_comm_harness.c forks them; its Windows build has threads only)")
    set(vkg_why_shm "the shared-memory collectives (memfd, futex, Unix sockets, process_vm_readv) are Linux-only: Windows runs ZeroMQ (transport/shm_none.c)")
    set(vkg_why_host "a compile check of the host's build with the host's compilers (the Windows build compiles the win32 sources itself)")
    set(VKG_WIN32_LEFT_OUT
        "test_cli_train|${vkg_why_cli}, forkpty"
        "test_ckpt_guard|${vkg_why_cli}"
        "test_cli_resume|${vkg_why_cli}"
        "test_cli_hf|${vkg_why_cli}"
        "test_cli_sample|${vkg_why_cli}, forkpty"
        "test_cli_input|${vkg_why_cli}, signals"
        "test_cli_errors|${vkg_why_cli}, signals"
        "test_vk_loader|${vkg_why_cli}"
        "test_dispatch_train|${vkg_why_cli}"
        "test_bench_ops|${vkg_why_cli}"
        "test_dp_launch|${vkg_why_cli}: `vkgpt launch`, which forks its ranks (on Windows it says so and exits 2)"
        "test_dp_hardening|${vkg_why_cli}: `vkgpt launch`, which forks its ranks"
        "device_check_bundle|the GPU machine's bundle (scripts/device-check.sh: shell, ELF libraries, the vkgpt executable)"
        "device_check_stub|scripts/device-check.sh's run.sh and the vkgpt executable"
        "test_comm_env|its key-file cases read a FIFO and /dev/zero and make folders with mkdtemp (POSIX)"
        "test_comm_shm|${vkg_why_shm}"
        "test_comm_shm_guard|${vkg_why_shm}"
        "test_comm_direct|${vkg_why_shm}"
        "test_comm_hier|${vkg_why_shm}, across fake hosts of ${vkg_why_procs}"
        "test_comm_hier_copy|${vkg_why_shm}, across fake hosts of ${vkg_why_procs}"
        "test_comm_hier_netns|network namespaces (scripts/hier-netns.sh, Linux)"
        "test_comm_fault|kills and stops ranks that ${vkg_why_procs}, with signals"
        "test_comm_group_fault|kills ranks that ${vkg_why_procs}; groups in shared memory"
        "test_checkpoint_resume|forks a second process to hold the checkpoint folder's lock (fork, waitpid)"
        "test_dispatch_limit|runs itself again with other environments through /proc/self/exe and popen"
        "test_flags|redirects stdout by assigning to it, which Windows' C library does not allow"
        "os_posix_strict|${vkg_why_host}"
        "src_posix_strict|${vkg_why_host}"
        "os_win32_compiles|${vkg_why_host}"
        "no_vulkan_link|reads the needed libraries of ELF files (readelf)"
        "install_prefix|the install rules are not built for Windows yet (they install the vkgpt executable)")
    foreach(entry ${VKG_WIN32_LEFT_OUT})
        string(REGEX REPLACE "\\|.*" "" n "${entry}")
        string(REGEX REPLACE "^[^|]*\\|" "" why "${entry}")
        list(APPEND VKG_LEFT_OUT_TESTS ${n})
        message(STATUS "Windows build: test ${n} left out: ${why}")
    endforeach()
endif()

# vkg_add_test(name LABEL label SOURCES ... [LIBS ...] [TIMEOUT seconds])
# Builds a cmocka test program and registers it with ctest under the given label
# (unit, gpu, net or e2e). Nothing for a test this build leaves out (VKG_LEFT_OUT_TESTS).
function(vkg_add_test name)
    if(name IN_LIST VKG_LEFT_OUT_TESTS)
        return()
    endif()
    cmake_parse_arguments(T "" "LABEL;TIMEOUT" "SOURCES;LIBS" ${ARGN})
    add_executable(${name} ${T_SOURCES})
    target_link_libraries(${name} PRIVATE ${T_LIBS} vkg_testutil PkgConfig::CMOCKA)
    vkg_whole_tree(${name})
    add_test(NAME ${name} COMMAND ${name})
    if(NOT T_TIMEOUT)
        set(T_TIMEOUT 300)
    endif()
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABEL}" TIMEOUT ${T_TIMEOUT})
endfunction()

# A test that runs the vkgpt executable (VKGPT_BIN, built first) through tests/testproc.c, label
# e2e; PTY: it also drives a terminal (forkpty, libutil). Skipped where VKG_LEFT_OUT_TESTS names it.
function(vkg_add_cli_test name)
    cmake_parse_arguments(C "PTY" "TIMEOUT" "SOURCES;LIBS" ${ARGN})
    if(name IN_LIST VKG_LEFT_OUT_TESTS)
        return()
    endif()
    vkg_add_test(${name} LABEL e2e SOURCES ${C_SOURCES}
                 ${PROJECT_SOURCE_DIR}/tests/testproc.c LIBS ${C_LIBS} TIMEOUT ${C_TIMEOUT})
    target_compile_definitions(${name} PRIVATE VKGPT_BIN="$<TARGET_FILE:vkgpt_cli>")
    if(C_PTY)
        target_link_libraries(${name} PRIVATE util)
    endif()
    add_dependencies(${name} vkgpt_cli)
endfunction()
