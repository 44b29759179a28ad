// s3://bucket/key URIs: the form every config key and flag that names object storage takes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace llmt::storage {

struct S3Uri {
    std::string bucket;
    std::string key;  // no leading '/'; may be empty (the bucket) or end in '/' (a prefix)

    std::string str() const { return "s3://" + bucket + (key.empty() ? "" : "/" + key); }
    // This URI with `rel` appended after a '/' (none doubled).
    S3Uri join(std::string_view rel) const;
};

bool is_s3_uri(std::string_view s);
// Throws InputError naming `what` (the key or flag) when `s` is not s3://<bucket>[/<key>] with a bucket
// name of 3-63 characters of [a-z0-9.-] (S3's rule).
S3Uri parse_s3_uri(std::string_view s, std::string_view what);

}  // namespace llmt::storage
