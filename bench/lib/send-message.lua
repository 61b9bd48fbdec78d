-- wrk's requests for the ingest figures (bench/lib/wrk.ts): one send_message per request, each
-- with its own uid and recipient. The body is the bench's own (posthorn.ts sendMessageBody), given
-- in POSTHORN_BODY with the marker @@UID@@ for the uid and 987654321 for the request's number.
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
