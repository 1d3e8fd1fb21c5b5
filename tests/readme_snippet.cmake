# Fails unless README.md's block marked `<!-- snippet:NAME -->` is exactly the code that a test
# compiles (a README example that does not build is a bug): the whole of SOURCE, or, when SOURCE holds the lines
# `// --- snippet begin ...` and `// --- snippet end ...`, the lines between them with their
# common two-space indent removed.
file(READ ${README} readme)
file(READ ${SOURCE} source)
set(open "<!-- snippet:${NAME} -->\n```cpp\n")
string(FIND "${readme}" "${open}" begin)
if(begin EQUAL -1)
  message(FATAL_ERROR "README.md has no block marked <!-- snippet:${NAME} -->")
endif()
string(LENGTH "${open}" open_length)
math(EXPR begin "${begin} + ${open_length}")
string(SUBSTRING "${readme}" ${begin} -1 rest)
string(FIND "${rest}" "```\n" end)
string(SUBSTRING "${rest}" 0 ${end} block)

string(FIND "${source}" "// --- snippet begin" snippet_begin)
if(NOT snippet_begin EQUAL -1)
  string(SUBSTRING "${source}" ${snippet_begin} -1 source)
  string(FIND "${source}" "\n" first_newline)
  math(EXPR first_newline "${first_newline} + 1")
  string(SUBSTRING "${source}" ${first_newline} -1 source)
  string(FIND "${source}" "// --- snippet end" snippet_end)
  string(SUBSTRING "${source}" 0 ${snippet_end} source)
  string(REGEX REPLACE "[ ]+$" "" source "${source}")           # indent of the end marker
  string(REGEX REPLACE "(^|\n)  " "\\1" source "${source}")     # common two-space indent
endif()
if(NOT block STREQUAL source)
  message(FATAL_ERROR "README.md snippet '${NAME}' differs from ${SOURCE}:\n--- README\n${block}--- source\n${source}")
endif()
message(STATUS "README snippet '${NAME}' == ${SOURCE}")
