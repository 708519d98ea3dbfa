# ctest cli_includes: src/cli reaches the library only through its public headers (vkgpt/) and the
# one declared internal header, src/cli/internal.h. Every other quoted include of a src/cli file
# must be one of its own (cli/) or of the support below the library (os/ and base/);
# the ops' X-macro table may be included where bench ops builds its rows. The same check run on tests/layers/cli_bad must find that folder's one bad include, so a
# check that finds nothing is not a check that cannot find anything.
# Run with -DSRC=source dir.
function(bad_includes dir out)
    file(GLOB files ${dir}/*.c ${dir}/*.h)
    set(bad "")
    foreach(f ${files})
        get_filename_component(name ${f} NAME)
        if(name STREQUAL "internal.h")
            continue()
        endif()
        file(STRINGS ${f} lines REGEX "^#include \"")
        foreach(l ${lines})
            string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" inc "${l}")
            if(inc MATCHES "^(cli|vkgpt|os|base)/")
                continue()
            endif()
            if(name STREQUAL "bench_ops.c" AND inc STREQUAL "ops/op_table.def")
                continue()
            endif()
            list(APPEND bad "${name}: ${inc}")
        endforeach()
    endforeach()
    set(${out} "${bad}" PARENT_SCOPE)
endfunction()

bad_includes(${SRC}/src/cli found)
if(found)
    string(REPLACE ";" "\n  " found "${found}")
    message(FATAL_ERROR "src/cli includes the library's internal headers past src/cli/internal.h "
                        "(declare them there, with why):\n  ${found}")
endif()
bad_includes(${SRC}/tests/layers/cli_bad probe)
if(NOT probe STREQUAL "bench_bad.c: ops/ops.h")
    message(FATAL_ERROR "the include check missed the probe's bad include; it found: '${probe}'")
endif()
message(STATUS "src/cli reaches the library through vkgpt/ and cli/internal.h only")
