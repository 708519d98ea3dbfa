# An installed vkgpt is usable: `cmake --install BUILD --prefix WORK/prefix` puts the tool, the
# library, the public headers, the pkg-config file and the CMake package there, the tool runs,
# and examples/train_tiny.c builds against that prefix alone, once with find_package (examples/
# configured on its own) and once with the flags pkg-config gives.
#   cmake -DBUILD=build -DSRC=. -DWORK=scratch -DCC=cc -P tests/install_check.cmake
set(prefix ${WORK}/prefix)
file(REMOVE_RECURSE ${WORK})

function(run what)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
    endif()
    set(run_out "${out}" PARENT_SCOPE)
endfunction()

run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})
file(GLOB_RECURSE pcs ${prefix}/*/vkgpt.pc)
file(GLOB_RECURSE configs ${prefix}/*/vkgptConfig.cmake)
file(GLOB_RECURSE archives ${prefix}/*/libvkgpt.a)
foreach(f bin/vkgpt include/vkgpt/train.h include/vkgpt/status.h include/vkgpt/comm.h)
    if(NOT EXISTS ${prefix}/${f})
        message(FATAL_ERROR "cmake --install put no ${f} in the prefix")
    endif()
endforeach()
foreach(v pcs configs archives)
    list(LENGTH ${v} n)
    if(NOT n EQUAL 1)
        message(FATAL_ERROR "cmake --install put ${n} of ${v} in the prefix (expected 1): ${${v}}")
    endif()
endforeach()
run("the installed vkgpt --version" ${prefix}/bin/vkgpt --version)
message(STATUS "installed: ${run_out}")

# find_package(vkgpt), from examples/ configured on its own
run("configuring examples/ against the prefix" ${CMAKE_COMMAND} -S ${SRC}/examples
    -B ${WORK}/examples -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_C_COMPILER=${CC})
run("building examples/ against the prefix" ${CMAKE_COMMAND} --build ${WORK}/examples)
if(NOT EXISTS ${WORK}/examples/train_tiny)
    message(FATAL_ERROR "examples/ built against the prefix made no train_tiny")
endif()

# pkg-config
get_filename_component(pcdir ${pcs} DIRECTORY)
run("pkg-config --cflags --libs vkgpt" ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${pcdir}
    pkg-config --cflags --libs vkgpt)
string(STRIP "${run_out}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run("cc examples/train_tiny.c with pkg-config's flags" ${CC} -std=c11 ${SRC}/examples/train_tiny.c
    -o ${WORK}/train_tiny_pc ${flags})
message(STATUS "examples/train_tiny.c built against ${prefix} (find_package and pkg-config)")
