# What each quick start installs: `sh quickstart.sh train` asks scripts/install-deps.sh for what
# building and training need and nothing of the test suite's (cmocka, the validation layer,
# OpenBLAS, clang-format, clang), `sh quickstart.sh test` for both; install-deps.sh --list says
# the same. Nothing is installed: VKGPT_DEPS_LIST=1 makes install-deps.sh print its packages, and
# a stand-in `make` on the PATH records what quickstart.sh would build.
#   cmake -DSRC=. -DWORK=scratch -P tests/deps_check.cmake
cmake_minimum_required(VERSION 3.20)
set(train_pkgs build-essential cmake pkg-config libvulkan-dev libvulkan-volk-dev libvulkan1
    glslang-tools spirv-tools libzmq3-dev libsodium-dev libutf8proc-dev libpcre2-dev fortune-mod
    fortunes mesa-vulkan-drivers)
set(test_pkgs libcmocka-dev vulkan-validationlayers libopenblas-dev clang-format clang
    libclang-rt-14-dev python3-pip python3-venv python3-torch)

file(REMOVE_RECURSE ${WORK})
file(WRITE ${WORK}/stub/make "#!/bin/sh\necho \"make called: $*\"\n")
file(CHMOD ${WORK}/stub/make PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)

# The packages a command prints on its "install-deps: packages:" line, as a list, in *out.
function(packages_of out)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "'${ARGN}' failed (${rc}):\n${text}\n${err}")
    endif()
    if(NOT text MATCHES "install-deps: packages: ([^\n]*)")
        message(FATAL_ERROR "'${ARGN}' listed no packages:\n${text}\n${err}")
    endif()
    string(REPLACE " " ";" pkgs "${CMAKE_MATCH_1}")
    set(${out} ${pkgs} PARENT_SCOPE)
    set(run_text "${text}" PARENT_SCOPE)
endfunction()

# The list named lv must hold every package of the list named wv and none of the list named uv.
function(expect what lv wv uv)
    foreach(p ${${wv}})
        if(NOT p IN_LIST ${lv})
            message(FATAL_ERROR "${what} does not install ${p} (it lists: ${${lv}})")
        endif()
    endforeach()
    foreach(p ${${uv}})
        if(p IN_LIST ${lv})
            message(FATAL_ERROR "${what} installs ${p}, which only the test suite needs")
        endif()
    endforeach()
    message(STATUS "${what}: ${${lv}}")
endfunction()

set(none)
set(all ${train_pkgs} ${test_pkgs})
packages_of(listed sh ${SRC}/scripts/install-deps.sh --list)
expect("install-deps.sh" listed train_pkgs test_pkgs)
packages_of(listed sh ${SRC}/scripts/install-deps.sh --list --test)
expect("install-deps.sh --test" listed all none)

set(env ${CMAKE_COMMAND} -E env VKGPT_DEPS_LIST=1 "PATH=${WORK}/stub:$ENV{PATH}")
packages_of(listed ${env} sh ${SRC}/quickstart.sh train)
expect("quickstart.sh train" listed train_pkgs test_pkgs)
if(NOT run_text MATCHES "make called: train")
    message(FATAL_ERROR "quickstart.sh train did not run make train:\n${run_text}")
endif()
packages_of(listed ${env} sh ${SRC}/quickstart.sh test)
expect("quickstart.sh test" listed all none)
