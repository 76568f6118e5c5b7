# cmake -DIN=file -DOUT=file.cpp -DNAME=symbol -DNAMESPACE=ns -P embed_file.cmake
# Writes a C++ source defining `const unsigned char NAME[]` with the bytes of IN and
# `const std::size_t NAME##Size`.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" len)
math(EXPR size "${len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "// Generated from ${IN}: do not edit.\n#include <cstddef>\n\nnamespace ${NAMESPACE} {\n"
     "extern const unsigned char ${NAME}[];\nextern const std::size_t ${NAME}Size;\n"
     "alignas(8) const unsigned char ${NAME}[] = {\n${bytes}\n};\n"
     "const std::size_t ${NAME}Size = ${size};\n}\n")
