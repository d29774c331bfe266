-- SPDX-License-Identifier: Apache-2.0
-- bench/s3/mix.lua: wrk script for a mixed load. Arguments after "--": MIXFILE
-- BODYFILE. MIXFILE holds lines "METHOD path" (GET, PUT or DELETE); every request
-- takes a line at random; PUTs send BODYFILE. Statuses are not checked here (a
-- DELETE of a key already deleted answers 404 on nginx, 204 on S3): this load only
-- gives a server a history, its rate is reported for information.
dofile(os.getenv("BENCH_S3_DIR") .. "/report.lua")

local counter = 0
function setup(thread)
   thread:set("tid", counter)
   counter = counter + 1
end

local reqs = {}

function init(args)
   local f = assert(io.open(args[2], "rb"))
   local body = f:read("*a")
   f:close()
   for line in io.lines(args[1]) do
      local m, p = line:match("^(%u+) (.+)$")
      if m then reqs[#reqs + 1] = wrk.format(m, p, nil, m == "PUT" and body or nil) end
   end
   math.randomseed(4242 + (tid or 0))
end

function request()
   return reqs[math.random(#reqs)]
end
