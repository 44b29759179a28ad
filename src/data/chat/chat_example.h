// The worked example's chat data (docs/formats/chat_jsonl.md, "The example data"):
// question/answer conversations built from the default corpus (data/corpus, scripts/make_corpus.sh),
// deterministic for a seed, short and regular so that a tiny LLaMA can learn in minutes to answer in the
// expected shape and to stop at <|eot_id|> (to be measured once the trainer reads chat data):
//  - "Which book of the Bible is Ge1:3 from?" -> "Ge1:3 is from the book of Genesis." (66 books)
//  - "What is the first word of this verse? <verse>" -> "The first word is \"And\"." (a copy)
//  - "Tell me a fortune." (and variants) -> a short fortune from the fortune files
// Verses and fortunes are at most 160 characters, so every conversation fits 128 tokens (the tiny
// preset's block). A quarter carry a system message; a fifth are two-turn conversations (the first word of a verse,
// then its book), so the data exercises every assistant turn being a target.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace llmt::data {

struct ChatExampleOptions {
    std::filesystem::path corpus_dir;  // holds bible/NN_<Book>.txt and fortunes/*.txt
    std::size_t conversations = 3000;
    uint64_t seed = 0;
};

// The JSONL text, one {"messages": [...]} a line. Throws InputError when the corpus is missing or not
// the layout make_corpus.sh writes (naming the directory or file).
std::string make_chat_example(const ChatExampleOptions& opts);

}  // namespace llmt::data
