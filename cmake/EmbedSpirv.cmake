# cmake -DIN=x.spv -DOUT=x.spv.c -DNAME=x -P EmbedSpirv.cmake
# Writes the SPIR-V words of IN as `const uint32_t vkg_spv_<NAME>[]` (little-endian words).
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" nhex)
math(EXPR rem "${nhex} % 8")
if(NOT rem EQUAL 0 OR nhex EQUAL 0)
    message(FATAL_ERROR "${IN}: size is not a whole number of 32-bit words")
endif()
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," words "${hex}")
string(REGEX REPLACE "((0x[0-9a-f]+u,){8})" "\\1\n    " words "${words}")
math(EXPR nwords "${nhex} / 8")
file(WRITE "${OUT}" "/* Generated from ${NAME}.comp by cmake/EmbedSpirv.cmake. Do not edit. */\n"
    "#include <stddef.h>\n#include <stdint.h>\n"
    "const uint32_t vkg_spv_${NAME}[${nwords}] = {\n    ${words}\n};\n"
    "const size_t vkg_spv_${NAME}_words = ${nwords};\n")
