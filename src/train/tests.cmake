# Tests of the trainer's host-side modules in src/train (metrics log and SVG,
# checkpoints and state file, sampler), included from src/CMakeLists.txt. No device needed.
if(VKG_BUILD_TESTS)
    foreach(t metrics sampler)
        vkg_add_test(test_${t} LABEL unit TIMEOUT 60
                     SOURCES ${PROJECT_SOURCE_DIR}/tests/test_${t}.c LIBS vkg_train)
    endforeach()
    # Checkpoint files, writing and pruning (test_checkpoint); resuming past damage and the
    # folder's lock (test_checkpoint_resume); every model family's checkpoints
    # (test_checkpoint_family); one fixture (tests/ckpt_fixture.c).
    foreach(t checkpoint checkpoint_resume checkpoint_family)
        vkg_add_test(test_${t} LABEL unit TIMEOUT 60
                     SOURCES ${PROJECT_SOURCE_DIR}/tests/test_${t}.c
                             ${PROJECT_SOURCE_DIR}/tests/ckpt_fixture.c
                     LIBS vkg_train)
    endforeach()
    vkg_add_test(test_schedule LABEL unit TIMEOUT 60
                 SOURCES ${PROJECT_SOURCE_DIR}/tests/test_schedule.c LIBS vkg_optim)
endif()
