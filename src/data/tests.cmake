# Tests of src/io and src/data (file formats, data loading, tokenizers), included from
# src/CMakeLists.txt. The GPT-2 tokenizer test reads OpenAI's vocabulary and llm.c-independent
# expected encodings from ../shared/data beside the source tree; it fails (not skips) without them.
if(VKG_BUILD_TESTS)
    vkg_add_test(test_io LABEL unit SOURCES ${PROJECT_SOURCE_DIR}/tests/test_io.c LIBS vkg_core)
endif()
