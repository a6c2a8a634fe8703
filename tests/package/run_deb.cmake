# Script mode: `cpack -G DEB` in the shared build of package_shared (WORK/build, a fixture, built
# with every backend of the configuring build), then: the .deb's Depends names the Debian driver
# package of each backend (EXPECT_DEPENDS); it carries the command, the library, the man page and
# the completions; `dpkg -i` installs it into a scratch root (WORK/root, its own dpkg database,
# seeded with the host's records of the Depends packages, so dpkg checks them for real; an empty
# database must refuse it); the installed command names every backend (-V) and runs, and the
# consumer builds against the installed files and runs. MAIN_CPACK_CONFIG (the configuring build's)
# must list each backend's runtime package too.
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
string(REPLACE "," ";" EXPECT_BACKENDS "${EXPECT_BACKENDS}")
foreach(pkg ${EXPECT_DEPENDS})
  if(NOT main_depends MATCHES "[\" ]${pkg}[,\"]")
    message(FATAL_ERROR "${MAIN_CPACK_CONFIG}: ${pkg} missing from ${main_depends}")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK}/deb" "${WORK}/root" "${WORK}/root-empty" "${WORK}/consumer-deb" "${WORK}/deb-locks.db")
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
foreach(pkg ${EXPECT_DEPENDS})
  if(NOT depends MATCHES "(^| )${pkg}( |,|$)")
    message(FATAL_ERROR "${deb}: Depends '${depends}' lacks ${pkg}")
  endif()
endforeach()
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

# A scratch root with a dpkg database of its own. --force-not-root: dpkg's own check (no file
# outside the root is touched); --force-bad-path: ldconfig may not be on a user's PATH.
function(scratch_root root)
  file(MAKE_DIRECTORY "${root}/var/lib/dpkg/info" "${root}/var/lib/dpkg/updates" "${root}/var/lib/dpkg/triggers")
  file(WRITE "${root}/var/lib/dpkg/available" "")
  file(WRITE "${root}/var/lib/dpkg/status" "${ARGN}")
endfunction()
set(dpkg_root_flags --force-not-root --force-bad-path --log=/dev/null)
# An empty database: dpkg must refuse the package for its Depends.
scratch_root("${WORK}/root-empty" "")
execute_process(COMMAND dpkg --root=${WORK}/root-empty ${dpkg_root_flags} -i "${deb}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "dependency problems")
  message(FATAL_ERROR "dpkg -i into a root without the driver packages did not refuse (${rc}):\n${out}\n${err}")
endif()
# The host's records of the packages the .deb depends on (they are installed: they built it).
string(REGEX REPLACE "\\([^)]*\\)" "" dep_names "${depends}")
string(REGEX REPLACE "[ \t]" "" dep_names "${dep_names}")
string(REPLACE "," ";" dep_names "${dep_names}")
set(status "")
foreach(pkg ${dep_names})
  string(REGEX REPLACE "\\|.*" "" pkg "${pkg}")  # first of alternatives
  step(dpkg-query -s "${pkg}")
  string(STRIP "${step_out}" stanza)
  string(APPEND status "${stanza}\n\n")
endforeach()
scratch_root("${WORK}/root" "${status}")
step(dpkg --root=${WORK}/root ${dpkg_root_flags} -i "${deb}")
step(dpkg-query --admindir=${WORK}/root/var/lib/dpkg -W "-f=\${Status}" sqllock)
if(NOT step_out STREQUAL "install ok installed")
  message(FATAL_ERROR "sqllock in the scratch root: '${step_out}'")
endif()
set(cli "${WORK}/root/usr/bin/sqllock")
step(${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${cli}" -V)
foreach(backend ${EXPECT_BACKENDS})
  if(NOT step_out MATCHES "${backend}")
    message(FATAL_ERROR "the installed sqllock lacks the ${backend} backend: ${step_out}")
  endif()
endforeach()
step(${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${cli}" migrate --url "sqlite:${WORK}/deb-locks.db")
step(${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${cli}" run --url "sqlite:${WORK}/deb-locks.db" --name deb
     sh -c "echo fence=$SQLLOCK_FENCE")
if(NOT step_out MATCHES "fence=[1-9]")
  message(FATAL_ERROR "the installed sqllock run printed: ${step_out}")
endif()
step(man --warnings=w -l "${WORK}/root/usr/share/man/man1/sqllock.1")

step(${CMAKE_COMMAND} -S "${CONSUMER}" -B "${WORK}/consumer-deb" -G "${GENERATOR}" "-DCMAKE_PREFIX_PATH=${WORK}/root/usr")
step(${CMAKE_COMMAND} --build "${WORK}/consumer-deb")
step("${WORK}/consumer-deb/consumer")
step(ldd "${WORK}/consumer-deb/consumer")
if(NOT step_out MATCHES "libsqllock\\.so\\.[0-9]+ => ${WORK}/root/usr/")
  message(FATAL_ERROR "the consumer does not use the installed library:\n${step_out}")
endif()
message(STATUS "${deb}: Depends: ${depends}; installed with dpkg -i into ${WORK}/root, command and consumer run")
