# llmt_add_library(name SOURCES ... DEPS ...): one static library per layer, explicit source lists.
function(llmt_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${A_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${LLMT_WARNINGS}>)
  target_link_libraries(${name} PUBLIC ${A_DEPS})
endfunction()

# llmt_add_test(name LABEL unit|reference|integration|gpu|image SOURCES ... DEPS ... [TIMEOUT s])
# One gtest binary; every TEST is registered with ctest and carries the label.
include(GoogleTest)
function(llmt_add_test name)
  cmake_parse_arguments(A "" "LABEL;TIMEOUT;LOCK" "SOURCES;DEPS" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  add_executable(${name} ${A_SOURCES})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${LLMT_WARNINGS}>)
  target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gtest GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(${name} PRIVATE
    LLMT_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    LLMT_BINARY_DIR="${PROJECT_BINARY_DIR}"
    LLMT_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared")
  # LOCK: a ctest resource lock (tests holding the same one never run at the same time).
  set(lock)
  if(A_LOCK)
    set(lock RESOURCE_LOCK ${A_LOCK})
  endif()
  gtest_discover_tests(${name}
    PROPERTIES LABELS ${A_LABEL} TIMEOUT ${A_TIMEOUT} ${lock}
    ENVIRONMENT "LLMTRAIN_BIN=$<TARGET_FILE:llmtrain>"
    DISCOVERY_TIMEOUT 60)
endfunction()
