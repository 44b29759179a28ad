# Third-party libraries, all from Debian 12 packages (scripts/setup.sh installs them).
# docs/architecture.md has one line per dependency saying why.
find_package(Threads REQUIRED)
if(NOT LLMTRAIN_FUZZ)
  find_package(OpenMP REQUIRED COMPONENTS CXX)  # clang's OpenMP runtime is not installed; fuzz builds skip it
endif()
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(fmt REQUIRED)
if(LLMTRAIN_TESTS)
  find_package(GTest REQUIRED)
endif()
# Gloo (libgloo-dev) ships a CMake config exporting the imported target `gloo` (libgloo.so links its
# own hiredis/ibverbs); the dist layer adds Threads for its communication thread.
if(NOT LLMTRAIN_FUZZ)
  find_package(Gloo CONFIG REQUIRED)
endif()
# yaml-cpp 0.7's exported target is `yaml-cpp` (no namespace); newer ones add yaml-cpp::yaml-cpp.
if(TARGET yaml-cpp::yaml-cpp)
  set(LLMT_YAML_TARGET yaml-cpp::yaml-cpp)
else()
  set(LLMT_YAML_TARGET yaml-cpp)
endif()
# Control plane (src/server): HTTP/1.1 via cpp-httplib (Debian builds it as a shared library with a
# pkg-config file whose Cflags carry the feature defines the ABI depends on) and the SQLite job store.
if(NOT LLMTRAIN_FUZZ)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
  # MLflow's REST API (src/tracking): HTTP(S) client via Debian's libcurl (libcurl4-openssl-dev).
  pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
  find_package(SQLite3 REQUIRED)
endif()
