# `make install` / `cmake --install build/release [--prefix P]` (DESTDIR honoured): the binary in
# <prefix>/bin and what it reads at run time in <prefix>/share/llmtrain, where it looks next to its own
# directory: the GPT-2 tokenizer (data/tokenizer/tokenizer_load.cpp), the presets and the throughput table
# (server/estimate/throughput.cpp, serve --presets-dir), and the built dashboard when web/dist exists
# (server/routes/web_assets.cpp). The container image uses the same layout (deploy/Containerfile).
include(GNUInstallDirs)
install(TARGETS llmtrain RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The tokenizer is fetched by scripts/setup.d/10-tokenizer.sh, not committed: say so when it is missing.
install(CODE "
  if(NOT EXISTS \"${PROJECT_SOURCE_DIR}/data/tokenizers/gpt2.tiktoken\")
    message(FATAL_ERROR \"data/tokenizers/gpt2.tiktoken is missing: \"
      \"run scripts/setup.sh (setup.d/10-tokenizer.sh) first\")
  endif()
")
install(FILES ${PROJECT_SOURCE_DIR}/data/tokenizers/gpt2.tiktoken
        DESTINATION ${CMAKE_INSTALL_DATADIR}/llmtrain/tokenizers)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/llmtrain/configs)
# web/dist is built by scripts/setup.d/50-web.sh (npm), possibly after configuring: checked at install time.
install(CODE "
  if(EXISTS \"${PROJECT_SOURCE_DIR}/web/dist/index.html\")
    file(INSTALL \"${PROJECT_SOURCE_DIR}/web/dist/\"
         DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/llmtrain/web\")
  else()
    message(STATUS \"web/dist is not built (scripts/setup.sh builds it): serve will answer 503 at / until --web-dir\")
  endif()
")
