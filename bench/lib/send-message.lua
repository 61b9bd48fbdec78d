-- wrk's requests for the ingest and end-to-end figures (bench/lib/wrk.ts): one send_message per
-- request, each with its own uid and recipient. The body is the bench's own (posthorn.ts
-- sendMessageBody), given in POSTHORN_BODY with the marker @@UID@@ for the uid and 987654321 for
-- the request's number.
-- With POSTHORN_AMOUNT (one thread only), exactly that many requests: once they are all sent, the
-- connections wait, and the last answer ends the run (wrk's main thread ends only at its duration
-- or at SIGINT, which the script then raises).
local template = os.getenv("POSTHORN_BODY")
local prefix = os.getenv("POSTHORN_UID_PREFIX")
local parts, kinds = {}, {}
local pos = 1
while true do
  local u = string.find(template, "@@UID@@", pos, true)
  local n = string.find(template, "987654321", pos, true)
  local at, kind, len
  if u and (not n or u < n) then
    at, kind, len = u, "uid", 7
  elseif n then
    at, kind, len = n, "n", 9
  else
    break
  end
  parts[#parts + 1] = string.sub(template, pos, at - 1)
  kinds[#kinds + 1] = kind
  pos = at + len
end
local tail = string.sub(template, pos)

local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

local n = 0
local headers = { ["Content-Type"] = "application/json" }
local pieces = {}
function request()
  n = n + 1
  local uid = prefix .. "-" .. tid .. "-" .. n
  for i = 1, #parts do
    pieces[2 * i - 1] = parts[i]
    pieces[2 * i] = kinds[i] == "uid" and uid or tostring(n)
  end
  pieces[2 * #parts + 1] = tail
  return wrk.format("POST", "/v.1.1/send_message", headers, table.concat(pieces, "", 1, 2 * #parts + 1))
end

local amount = tonumber(os.getenv("POSTHORN_AMOUNT") or "")
if amount then
  local ffi = require("ffi")
  ffi.cdef [[
    int getpid(void);
    int kill(int pid, int sig);
  ]]
  local SIGINT = 2
  -- wrk asks delay() before each request it sends (request() is also called once at the thread's
  -- start for a request it never sends): a connection whose request would be past the amount
  -- waits (an hour: far beyond the run).
  local sent, answered = 0, 0
  function delay()
    if sent >= amount then return 3600000 end
    sent = sent + 1
    return 0
  end

  function response(status, headers, body)
    answered = answered + 1
    if answered == amount then
      wrk.thread:stop()
      ffi.C.kill(ffi.C.getpid(), SIGINT)
    end
  end
end
