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
# Hugging Face tokenizer.json on small files: BPE, byte fallback, added tokens, the refusals.
if(VKG_BUILD_TESTS)
    vkg_add_test(test_hftok LABEL unit SOURCES ${PROJECT_SOURCE_DIR}/tests/test_hftok.c
                 LIBS vkg_data)
endif()
# Hugging Face tokenizer.json (src/data/hftok.c, hfenc.c) against `tokenizers` itself
# (tests/hf/hftok_check.py, in the virtual environment tests/CMakeLists.txt's hfmodel_hf uses,
# whose transformers brings tokenizers): GPT-2's own vocabulary as a tokenizer.json and
# tokenizers trained there in the layouts of Llama 3, Qwen 2 and Llama 2 (SentencePiece-style
# BPE with byte fallback), every id equal over a megabyte of mixed text each, decoding round
# trips. Fails, not skips, without the environment. Not in a Windows build (no Python there).
set(VKG_HF_PYTHON "$ENV{HOME}/.cache/vkgpt/hf-venv/bin/python" CACHE FILEPATH
    "Python with torch and transformers for the hfmodel_hf test")
if(VKG_BUILD_TESTS AND NOT WIN32)
    add_executable(hftok_tool ${PROJECT_SOURCE_DIR}/tests/hf/hftok_tool.c)
    target_link_libraries(hftok_tool PRIVATE vkg_data)
    vkg_whole_tree(hftok_tool)
    add_test(NAME hftok_hf
             COMMAND ${VKG_HF_PYTHON} ${PROJECT_SOURCE_DIR}/tests/hf/hftok_check.py
                     $<TARGET_FILE:hftok_tool> ${PROJECT_SOURCE_DIR}/data/gpt2
                     ${CMAKE_CURRENT_BINARY_DIR}/hftok_hf)
    set_tests_properties(hftok_hf PROPERTIES LABELS unit TIMEOUT 180)
endif()
