-- SPDX-License-Identifier: Apache-2.0
-- bench/s3/populate.lua: wrk script that PUTs one body to every path of a file once,
-- then stops. Arguments after "--": PATHFILE BODYFILE NTHREADS. Thread t of N takes
-- the lines t, t+N, t+2N, ... and stops when it has as many answers as lines (a
-- connection that asked for more meanwhile writes a path of its share again: an
-- overwrite). Used to give a server a history (bench/s3/run.sh, state "hist").
dofile(os.getenv("BENCH_S3_DIR") .. "/report.lua")

local counter = 0
function setup(thread)
   thread:set("tid", counter)
   counter = counter + 1
end

local paths, body, idx, answered, donefile = {}, nil, 0, 0, nil

function init(args)
   local f = assert(io.open(args[2], "rb"))
   body = f:read("*a")
   f:close()
   local n, i = tonumber(args[3]), 0
   donefile = args[4] .. tid
   for line in io.lines(args[1]) do
      if line ~= "" then
         if i % n == tid then paths[#paths + 1] = line end
         i = i + 1
      end
   end
end

function request()
   idx = idx % #paths + 1
   return wrk.format("PUT", paths[idx], nil, body)
end

function response(status, headers, b)
   answered = answered + 1
   if answered == #paths then
      io.open(donefile, "w"):close()
      wrk.thread:stop()
   end
end
