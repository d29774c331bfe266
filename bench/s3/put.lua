-- SPDX-License-Identifier: Apache-2.0
-- bench/s3/put.lua: wrk script for PUTs. Arguments after "--": PATHFILE BODYFILE.
-- PATHFILE holds request paths (with query, e.g. presigned URLs), one per line;
-- every request is built once in init() and the connections of each thread take
-- them round robin, so concurrent PUTs go to distinct keys.
dofile(os.getenv("BENCH_S3_DIR") .. "/report.lua")

local reqs = {}
local idx = 0

local counter = 0

function setup(thread)
   thread:set("tid", counter)
   counter = counter + 1
end

function init(args)
   local f = assert(io.open(args[2], "rb"))
   local body = f:read("*a")
   f:close()
   for line in io.lines(args[1]) do
      if line ~= "" then
         reqs[#reqs + 1] = wrk.format("PUT", line, nil, body)
      end
   end
   idx = (tid or 0) * 8 % #reqs
end

function request()
   idx = idx % #reqs + 1
   return reqs[idx]
end
