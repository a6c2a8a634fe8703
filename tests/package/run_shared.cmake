# Script mode: a shared build (BUILD_SHARED_LIBS=ON, SQLite and the backends WITH_POSTGRESQL and
# WITH_MYSQL say (those of the configuring build, so that package_deb's .deb carries them all), the
# command, no tests) of
# SOURCE_ROOT in WORK/build (kept between runs, so a rerun only rebuilds what changed), installed
# into WORK/prefix; then, against the installed files only:
#  1. libsqllock.so -> libsqllock.so.<major> (the SONAME) -> libsqllock.so.<version>, and no static
#     archive anywhere in the prefix;
#  2. the dynamic symbol table exports the public API and no sqllock::detail symbol;
#  3. the installed command runs without LD_LIBRARY_PATH (its RPATH finds the library), also
#     after the prefix is moved elsewhere;
#  4. the consumer builds with find_package(sqllock) and with pkg-config, and runs.
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(step_out "${out}" PARENT_SCOPE)
endfunction()
function(fail)
  message(FATAL_ERROR ${ARGN})
endfunction()

set(with_postgresql OFF)
set(with_mysql OFF)
if(WITH_POSTGRESQL)
  set(with_postgresql ON)
endif()
if(WITH_MYSQL)
  set(with_mysql ON)
endif()
# -O1: what is tested is the packaging, not the speed; with all three backends it compiles in less
# CPU time than the SQLite-only -O3 build did (78 s against 89 s of user time on the CI machine).
step(${CMAKE_COMMAND} -S "${SOURCE_ROOT}" -B "${WORK}/build" -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release
     "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG"
     -DCMAKE_INSTALL_PREFIX=/usr  # GNUInstallDirs: the Debian multiarch libdir, for the .deb of package_deb
     -DBUILD_SHARED_LIBS=ON -DSQLLOCK_WITH_SQLITE=ON -DSQLLOCK_WITH_POSTGRESQL=${with_postgresql}
     -DSQLLOCK_WITH_MYSQL=${with_mysql}
     -DSQLLOCK_BUILD_TESTS=OFF -DSQLLOCK_BUILD_EXAMPLES=OFF -DSQLLOCK_BUILD_CLI=ON -DSQLLOCK_INSTALL=ON)
step(${CMAKE_COMMAND} --build "${WORK}/build" --parallel 2)  # the machine is shared
file(REMOVE_RECURSE "${WORK}/prefix" "${WORK}/moved" "${WORK}/consumer" "${WORK}/consumer-pc" "${WORK}/locks.db")
step(${CMAKE_COMMAND} --install "${WORK}/build" --prefix "${WORK}/prefix")

# 1. The library's names, and nothing static.
file(GLOB_RECURSE archives "${WORK}/prefix/*.a")
if(archives)
  fail("static archives installed beside the shared library: ${archives}")
endif()
file(GLOB_RECURSE libs "${WORK}/prefix/*/libsqllock.so.*.*.*")
list(LENGTH libs n)
if(NOT n EQUAL 1)
  fail("expected one libsqllock.so.<version>, found: ${libs}")
endif()
list(GET libs 0 lib)
get_filename_component(libdir "${lib}" DIRECTORY)
get_filename_component(real "${lib}" NAME)
if(NOT real STREQUAL "libsqllock.so.${VERSION}")
  fail("the library is ${real}, expected libsqllock.so.${VERSION}")
endif()
string(REGEX MATCH "^[0-9]+" major "${VERSION}")
foreach(link libsqllock.so libsqllock.so.${major})
  if(NOT IS_SYMLINK "${libdir}/${link}")
    fail("${libdir}/${link} is not a symbolic link")
  endif()
endforeach()
step(readelf -d "${lib}")
if(NOT step_out MATCHES "SONAME\\)[^\n]*\\[libsqllock\\.so\\.${major}\\]")
  fail("SONAME is not libsqllock.so.${major}:\n${step_out}")
endif()

# 2. Exported symbols: the API yes, sqllock::detail no.
step(nm -D --defined-only -C "${lib}")
set(symbols "${step_out}")
foreach(api "sqllock::connect(" "sqllock::client::try_acquire(" "typeinfo for sqllock::error" "sqllock::parse_duration(")
  string(FIND "${symbols}" "${api}" at)
  if(at EQUAL -1)
    fail("the public API symbol ${api} is not exported by ${lib}")
  endif()
endforeach()
string(REGEX MATCHALL "[^\n]*sqllock::detail::[^\n]*" leaked "${symbols}")
if(leaked)
  list(LENGTH leaked n)
  list(JOIN leaked "\n" leaked)
  fail("${n} sqllock::detail symbols exported by ${lib}:\n${leaked}")
endif()
string(REGEX MATCHALL "\n[0-9a-f]+ [TWVBDRu] " exported "\n${symbols}")
list(LENGTH exported n_exported)
message(STATUS "${real}: ${n_exported} dynamic symbols, none in sqllock::detail")

# 3. The installed command, without LD_LIBRARY_PATH, in place and moved.
foreach(root prefix moved)
  if(root STREQUAL "moved")
    file(RENAME "${WORK}/prefix" "${WORK}/moved")
  endif()
  set(cli "${WORK}/${root}/bin/sqllock")
  step(${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${cli}" -V)
  if(NOT step_out MATCHES "sqllock ${VERSION} \\(backends: sqlite[ )]")
    fail("${cli} -V printed: ${step_out}")
  endif()
  step(${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${cli}" migrate --url "sqlite:${WORK}/locks.db")
  step(${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${cli}" run --url "sqlite:${WORK}/locks.db" --name shared
       sh -c "echo fence=$SQLLOCK_FENCE")
  if(NOT step_out MATCHES "fence=[1-9]")
    fail("sqllock run from ${root} printed: ${step_out}")
  endif()
  step(ldd "${cli}")
  if(NOT step_out MATCHES "libsqllock\\.so\\.${major} => ${WORK}/${root}/")
    fail("${cli} does not load the library of its own prefix:\n${step_out}")
  endif()
endforeach()
file(RENAME "${WORK}/moved" "${WORK}/prefix")

# 4. A consumer, with CMake and with pkg-config.
step(${CMAKE_COMMAND} -S "${CONSUMER}" -B "${WORK}/consumer" -G "${GENERATOR}" "-DCMAKE_PREFIX_PATH=${WORK}/prefix")
step(${CMAKE_COMMAND} --build "${WORK}/consumer")
step("${WORK}/consumer/consumer")
step(ldd "${WORK}/consumer/consumer")
if(NOT step_out MATCHES "libsqllock\\.so\\.${major} => ${WORK}/prefix/")
  fail("the consumer does not use the installed shared library:\n${step_out}")
endif()
file(GLOB_RECURSE pc_files "${WORK}/prefix/*/sqllock.pc")
list(GET pc_files 0 pc_file)
get_filename_component(pc_dir "${pc_file}" DIRECTORY)
execute_process(COMMAND ${CMAKE_COMMAND} -E env "PKG_CONFIG_PATH=${pc_dir}" pkg-config --cflags --libs sqllock
                RESULT_VARIABLE rc OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE)
separate_arguments(flags UNIX_COMMAND "${flags}")
step(c++ "${CONSUMER}/main.cpp" -o "${WORK}/consumer-pc" ${flags} "-Wl,-rpath,${libdir}")
step("${WORK}/consumer-pc")
message(STATUS "shared build: SONAME, RPATH, hidden detail symbols and consumers all fine")
