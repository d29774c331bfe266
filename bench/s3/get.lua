-- SPDX-License-Identifier: Apache-2.0
-- bench/s3/get.lua: wrk script for GETs of one URL (given on the command line).
-- No request() function, so wrk keeps its fastest static-request path; this only
-- adds a machine-readable summary line (see report.lua).
dofile(os.getenv("BENCH_S3_DIR") .. "/report.lua")
