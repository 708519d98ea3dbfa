# Tests of the trainer's host-side modules in src/train (metrics log and SVG,
# checkpoints and state file, sampler), included from src/CMakeLists.txt. No device needed.
if(VKG_BUILD_TESTS)
    foreach(t metrics checkpoint sampler)
        vkg_add_test(test_${t} LABEL unit TIMEOUT 60
                     SOURCES ${PROJECT_SOURCE_DIR}/tests/test_${t}.c LIBS vkg_train)
    endforeach()
    vkg_add_test(test_schedule LABEL unit TIMEOUT 60
                 SOURCES ${PROJECT_SOURCE_DIR}/tests/test_schedule.c LIBS vkg_optim)
endif()
