-- SPDX-License-Identifier: Apache-2.0
-- bench/s3/report.lua: wrk done() hook shared by get.lua and put.lua. Prints one
-- line "WRK requests=.. duration_us=.. errors=.. p50_us=.. p99_us=.." that
-- bench/s3/run.sh parses (bytes counts response bytes received, partial ones
-- included); errors counts connect/read/write errors, timeouts and
-- HTTP statuses >= 400, so a run that got errors is reported, never silently fast.
function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "WRK requests=%d duration_us=%d bytes=%d errors=%d status_errors=%d p50_us=%d p99_us=%d\n",
      summary.requests, summary.duration, summary.bytes,
      e.connect + e.read + e.write + e.timeout + e.status, e.status,
      latency:percentile(50), latency:percentile(99)))
end
