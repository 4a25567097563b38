# cmake -DSPV=in.spv -DCPP=out.cpp -DNAME=name -P SpvToCpp.cmake: SPIR-V words as a C++ array.
file(READ ${SPV} hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR words "${hex_len} / 8")
# SPIR-V is a little-endian word stream; rebuild each word from its four bytes.
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," body "${hex}")
string(REGEX REPLACE "((0x[0-9a-f]+u,){8})" "\\1\n" body "${body}")
file(WRITE ${CPP} "#include <cstddef>\n#include <cstdint>\nnamespace kvc::vk {\nextern const uint32_t spv_${NAME}[] = {\n${body}\n};\nextern const size_t spv_${NAME}_words = ${words};\n}\n")
