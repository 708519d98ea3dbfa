# Tests of src/io and src/data (file formats, data loading, tokenizers), included from
# src/CMakeLists.txt. The GPT-2 tokenizer test reads OpenAI's vocabulary files from data/gpt2 and
# the expected encodings from tests/data; it fails (not skips) without them.
if(VKG_BUILD_TESTS)
    vkg_add_test(test_io LABEL unit SOURCES ${PROJECT_SOURCE_DIR}/tests/test_io.c LIBS vkg_data)
    # Hugging Face's config.json: the published files of six models, every preset written and
    # read back, each refusal named.
    vkg_add_test(test_hfconfig LABEL unit SOURCES ${PROJECT_SOURCE_DIR}/tests/test_hfconfig.c
                 LIBS vkg_data)
    vkg_add_test(test_data LABEL unit LIBS vkg_data
                 SOURCES ${PROJECT_SOURCE_DIR}/tests/test_data.c
                         ${PROJECT_SOURCE_DIR}/src/cli/cmd_prepare.c
                         ${PROJECT_SOURCE_DIR}/src/cli/flags.c
                         ${PROJECT_SOURCE_DIR}/src/cli/paths.c)
    # `vkgpt prepare`'s validation split, per input file (the subcommand linked in).
    vkg_add_test(test_prepare LABEL unit LIBS vkg_data
                 SOURCES ${PROJECT_SOURCE_DIR}/tests/test_prepare.c
                         ${PROJECT_SOURCE_DIR}/src/cli/cmd_prepare.c
                         ${PROJECT_SOURCE_DIR}/src/cli/flags.c
                         ${PROJECT_SOURCE_DIR}/src/cli/paths.c)
    vkg_add_test(test_tokenizer LABEL unit
                 SOURCES ${PROJECT_SOURCE_DIR}/tests/test_tokenizer.c LIBS vkg_data)
    target_compile_definitions(test_tokenizer PRIVATE
                               VKG_MODEL_DIR="${PROJECT_SOURCE_DIR}/data/gpt2"
                               VKG_TEST_DATA="${PROJECT_SOURCE_DIR}/tests/data")
endif()
