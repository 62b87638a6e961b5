-- wrk script for scripts/bench-http.sh: POSTs the sample requests of
-- BENCH_TRAFFIC (one JSON request object a line) to BENCH_PATH, cycling
-- through them, each thread from its own offset. Every non-200 answer is
-- counted and printed at the end, so a broken server cannot pass for a fast
-- one.
local path = os.getenv("BENCH_PATH") or "/v1/policies/edge-firewall:evaluate"
local traffic = os.getenv("BENCH_TRAFFIC") or "policies.example/_traffic/sample.jsonl"
-- BENCH_WRAP=input sends {"input": <request>}, as OPA's data API takes it.
local wrap = os.getenv("BENCH_WRAP") or ""
local requests = {}
local n = 0
local i = 0
local bad = 0

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
  table.insert(threads, thread)
end

function init(args)
  local headers = { ["Content-Type"] = "application/json" }
  for line in io.lines(traffic) do
    if line ~= "" then
      n = n + 1
      if wrap ~= "" then
        line = '{"' .. wrap .. '":' .. line .. '}'
      end
      requests[n] = wrk.format("POST", path, headers, line)
    end
  end
  if n == 0 then
    error("no requests in " .. traffic)
  end
  i = ((id or 1) * 997) % n
end

function request()
  i = i % n + 1
  return requests[i]
end

function response(status, headers, body)
  if status ~= 200 then
    bad = bad + 1
  end
end

function done(summary, latency, requests)
  local total = 0
  for _, t in ipairs(threads) do
    total = total + (t:get("bad") or 0)
  end
  io.write(string.format("non-200: %d\n", total))
end
