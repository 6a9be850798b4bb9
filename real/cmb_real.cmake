# cmb_real.cmake - shared set-up of the real allocators' plug-ins
# (docs/real.md). Included by real/CMakeLists.txt and by a plug-in's own
# CMakeLists.txt when it is configured alone (the GPU script builds
# real/torch and real/cupy that way, against the machine's PyTorch and CuPy).
#
# Every plug-in lands in CMB_REAL_OUT (default <build>/real), where the
# cumembench binary of the same build directory looks for it.

get_filename_component(CMB_REAL_SRC ${CMAKE_CURRENT_LIST_DIR} ABSOLUTE)
get_filename_component(CMB_REAL_ROOT ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)
if(NOT CMB_REAL_OUT)
  set(CMB_REAL_OUT ${CMAKE_BINARY_DIR}/real)
endif()

# The python3 whose packages the plug-ins use: the one on PATH (as users run
# it), or -DCMB_REAL_PYTHON=/path/python3.
if(NOT CMB_REAL_PYTHON)
  find_program(_cmb_python3 NAMES python3 NO_CACHE)
  # the interpreter itself, not a launcher (pyenv's shims are shell scripts):
  # the CuPy plug-in embeds it and takes its paths from it
  if(_cmb_python3)
    execute_process(COMMAND ${_cmb_python3} -c "import sys; print(sys.executable)"
      OUTPUT_VARIABLE CMB_REAL_PYTHON ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE TIMEOUT 60)
  endif()
endif()

# cmb_real_plugin(TARGET SOURCES...): a MODULE library named lib<TARGET>.so
# in CMB_REAL_OUT that exports only its entry points and has no undefined
# symbol left (everything it needs is linked), so a missing library shows
# when it is built, not when it is loaded.
function(cmb_real_plugin target)
  add_library(${target} MODULE ${ARGN})
  target_include_directories(${target} PRIVATE ${CMB_REAL_ROOT}/allocators ${CMB_REAL_SRC})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${CMB_REAL_OUT})
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
endfunction()
