# Script mode: install BUILD_DIR into WORK/prefix, then, against the installed files only:
#  1. configure, build and run the consumer with find_package(sqllock COMPONENTS sqlite), no C++
#     standard of its own (the package brings C++20);
#  2. ask for a component that does not exist: configuring must fail and say why;
#  3. compile and link the same program with one line of pkg-config, and run it.
file(REMOVE_RECURSE "${WORK}")
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
step(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK}/prefix")
step(${CMAKE_COMMAND} -S "${SOURCE}" -B "${WORK}/build" -G "${GENERATOR}" "-DCMAKE_PREFIX_PATH=${WORK}/prefix")
step(${CMAKE_COMMAND} --build "${WORK}/build")
step("${WORK}/build/consumer")

execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE}" -B "${WORK}/build-missing" -G "${GENERATOR}"
                        "-DCMAKE_PREFIX_PATH=${WORK}/prefix" "-DSQLLOCK_CONSUMER_COMPONENTS=sqlite;oracle"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "unknown component 'oracle'")
  message(FATAL_ERROR "COMPONENTS oracle: expected a failure naming it, got (${rc}):\n${out}\n${err}")
endif()

file(GLOB_RECURSE pc_files "${WORK}/prefix/*/sqllock.pc")
if(NOT pc_files)
  message(FATAL_ERROR "no sqllock.pc installed under ${WORK}/prefix")
endif()
list(GET pc_files 0 pc_file)
get_filename_component(pc_dir "${pc_file}" DIRECTORY)
execute_process(COMMAND ${CMAKE_COMMAND} -E env "PKG_CONFIG_PATH=${pc_dir}" pkg-config --cflags --libs sqllock
                RESULT_VARIABLE rc OUTPUT_VARIABLE flags ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs sqllock failed: ${err}")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
step(c++ "${SOURCE}/main.cpp" -o "${WORK}/consumer-pc" ${flags})
step("${WORK}/consumer-pc")
