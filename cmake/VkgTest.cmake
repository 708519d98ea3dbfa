# Test helpers shared by every area's CMakeLists.txt.
add_library(vkg_testutil STATIC ${PROJECT_SOURCE_DIR}/tests/testutil.c)
target_link_libraries(vkg_testutil PUBLIC m)
target_include_directories(vkg_testutil PUBLIC ${PROJECT_SOURCE_DIR}/tests)
vkg_whole_tree(vkg_testutil)

# vkg_add_test(name LABEL label SOURCES ... [LIBS ...] [TIMEOUT seconds])
# Builds a cmocka test program and registers it with ctest under the given label
# (unit, gpu, net or e2e).
function(vkg_add_test name)
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
