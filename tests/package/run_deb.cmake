# Script mode: `cpack -G DEB` in the shared build of package_shared (WORK/build, a fixture), then,
# without root: the .deb's Depends names the Debian driver packages; it carries the command, the
# library, the man page and the completions; `dpkg -x` into WORK/root, the extracted command runs
# and the consumer builds against the extracted files and runs. MAIN_CPACK_CONFIG (the configuring
# build's, with every backend it built) must list each backend's runtime package too.
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(step_out "${out}" PARENT_SCOPE)
endfunction()

# Every backend of the configuring build has its runtime package in Depends.
file(READ "${MAIN_CPACK_CONFIG}" main_config)
string(REGEX MATCH "CPACK_DEBIAN_PACKAGE_DEPENDS \"[^\"]*\"" main_depends "${main_config}")
string(REPLACE "," ";" EXPECT_DEPENDS "${EXPECT_DEPENDS}")
foreach(pkg ${EXPECT_DEPENDS})
  if(NOT main_depends MATCHES "[\" ]${pkg}[,\"]")
    message(FATAL_ERROR "${MAIN_CPACK_CONFIG}: ${pkg} missing from ${main_depends}")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK}/deb" "${WORK}/root" "${WORK}/consumer-deb" "${WORK}/deb-locks.db")
execute_process(COMMAND cpack -G DEB -B "${WORK}/deb" WORKING_DIRECTORY "${WORK}/build"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cpack -G DEB failed (${rc}):\n${out}\n${err}")
endif()
file(GLOB debs "${WORK}/deb/*.deb")
list(LENGTH debs n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected one .deb in ${WORK}/deb, found: ${debs}")
endif()
list(GET debs 0 deb)

step(dpkg-deb -f "${deb}" Depends)
string(STRIP "${step_out}" depends)
if(NOT depends MATCHES "(^| )libsqlite3-0(,|$)")
  message(FATAL_ERROR "${deb}: Depends '${depends}' lacks libsqlite3-0")
endif()
step(dpkg-deb -c "${deb}")
set(listing "${step_out}")
foreach(path "/usr/bin/sqllock" "/usr/share/man/man1/sqllock.1" "/usr/share/bash-completion/completions/sqllock"
             "/usr/share/zsh/vendor-completions/_sqllock" "/libsqllock.so.0" "/include/sqllock/export.hpp"
             "/sqllockConfig.cmake" "/sqllock.pc" "/usr/share/doc/sqllock/LICENSE")
  string(FIND "${listing}" "${path}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${deb} lacks ${path}:\n${listing}")
  endif()
endforeach()
if(listing MATCHES "\\.a\n")
  message(FATAL_ERROR "${deb} ships a static archive:\n${listing}")
endif()

step(dpkg -x "${deb}" "${WORK}/root")
set(cli "${WORK}/root/usr/bin/sqllock")
step(${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${cli}" -V)
step(${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${cli}" migrate --url "sqlite:${WORK}/deb-locks.db")
step(${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${cli}" run --url "sqlite:${WORK}/deb-locks.db" --name deb
     sh -c "echo fence=$SQLLOCK_FENCE")
if(NOT step_out MATCHES "fence=[1-9]")
  message(FATAL_ERROR "the extracted sqllock run printed: ${step_out}")
endif()
step(man --warnings=w -l "${WORK}/root/usr/share/man/man1/sqllock.1")

step(${CMAKE_COMMAND} -S "${CONSUMER}" -B "${WORK}/consumer-deb" -G "${GENERATOR}" "-DCMAKE_PREFIX_PATH=${WORK}/root/usr")
step(${CMAKE_COMMAND} --build "${WORK}/consumer-deb")
step("${WORK}/consumer-deb/consumer")
step(ldd "${WORK}/consumer-deb/consumer")
if(NOT step_out MATCHES "libsqllock\\.so\\.[0-9]+ => ${WORK}/root/usr/")
  message(FATAL_ERROR "the consumer does not use the extracted library:\n${step_out}")
endif()
message(STATUS "${deb}: Depends: ${depends}; extracted, command and consumer run")
