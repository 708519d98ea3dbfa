# ctest os_headers: outside the platform layer (src/os) no source of src/ or transport/ includes a
# system header that is not C11's; the libraries the project is built on (Vulkan and volk, ZeroMQ,
# libsodium, utf8proc, PCRE2, a CBLAS) are allowed by name. Nor does any source of src/, transport/ or
# include/ outside src/os test which system it is built for (_WIN32, __linux__, __APPLE__): a
# difference between systems is a function of src/os. The same check run on tests/layers/os_bad must find that folder's one bad include, so
# a check that finds nothing is not a check that cannot find anything.
# Run with -DSRC=source dir.
cmake_minimum_required(VERSION 3.20)
set(c11 assert complex ctype errno fenv float inttypes iso646 limits locale math setjmp signal
        stdalign stdarg stdatomic stdbool stddef stdint stdio stdlib stdnoreturn string tgmath
        threads time uchar wchar wctype)
set(libraries volk.h zmq.h sodium.h utf8proc.h pcre2.h cblas.h)
function(system_includes root dirs out)
    set(bad "")
    foreach(d ${dirs})
        file(GLOB_RECURSE files RELATIVE ${root} ${root}/${d}/*.c ${root}/${d}/*.h)
        foreach(f ${files})
            if(f MATCHES "^src/os/")
                continue()
            endif()
            file(STRINGS ${root}/${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*<")
            foreach(l ${lines})
                string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*<([^>]+)>.*" "\\1" inc "${l}")
                string(REGEX REPLACE "\\.h$" "" base "${inc}")
                if(base IN_LIST c11 OR inc IN_LIST libraries OR inc MATCHES "^vulkan/")
                    continue()
                endif()
                list(APPEND bad "${f}: <${inc}>")
            endforeach()
        endforeach()
    endforeach()
    set(${out} "${bad}" PARENT_SCOPE)
endfunction()

system_includes(${SRC} "src;transport" found)
if(found)
    string(REPLACE ";" "\n  " found "${found}")
    message(FATAL_ERROR "system headers outside the platform layer (src/os; give it a function "
                        "there):\n  ${found}")
endif()
system_includes(${SRC}/tests/layers "os_bad" probe)
if(NOT probe STREQUAL "os_bad/bad.c: <unistd.h>")
    message(FATAL_ERROR "the header check missed the probe's bad include; it found: '${probe}'")
endif()

# Platform macros: any line naming one, outside src/os.
function(system_macros root dirs out)
    set(bad "")
    foreach(d ${dirs})
        file(GLOB_RECURSE files RELATIVE ${root} ${root}/${d}/*.c ${root}/${d}/*.h)
        foreach(f ${files})
            if(f MATCHES "^src/os/")
                continue()
            endif()
            file(STRINGS ${root}/${f} lines REGEX "_WIN32|__linux|__APPLE__")
            foreach(l ${lines})
                string(STRIP "${l}" l)
                list(APPEND bad "${f}: ${l}")
            endforeach()
        endforeach()
    endforeach()
    set(${out} "${bad}" PARENT_SCOPE)
endfunction()

system_macros(${SRC} "src;transport;include" found)
if(found)
    string(REPLACE ";" "\n  " found "${found}")
    message(FATAL_ERROR "platform tests outside the platform layer (src/os; give it a function "
                        "there):\n  ${found}")
endif()
system_macros(${SRC}/tests/layers "os_bad" probe)
if(NOT probe STREQUAL "os_bad/bad.c: #if defined(_WIN32)")
    message(FATAL_ERROR "the platform check missed the probe's #if; it found: '${probe}'")
endif()
message(STATUS "outside src/os only C11's headers and the named libraries', and no platform #if")
