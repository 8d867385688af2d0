# Turns a text file into a C string at build time, so that a page or script can live in its
# own readable file (with its own syntax highlighting and linting) and still ship inside the
# program. Run as a script:
#
#   cmake -DIN=page.html -DOUT=page_html.c -DNAME=cli_viz_html -P embed.cmake
#
# writes `const char NAME[]` (the bytes, then a NUL) and `const size_t NAME_len` (the bytes,
# without the NUL). Bytes are written as hex numbers: any content is safe, whatever its quotes,
# backslashes or line ends.
if(NOT IN OR NOT OUT OR NOT NAME)
  message(FATAL_ERROR "embed.cmake: give -DIN=file -DOUT=file.c -DNAME=identifier")
endif()
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" digits)
math(EXPR bytes "${digits} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
# 16 bytes (80 characters) a line
string(REGEX REPLACE "((0x..,){16})" "\\1\n    " body "${body}")
file(WRITE "${OUT}.tmp"
  "/* Generated from ${IN} by tools/embed.cmake; do not edit. */\n"
  "#include <stddef.h>\n\n"
  "extern const char ${NAME}[];\n"
  "extern const size_t ${NAME}_len;\n"
  "const char ${NAME}[] = {\n    ${body}0x00\n};\n"
  "const size_t ${NAME}_len = ${bytes};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
