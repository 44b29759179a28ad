#!/usr/bin/env python3
"""Signs one S3 request with botocore's SigV4 signer (AWS's own Python implementation, Debian's
python3-botocore) at a fixed time and prints the Authorization header, so sigv4_test.cpp can compare
ours with it. Input on stdin, JSON: method, url (already URI-encoded), headers, body, access_key,
secret_key, token, region, amz_date."""
import json
import sys

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

spec = json.load(sys.stdin)
creds = Credentials(spec["access_key"], spec["secret_key"], spec["token"] or None)
request = AWSRequest(method=spec["method"], url=spec["url"], data=spec["body"].encode(), headers=spec["headers"])
auth = S3SigV4Auth(creds, "s3", spec["region"])
# add_auth() without its clock: the same steps with the timestamp given.
request.context["timestamp"] = spec["amz_date"]
auth._modify_request_before_signing(request)
canonical = auth.canonical_request(request)
signature = auth.signature(auth.string_to_sign(request, canonical), request)
auth._inject_signature_to_request(request, signature)
print(request.headers["Authorization"])
