// Where an S3 client connects and as whom, read from the environment the AWS tools use:
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else the profile AWS_PROFILE (default
// "default") of AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials); AWS_REGION, AWS_DEFAULT_REGION,
// else the profile's region in AWS_CONFIG_FILE (default ~/.aws/config), else us-east-1; AWS_ENDPOINT_URL
// for a non-AWS store (path-style addressing), else AWS's regional endpoint (virtual-hosted style).
// docs/object_storage.md.
#pragma once

#include <string>

#include "storage/sigv4.h"

namespace llmt::storage {

struct S3Settings {
    std::string endpoint;     // "https://s3.us-east-1.amazonaws.com" or AWS_ENDPOINT_URL, no trailing '/'
    bool path_style = false;  // http://endpoint/bucket/key instead of http://bucket.endpoint/key
    std::string region = "us-east-1";
    Credentials credentials;
    int max_attempts = 8;        // per request, for 5xx, 429 and connection errors
    double backoff_s = 0.25;     // first wait; doubled per attempt up to max_backoff_s
    double max_backoff_s = 8.0;
    long connect_timeout_s = 10;
    long request_timeout_s = 1800;  // a whole request, body included
    long stall_timeout_s = 60;      // a request that moves no byte for this long fails (and is retried)
};

// Throws InputError naming the variables and the file looked at when no credentials are found, and
// when AWS_ENDPOINT_URL is not an http(s) URL.
S3Settings s3_settings_from_environment();

}  // namespace llmt::storage
