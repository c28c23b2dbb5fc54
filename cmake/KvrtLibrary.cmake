# kvrt_library(<name> SOURCES <files...> DEPS <targets...> [CAF])
#
# One static library of kvrt code, with the targets it may use. The layering
# of docs/architecture.md is written here and nowhere else: every
# kvrt_library records its folder and its kvrt dependencies, and
#   - a library declared without CAF that reaches CAF through its
#     dependencies fails the configure step (an owner core never links CAF);
#   - `ctest -R layers.includes` checks that every #include "<folder>/..." of
#     a library's sources names its own folder or one of a dependency's
#     (scripts/check_layers.py over build/layers.txt), so a core cannot use
#     another owner's core unless its DEPS say so;
#   - the unit tests of an owner link only that owner's library (tests/), so
#     a hidden dependency is also an undefined symbol there.
set_property(GLOBAL PROPERTY KVRT_LAYERS "")

function(kvrt_library name)
  cmake_parse_arguments(K "CAF" "FOLDER" "SOURCES;DEPS" ${ARGN})
  if(NOT K_FOLDER)
    file(RELATIVE_PATH K_FOLDER ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  if(K_SOURCES)
    add_library(${name} STATIC ${K_SOURCES})
    target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} PUBLIC ${K_DEPS})
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} INTERFACE ${K_DEPS})
  endif()
  set_property(TARGET ${name} PROPERTY KVRT_FOLDER ${K_FOLDER})
  set_property(TARGET ${name} PROPERTY KVRT_USES_CAF ${K_CAF})
  set(kvrt_deps "")
  foreach(dep ${K_DEPS})
    if(dep MATCHES "^kvrt_")
      list(APPEND kvrt_deps ${dep})
    endif()
  endforeach()
  string(REPLACE ";" "," kvrt_deps_csv "${kvrt_deps}")
  set(sources_csv "")
  foreach(s ${K_SOURCES})
    get_filename_component(abs ${s} ABSOLUTE)
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${abs})
    list(APPEND sources_csv ${rel})
  endforeach()
  string(REPLACE ";" "," sources_csv "${sources_csv}")
  set_property(GLOBAL APPEND PROPERTY KVRT_LAYERS "${name} ${K_FOLDER} ${K_CAF} deps=${kvrt_deps_csv} sources=${sources_csv}")
endfunction()

# The targets whose usage requirements (headers, compile flags) `target`
# compiles with: its own link libraries, then what each of them passes on
# (a dependency's PRIVATE links, such as the client's CAF, stay inside it).
function(kvrt_reached target out)
  set(seen "")
  get_target_property(pending ${target} LINK_LIBRARIES)
  if(NOT pending)
    set(pending "")
  endif()
  while(pending)
    list(POP_FRONT pending t)
    if(t MATCHES "^\\$<LINK_ONLY:" OR t IN_LIST seen OR NOT TARGET ${t})
      continue()
    endif()
    list(APPEND seen ${t})
    get_target_property(links ${t} INTERFACE_LINK_LIBRARIES)
    if(links)
      list(APPEND pending ${links})
    endif()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# Checks what kvrt_library can check at configure time and writes
# build/layers.txt for scripts/check_layers.py.
function(kvrt_check_layers)
  get_property(layers GLOBAL PROPERTY KVRT_LAYERS)
  set(text "")
  foreach(line ${layers})
    string(REPLACE " " ";" fields "${line}")
    list(GET fields 0 name)
    get_target_property(caf ${name} KVRT_USES_CAF)
    if(NOT caf)
      kvrt_reached(${name} reached)
      foreach(t ${reached})
        if(t MATCHES "^CAF::")
          message(FATAL_ERROR "${name} is a CAF-free library but reaches ${t}: check its DEPS")
        endif()
      endforeach()
    endif()
    string(APPEND text "${line}\n")
  endforeach()
  file(WRITE ${CMAKE_BINARY_DIR}/layers.txt "${text}")
endfunction()
